-- Targeting (issue 12, item 5): record variants live beside the content they vary. Each
-- record_content row (record, stage, locale) may carry its variants, in evaluation order:
--   [ { "id": "vip", "rules": [ <rule nodes> ], "data": { <full content of the variant> } } ]
-- A read takes the first variant whose rules hold for its context, else `data` (the default
-- variant). Kept in the row so that a read costs no join and no second statement; null (the
-- common case) costs nothing. Publishing copies the column with the content.
alter table record_content add column variants jsonb;

-- Superseded by record_content.variants (010 created it; nothing ever wrote to it).
drop table record_variants;

-- History entries name the variant they wrote (null: the default content).
alter table record_versions add column variant_id text;
