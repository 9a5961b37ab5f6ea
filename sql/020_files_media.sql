-- Files and media, second part (src/files, docs/files.md): two-step signed uploads, video
-- posters and HLS renditions made by background jobs, and the retention sweep of soft deletes.

-- Videos: duration (seconds) and what the media job derived, by name under the blob's derived
-- objects: { "poster": "poster.jpg", "hls": "hls-master.m3u8" }; null until the job ran.
alter table files add column duration real;
alter table files add column media jsonb;
create index files_deleted on files (deleted_at) where deleted_at is not null;
create index files_project_size on files (project_id) include (size);

-- createFileUpload → a signed, single-use, size-bound URL → confirmFileUpload. The row's id is
-- the id the file gets on confirmation; the token is stored hashed.
create table file_uploads (
  id             text primary key,
  project_id     text not null references projects(id) on delete cascade,
  filename       text not null,
  declared_type  text not null,
  declared_size  bigint not null check (declared_size > 0),
  alt            text,
  folder         text,
  customer_id    text,
  key_id         text,
  token_hash     text not null,
  expires_at     timestamptz not null,
  -- The PUT to svc's upload URL arrived (local storage); S3 uploads go straight to the bucket.
  uploaded_at    timestamptz,
  confirmed_at   timestamptz,
  created_at     timestamptz not null default now()
);
create index file_uploads_open on file_uploads (expires_at) where confirmed_at is null;

-- Media jobs (video poster and HLS): claimed with SKIP LOCKED by any worker process.
create table file_jobs (
  id            text primary key,
  file_id       text not null references files(id) on delete cascade,
  project_id    text not null,
  kind          text not null check (kind in ('video')),
  status        text not null default 'pending' check (status in ('pending', 'running', 'completed', 'failed', 'skipped')),
  attempts      integer not null default 0,
  locked_until  timestamptz,
  error         text,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now()
);
create index file_jobs_open on file_jobs (created_at) where status in ('pending', 'running');
