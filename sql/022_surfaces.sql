-- Issue 19: secrets over GraphQL (audit, key rotation), embeddings, app manifests, billing.

-- Which vault key encrypted a secret (the first 8 bytes of SHA-256 of the key, hex): a
-- rotation re-encrypts rows under the new key while the previous one still decrypts the rest.
alter table secrets add column key_id text;

-- One row per read or write of a project secret over GraphQL (never the value).
create table secret_audit (
  id          bigserial primary key,
  project_id  text not null references projects(id) on delete cascade,
  label       text not null,
  action      text not null check (action in ('read', 'put', 'delete')),
  -- The API key that acted (its id, never its value) and, with a customer token, the customer.
  api_key_id  text not null,
  customer_id text,
  found       boolean not null,
  at          timestamptz not null default now()
);
create index secret_audit_project on secret_audit (project_id, at);

-- Embeddings (semantic search): one vector per record and embedding model. `vec` is the source
-- of truth; with pgvector a generated `vector` column and per-dimension HNSW indexes are added
-- at start (src/search/store.ts). `norm` keeps the exact-cosine fallback to one pass per row.
create table embeddings (
  project_id  text not null references projects(id) on delete cascade,
  record_id   text not null references records(id) on delete cascade,
  model_key   text not null,
  model       text not null,
  dims        integer not null check (dims between 1 and 2000),
  vec         real[] not null,
  norm        double precision not null check (norm > 0),
  updated_at  timestamptz not null default now(),
  primary key (project_id, record_id, model)
);
create index embeddings_search on embeddings (project_id, model, dims, model_key);

-- The dimension of each embedding model of a project, fixed by its first vector.
create table embedding_models (
  project_id  text not null references projects(id) on delete cascade,
  model       text not null,
  dims        integer not null check (dims between 1 and 2000),
  created_at  timestamptz not null default now(),
  primary key (project_id, model)
);

-- The validated manifest of each installed app, fetched from its source at push time.
alter table apps add column manifest jsonb;
alter table apps add column manifest_fetched_at timestamptz;

-- Billing: each provider event stored once by its id; a tenant's plan and limits.
create table billing_events (
  provider     text not null,
  id           text not null,
  type         text not null,
  tenant_id    text references tenants(id) on delete set null,
  created      timestamptz,
  payload      jsonb not null,
  received_at  timestamptz not null default now(),
  primary key (provider, id)
);

alter table tenants add column plan text not null default 'free';
alter table tenants add column plan_status text not null default 'active';
alter table tenants add column plan_limits jsonb not null default '{}'::jsonb;
alter table tenants add column billing_customer_id text;
alter table tenants add column billing_subscription_id text;
alter table tenants add column plan_period_end timestamptz;
-- The provider time of the last event applied: an older event arriving late changes nothing.
alter table tenants add column plan_event_at timestamptz;
create unique index tenants_billing_customer on tenants (billing_customer_id) where billing_customer_id is not null;

-- Design tokens are served as pushed: json keeps the document's key order (jsonb sorts keys).
alter table design_tokens alter column document type json using document::json;
