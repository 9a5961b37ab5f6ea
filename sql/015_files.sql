-- Files and media (src/files, docs/files.md). A row is one upload; its bytes live in the
-- storage backend under their SHA-256, so identical bytes are stored once however many rows
-- (of any project) name them. `deleted_at` marks a soft delete: hidden, URL answers 404, bytes kept.
create table files (
  id            text primary key,
  project_id    text not null references projects(id) on delete cascade,
  sha256        text not null check (sha256 ~ '^[0-9a-f]{64}$'),
  filename      text not null,
  content_type  text not null,
  size          bigint not null check (size > 0),
  width         integer,
  height        integer,
  alt           text,
  folder        text,
  -- The customer whose token came with the upload; null for key-only uploads.
  customer_id   text,
  key_id        text,
  created_at    timestamptz not null default now(),
  deleted_at    timestamptz
);
create index files_project_list on files (project_id, created_at desc, id desc);
create index files_sha256 on files (sha256);
