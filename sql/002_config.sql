-- Configuration as code (issue 3, docs/config.md). Every row carries project_id; `definition`
-- keeps the entry exactly as pushed (unknown fields included) so `svc pull` returns it, and
-- typed columns hold what later layers query.

-- The config pin of a project: the last pushed top-level identity and pass-through fields.
create table project_configs (
  project_id          text primary key references projects(id) on delete cascade,
  key                 text not null,
  name                text not null,
  config_type         text,
  operation_base_url  text,
  extra               jsonb not null default '{}'::jsonb,
  pushed_at           timestamptz not null default now()
);

create table operations (
  project_id  text not null references projects(id) on delete cascade,
  key         text not null,
  position    integer not null default 0,
  name        text,
  -- The endpoint with operationBaseUrl already prepended when it was relative.
  url         text not null,
  definition  jsonb not null,
  updated_at  timestamptz not null default now(),
  primary key (project_id, key)
);

create table hooks (
  project_id     text not null references projects(id) on delete cascade,
  key            text not null,
  position       integer not null default 0,
  event          text not null,
  operation_key  text not null,
  model_key      text,
  definition     jsonb not null,
  updated_at     timestamptz not null default now(),
  primary key (project_id, key)
);
create index hooks_event on hooks (project_id, event);

create table schedules (
  project_id     text not null references projects(id) on delete cascade,
  key            text not null,
  position       integer not null default 0,
  operation_key  text not null,
  cron           text not null,
  timezone       text not null default 'UTC',
  enabled        boolean not null default true,
  definition     jsonb not null,
  updated_at     timestamptz not null default now(),
  primary key (project_id, key)
);

create table segments (
  project_id  text not null references projects(id) on delete cascade,
  key         text not null,
  position    integer not null default 0,
  is_active   boolean not null default true,
  definition  jsonb not null,
  updated_at  timestamptz not null default now(),
  primary key (project_id, key)
);

create table auth_providers (
  project_id  text not null references projects(id) on delete cascade,
  key         text not null,
  position    integer not null default 0,
  type        text not null,
  enabled     boolean not null default true,
  is_default  boolean not null default false,
  priority    double precision not null default 0,
  definition  jsonb not null,
  updated_at  timestamptz not null default now(),
  primary key (project_id, key)
);

create table relying_parties (
  project_id       text not null references projects(id) on delete cascade,
  key              text not null, -- the clientId
  position         integer not null default 0,
  kind             text not null default 'customer' check (kind in ('customer', 'admin')),
  name             text not null,
  redirect_uris    text[] not null default '{}',
  allowed_scopes   text[],
  allowed_origins  text[] not null default '{}',
  post_login_url   text,
  definition       jsonb not null,
  updated_at       timestamptz not null default now(),
  primary key (project_id, key)
);

-- White-label login domains. Kept apart from relying_parties so that re-creating a party
-- (push --force) does not throw away a verification.
create table custom_domains (
  id               text primary key,
  project_id       text not null references projects(id) on delete cascade,
  domain           text not null,
  client_id        text not null,
  status           text not null default 'pending' check (status in ('pending', 'verified')),
  challenge_token  text not null,
  cname_target     text not null,
  created_at       timestamptz not null default now(),
  verified_at      timestamptz,
  unique (project_id, domain)
);
-- A verified domain serves one project only.
create unique index custom_domains_verified on custom_domains (domain) where status = 'verified';

create table placements (
  project_id  text not null references projects(id) on delete cascade,
  key         text not null,
  position    integer not null default 0,
  type        text not null,
  model_keys  text[] not null default '{}',
  definition  jsonb not null,
  updated_at  timestamptz not null default now(),
  primary key (project_id, key)
);

create table apps (
  project_id  text not null references projects(id) on delete cascade,
  key         text not null, -- the app name
  position    integer not null default 0,
  source      text not null,
  definition  jsonb not null,
  updated_at  timestamptz not null default now(),
  primary key (project_id, key)
);

create table design_tokens (
  project_id  text primary key references projects(id) on delete cascade,
  document    jsonb not null,
  updated_at  timestamptz not null default now()
);

-- API keys provisioned by the config, matched by name so a second push creates no duplicate.
create table config_api_keys (
  project_id  text not null references projects(id) on delete cascade,
  name        text not null,
  api_key_id  text not null references api_keys(id) on delete cascade,
  definition  jsonb not null,
  primary key (project_id, name)
);

create table customer_roles (
  id           text primary key,
  project_id   text not null references projects(id) on delete cascade,
  key          text not null,
  name         text not null,
  permissions  text[] not null default '{}',
  is_default   boolean not null default false,
  definition   jsonb not null default '{}'::jsonb,
  disabled_at  timestamptz,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  unique (project_id, key)
);

-- Customers arrive in a later issue; assignments are stored against their ids now.
create table customer_role_assignments (
  project_id   text not null references projects(id) on delete cascade,
  customer_id  text not null,
  role_id      text not null references customer_roles(id) on delete cascade,
  assigned_at  timestamptz not null default now(),
  primary key (project_id, customer_id, role_id)
);
create index customer_role_assignments_role on customer_role_assignments (role_id);

-- Project secrets, AES-256-GCM encrypted at rest (src/config-file/secrets.ts).
create table secrets (
  id          text primary key,
  project_id  text not null references projects(id) on delete cascade,
  owner_kind  text not null,
  label       text not null,
  iv          bytea not null,
  ciphertext  bytea not null,
  tag         bytea not null,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  unique (project_id, owner_kind, label)
);
