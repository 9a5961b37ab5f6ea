-- Records (issue 4). A record row holds identity and system timestamps; its content lives in
-- record_content, one row per (stage, locale): stage 'draft' is the working version and
-- 'published' the published one. Unversioned models write both stages at once (one live
-- version). Every query filters by project_id first.
create table records (
  id            text primary key,
  project_id    text not null references projects(id) on delete cascade,
  model_key     text not null,
  natural_key   text,
  has_draft     boolean not null default true,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  published_at  timestamptz,
  created_by    text,
  updated_by    text
);
-- Natural keys are unique per project and model (nulls allowed many times).
create unique index records_natural_key on records (project_id, model_key, natural_key);
create index records_model on records (project_id, model_key, created_at, id);

-- Content per record, stage and locale. project_id and model_key are copied from the record so
-- list queries touch one table and its indexes; `search` is the full-text vector of the text
-- fields, computed on write.
create table record_content (
  record_id   text not null references records(id) on delete cascade,
  project_id  text not null,
  model_key   text not null,
  stage       text not null check (stage in ('draft', 'published')),
  locale      text not null,
  data        jsonb not null,
  search      tsvector not null default ''::tsvector,
  updated_at  timestamptz not null default now(),
  primary key (record_id, stage, locale)
);
-- Generic indexing (docs/graphql.md): the btree serves "one model, one stage, one locale" scans
-- in default (created) order; the GIN jsonb_path_ops index serves `eq`/`in`/list `contains` on
-- any queryable field through containment (@>), so no per-model DDL runs on schema pushes.
create index record_content_scan on record_content (project_id, model_key, stage, locale, record_id);
create index record_content_data on record_content using gin (data jsonb_path_ops);
create index record_content_search on record_content using gin (search);

-- Version history: one row per write, with who and when and the content written.
create table record_versions (
  id          bigserial primary key,
  record_id   text not null references records(id) on delete cascade,
  project_id  text not null,
  action      text not null check (action in ('created', 'updated', 'published', 'unpublished')),
  locale      text,
  data        jsonb,
  user_id     text,
  created_at  timestamptz not null default now()
);
create index record_versions_record on record_versions (record_id, id);
