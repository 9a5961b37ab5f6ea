-- Customers (issue 12): end users of a project, their sessions and tokens, the deployment's
-- token signing keys, one-time codes, login throttling, mail opt-outs and notifications.
-- Secrets are never stored in the clear: passwords as argon2id, refresh tokens and one-time
-- codes as SHA-256, private signing keys AES-256-GCM encrypted with the vault's key.

-- Ed25519 signing keys of the deployment (not per project, not per process). A key is
-- published in /.well-known/jwks.json from created_at, signs from active_from (rotation
-- publishes before it signs), stops signing at retired_at and leaves the key set at
-- expires_at, once every token it signed has expired.
create table signing_keys (
  kid          text primary key,
  alg          text not null default 'EdDSA',
  public_jwk   jsonb not null,
  iv           bytea not null,
  ciphertext   bytea not null,
  tag          bytea not null,
  created_at   timestamptz not null default now(),
  active_from  timestamptz not null default now(),
  retired_at   timestamptz,
  expires_at   timestamptz
);

create table customers (
  id             text primary key,
  project_id     text not null references projects(id) on delete cascade,
  -- Lower-cased; unique per project (accounts are never shared across projects).
  email          text not null,
  name           text,
  password_hash  text,
  -- Profile attributes that segment rules read (`left.path`).
  attributes     jsonb not null default '{}'::jsonb,
  email_verified_at timestamptz,
  disabled_at    timestamptz,
  last_login_at  timestamptz,
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  unique (project_id, email)
);

-- One login = one session (`sid` claim). Scopes are stamped at login and re-used on refresh.
create table customer_sessions (
  id            text primary key,
  project_id    text not null references projects(id) on delete cascade,
  customer_id   text not null references customers(id) on delete cascade,
  scopes        text[] not null,
  roles         text[] not null default '{}',
  created_at    timestamptz not null default now(),
  refreshed_at  timestamptz not null default now(),
  expires_at    timestamptz not null,
  revoked_at    timestamptz,
  revoked_reason text
);
create index customer_sessions_customer on customer_sessions (project_id, customer_id);
create index customer_sessions_revoked on customer_sessions (revoked_at) where revoked_at is not null;

-- Refresh tokens, hashed. Rotation marks the old one rotated; presenting a rotated one again
-- is reuse (RFC 9700 §4.14) and revokes the whole session.
create table customer_refresh_tokens (
  token_hash   text primary key,
  session_id   text not null references customer_sessions(id) on delete cascade,
  created_at   timestamptz not null default now(),
  rotated_at   timestamptz
);
create index customer_refresh_tokens_session on customer_refresh_tokens (session_id);

-- One-time login codes, hashed, single use, short-lived.
create table customer_otps (
  id          text primary key,
  project_id  text not null references projects(id) on delete cascade,
  email       text not null,
  code_hash   text not null,
  attempts    integer not null default 0,
  expires_at  timestamptz not null,
  used_at     timestamptz,
  created_at  timestamptz not null default now()
);
create index customer_otps_email on customer_otps (project_id, email, created_at);

-- Failed logins per subject (`email:<addr>` or `ip:<addr>`), counted over a sliding window.
create table customer_login_failures (
  project_id  text not null,
  subject     text not null,
  failed_at   timestamptz not null default now()
);
create index customer_login_failures_subject on customer_login_failures (project_id, subject, failed_at);

-- RFC 8058 one-click unsubscribes; list '*' opts out of every non-essential mail.
create table email_unsubscribes (
  project_id  text not null references projects(id) on delete cascade,
  email       text not null,
  list        text not null,
  created_at  timestamptz not null default now(),
  primary key (project_id, email, list)
);

create table notifications (
  id           text primary key,
  project_id   text not null references projects(id) on delete cascade,
  customer_id  text not null references customers(id) on delete cascade,
  type         text not null,
  title        text not null,
  body         text,
  data         jsonb,
  read_at      timestamptz,
  created_at   timestamptz not null default now()
);
create index notifications_customer on notifications (project_id, customer_id, created_at desc, id);

create table notification_preferences (
  project_id   text not null references projects(id) on delete cascade,
  customer_id  text not null references customers(id) on delete cascade,
  -- { "<type>": false } mutes a type; { "*": false } mutes everything.
  preferences  jsonb not null default '{}'::jsonb,
  updated_at   timestamptz not null default now(),
  primary key (project_id, customer_id)
);

-- Customer-written records remember their owner (`self` field access).
alter table records add column owner_customer_id text;
create index records_owner on records (project_id, owner_customer_id) where owner_customer_id is not null;

-- Record variants (targeting): content per variant beside the default content of
-- record_content, with the rules that select it. Evaluated in `position` order.
create table record_variants (
  record_id   text not null references records(id) on delete cascade,
  project_id  text not null,
  variant_id  text not null,
  stage       text not null check (stage in ('draft', 'published')),
  locale      text not null,
  position    integer not null default 0,
  rules       jsonb not null default '[]'::jsonb,
  data        jsonb not null,
  updated_at  timestamptz not null default now(),
  primary key (record_id, variant_id, stage, locale)
);
create index record_variants_project on record_variants (project_id, record_id);
