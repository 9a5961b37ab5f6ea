-- Tenancy: tenants contain projects; members of a tenant hold control keys.
create table tenants (
  id          text primary key,
  name        text not null check (length(name) between 1 and 200),
  created_at  timestamptz not null default now()
);

-- Fleet groups hold a shared published schema; filled by the provisioning issue.
create table fleet_groups (
  id              text primary key,
  tenant_id       text not null references tenants(id) on delete cascade,
  name            text not null,
  schema_version  integer not null default 0,
  published_schema jsonb,
  created_at      timestamptz not null default now()
);
create index fleet_groups_tenant on fleet_groups (tenant_id);

create table projects (
  id              text primary key,
  tenant_id       text not null references tenants(id) on delete cascade,
  name            text not null check (length(name) between 1 and 200),
  fleet_group_id  text references fleet_groups(id) on delete set null,
  -- Bumped whenever the project's models change; keys compiled schemas and query caches.
  schema_version  integer not null default 0,
  settings        jsonb not null default '{}'::jsonb,
  default_locale  text not null default 'en',
  created_at      timestamptz not null default now()
);
create index projects_tenant on projects (tenant_id);

-- Admin members. project_id null means the role holds for every project of the tenant.
create table members (
  id          text primary key,
  tenant_id   text not null references tenants(id) on delete cascade,
  project_id  text references projects(id) on delete cascade,
  email       text not null,
  role        text not null check (role in ('owner', 'admin', 'editor', 'viewer')),
  created_at  timestamptz not null default now()
);
create index members_tenant on members (tenant_id);

-- Control keys `ck_<hex>`: only the SHA-256 of the value is kept.
create table control_keys (
  id          text primary key,
  member_id   text not null references members(id) on delete cascade,
  key_hash    text not null unique,
  created_at  timestamptz not null default now(),
  disabled_at timestamptz
);

-- API keys (`pk_`, `sk_`, `pk_t_`, `sk_t_`). project_id is null for tenant keys, whose
-- allow-list is project_ids. Only the SHA-256 of the value is kept; key_hint shows its start.
create table api_keys (
  id                 text primary key,
  tenant_id          text not null references tenants(id) on delete cascade,
  project_id         text references projects(id) on delete cascade,
  kind               text not null check (kind in ('pk', 'sk', 'pk_t', 'sk_t')),
  name               text not null,
  key_hash           text not null unique,
  key_hint           text not null,
  scopes             text[] not null default '{}',
  allowed_models     text[],
  allowed_file_types text[],
  project_ids        text[] not null default '{}',
  allowed_origins    text[],
  rate_limit         integer,
  expires_at         timestamptz,
  disabled_at        timestamptz,
  deleted_at         timestamptz,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now(),
  check ((kind in ('pk', 'sk')) = (project_id is not null))
);
create index api_keys_project on api_keys (project_id, name);
create index api_keys_tenant on api_keys (tenant_id);

-- Content models of a project, as validated from the config (see src/models/types.ts).
create table models (
  project_id  text not null references projects(id) on delete cascade,
  key         text not null,
  position    integer not null default 0,
  definition  jsonb not null,
  updated_at  timestamptz not null default now(),
  primary key (project_id, key)
);
