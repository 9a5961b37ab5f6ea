-- Fleet groups (src/fleet): a tenant's centrally managed schema, published in versions, and
-- the projects provisioned into them (POST /v1/provision).

-- A group is named by its key (`svc fleet-groups publish --group <key>`), unique per tenant:
-- two tenants may both have a group "storefronts". `id` stays the internal reference.
alter table fleet_groups add column key text;
update fleet_groups set key = id where key is null;
alter table fleet_groups alter column key set not null;
alter table fleet_groups add column updated_at timestamptz not null default now();
create unique index fleet_groups_tenant_key on fleet_groups (tenant_id, key);

-- Every published version is kept: members are pinned to one, and a version never changes.
create table fleet_group_versions (
  group_id      text not null references fleet_groups(id) on delete cascade,
  version       integer not null check (version > 0),
  -- { "models": [ModelDef, …] }: the API shape every member serves.
  schema        jsonb not null,
  published_by  text,
  published_at  timestamptz not null default now(),
  primary key (group_id, version)
);

-- The group version a member project is pinned to (null for projects outside any group).
-- Its models come from fleet_group_versions; its own `models` rows stay empty.
alter table projects add column fleet_schema_version integer;
create index projects_fleet_group on projects (fleet_group_id) where fleet_group_id is not null;

-- One row per (tenant, provision_id): the idempotency record of POST /v1/provision. Each step
-- flag is set in the same transaction as the step's effect, so a re-send resumes after the last
-- committed step and never repeats one. project_id is chosen when the row is claimed.
create table provisions (
  tenant_id            text not null references tenants(id) on delete cascade,
  provision_id         text not null,
  request_hash         text not null,
  key_id               text not null,
  project_id           text not null,
  group_id             text not null references fleet_groups(id) on delete cascade,
  name                 text not null,
  branding             jsonb,
  allow_list_key_ids   text[] not null default '{}',
  schema_version       integer,
  status               text not null default 'in_progress' check (status in ('in_progress', 'failed', 'completed')),
  created_project      boolean not null default false,
  group_joined         boolean not null default false,
  branding_set         boolean not null default false,
  allow_list_extended  boolean not null default false,
  last_error           text,
  created_at           timestamptz not null default now(),
  updated_at           timestamptz not null default now(),
  primary key (tenant_id, provision_id)
);
create unique index provisions_project on provisions (project_id);
