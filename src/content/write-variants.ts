import type { ModelDef } from '../projects/types.ts';
import { validateData } from './validate.ts';
import type { Statement, WriteStep } from './tx.ts';
import {
  isVersioned,
  lockOrNotFound,
  noRecordMessage,
  requiredKeys,
  searchKeys,
  tooLongToIndex,
  type WriteContext,
} from './write.ts';

/**
 * Writes of a record's variants (record_content.variants; targeting rules in
 * content/targeting.ts), as statements like the other record writes of write.ts: one locks the
 * record (or fails with NOT_FOUND), the next changes the variant in the working content.
 */
export interface VariantWrite {
  variantId: string;
  /** Replaces the variant's rules when given (checked: content/targeting.ts ruleErrors). */
  rules?: unknown[] | null;
}

/**
 * Writes one variant of a record's working content in a locale (record_content.variants): the
 * patch goes over the variant's content, which starts, on its first write, as a copy of the
 * default content of that locale (or of the default locale, like a new locale does). A new
 * variant goes last in evaluation order; `rules` replace the variant's rules when given.
 * Unversioned models write both stages, as content writes do.
 */
export function updateVariant(
  ctx: WriteContext,
  model: ModelDef,
  id: string,
  localeArg: string | null | undefined,
  dataArg: unknown,
  variant: VariantWrite,
  notFoundMessage = noRecordMessage(model, id),
): WriteStep {
  const locale = localeArg || ctx.defaultLocale;
  const patch = validateData(model, dataArg ?? {}, ctx.models, { partial: true });
  const versioned = isVersioned(model);
  const json = JSON.stringify(patch);
  const rules = variant.rules === undefined || variant.rules === null ? null : JSON.stringify(variant.rules);
  const statement: Statement = {
    text: `with cur as (
        select coalesce(
            (select data from record_content where record_id = $1::text and stage = 'draft' and locale = $4::text),
            (select data from record_content where record_id = $1::text and stage = 'draft' and locale = $5::text),
            '{}'::jsonb) as base,
          coalesce((select variants from record_content where record_id = $1::text and stage = 'draft' and locale = $4::text), '[]'::jsonb) as vs
      ), old as (
        select cur.base, cur.vs, (select e from jsonb_array_elements(cur.vs) e where e->>'id' = $6::text limit 1) as v from cur
      ), nv as (
        select old.base, old.vs, old.v is null as fresh, jsonb_build_object(
          'id', $6::text,
          'rules', coalesce($7::text::jsonb, old.v->'rules', '[]'::jsonb),
          'data', svc_required(coalesce(old.v->'data', old.base) || $8::text::jsonb, $9::text[])) as v
        from old
      ), merged as (
        select nv.base, case when nv.fresh then nv.vs || jsonb_build_array(nv.v)
          else (select jsonb_agg(case when e->>'id' = $6::text then nv.v else e end order by i) from jsonb_array_elements(nv.vs) with ordinality a(e, i)) end as variants
        from nv
      ), c as (
        insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at, variants)
        select $1::text, $2::text, $3::text, s.stage, $4::text, m.base, svc_search(m.base, $10::text[]), now(), m.variants
        from merged m cross join unnest($11::text[]) as s(stage)
        on conflict (record_id, stage, locale) do update set variants = excluded.variants, updated_at = now()
      ), r as (
        update records set updated_at = now(), updated_by = $12::text, has_draft = $13::boolean,
          published_at = case when $13::boolean then published_at else now() end
        where id = $1::text
      )
      insert into record_versions (record_id, project_id, action, locale, data, user_id, variant_id)
      values ($1::text, $2::text, 'updated', $4::text, $8::text::jsonb, $12::text, $6::text)`,
    params: [
      id,
      ctx.projectId,
      model.key,
      locale,
      ctx.defaultLocale,
      variant.variantId,
      rules,
      json,
      versioned ? [] : requiredKeys(model),
      searchKeys(model),
      versioned ? ['draft'] : ['draft', 'published'],
      ctx.userId,
      versioned,
    ],
    mapError: (err) => tooLongToIndex(err, ctx.projectId, model, patch),
  };
  return {
    recordId: id,
    statements: [lockOrNotFound(ctx, model, id, notFoundMessage), statement],
    event: { action: 'updated', recordId: id, modelKey: model.key },
  };
}

/** Removes a variant from every locale of the working content (and the live one of unversioned models). */
export function deleteVariant(
  ctx: WriteContext,
  model: ModelDef,
  id: string,
  variantId: string,
  notFoundMessage = noRecordMessage(model, id),
): WriteStep {
  const stages = isVersioned(model) ? ['draft'] : ['draft', 'published'];
  const statement: Statement = {
    text: `with u as (
        update record_content c set updated_at = now(), variants = (
            select case when count(*) = 0 then null else jsonb_agg(e order by i) end
            from jsonb_array_elements(c.variants) with ordinality a(e, i) where e->>'id' <> $2::text)
        where c.record_id = $1::text and c.stage = any($3::text[]) and c.variants @> jsonb_build_array(jsonb_build_object('id', $2::text))
        returning 1
      ), r as (
        update records set updated_at = now(), updated_by = $5::text, has_draft = $6::boolean where id = $1::text and (select count(*) from u) > 0
      )
      select svc_check((select count(*) from u) > 0, 'SV404', $4::text)`,
    params: [id, variantId, stages, `Record "${id}" has no variant "${variantId}"`, ctx.userId, isVersioned(model)],
  };
  return {
    recordId: id,
    statements: [lockOrNotFound(ctx, model, id, notFoundMessage), statement],
    event: { action: 'updated', recordId: id, modelKey: model.key },
  };
}
