-- Per-field expression indexes on record_content (issue 4, src/content/indexes.ts). Each
-- queryable scalar field of a model gets a partial btree index, created and dropped outside
-- any transaction (CREATE/DROP INDEX CONCURRENTLY) by the reconciler after a model push. This
-- table records which indexes belong to which project so stale ones can be found and dropped;
-- it has no foreign key on purpose: rows must outlive a deleted project until its indexes are
-- dropped. A row is written before its index is built, so a crash leaves a row whose index is
-- missing or invalid, which the next reconcile repairs.
create table record_field_indexes (
  name        text primary key,
  project_id  text not null,
  model_key   text not null,
  field_key   text not null,
  definition  text not null,
  created_at  timestamptz not null default now()
);
create index record_field_indexes_project on record_field_indexes (project_id);
