-- Trusted documents (pushed with `svc documents push` or the config's `documents`) and the
-- automatic-persisted-query store (documents registered by clients of `apq` keys), per project.
-- `hash` is the SHA-256 of `body` in lowercase hex. `valid`/`problem`: the last validation
-- against the project's schema (at push, and again at every schema push through the config).
create table documents (
  project_id  text not null references projects(id) on delete cascade,
  kind        text not null check (kind in ('trusted', 'apq')),
  hash        text not null check (hash ~ '^[0-9a-f]{64}$'),
  body        text not null,
  bytes       integer not null,
  valid       boolean not null default true,
  problem     text,
  created_at  timestamptz not null default now(),
  used_at     timestamptz not null default now(),
  primary key (project_id, kind, hash)
);
-- The APQ store evicts the least recently registered documents of a project first.
create index documents_by_age on documents (project_id, kind, used_at);

-- Per-key document policy; null: the project's setting (`documentPolicy`), else "any".
alter table api_keys add column documents text check (documents in ('any', 'apq', 'trusted-only'));
