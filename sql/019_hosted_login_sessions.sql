-- Hosted login (issue 16, items 4–6): browser sessions on the auth host, the OpenID binding of
-- a customer session, upstream ("Sign in with …") logins and linked upstream identities.

-- A browser session at the hosted login: the cookie holds a random token, stored here as
-- SHA-256 only. The token rotates on every use; logout revokes the row and clears the cookie.
create table auth_browser_sessions (
  id           text primary key,
  token_hash   text not null unique,
  project_id   text not null references projects(id) on delete cascade,
  customer_id  text not null references customers(id) on delete cascade,
  -- The host the cookie lives on (the auth host or a custom domain).
  host         text not null,
  auth_time    timestamptz not null,
  created_at   timestamptz not null default now(),
  rotated_at   timestamptz not null default now(),
  expires_at   timestamptz not null,
  revoked_at   timestamptz
);
create index auth_browser_sessions_customer on auth_browser_sessions (project_id, customer_id);
create index auth_browser_sessions_expires on auth_browser_sessions (expires_at);

-- A customer session obtained through the OpenID provider remembers its party, issuer and
-- OpenID scopes: the refresh grant answers only that party and mints a new ID token.
alter table customer_sessions
  add column oidc_client_id text,
  add column oidc_issuer    text,
  add column oidc_scopes    text[],
  add column auth_time      timestamptz;

-- The issuer a code was issued under (the deployment's, or a custom domain's).
alter table oauth_codes add column issuer text;

-- An upstream login in flight: created when the customer picks "Continue with …", spent by
-- the callback. The state is stored hashed; the PKCE verifier and nonce are derived from it
-- with the vault key and never stored. `browser_hash` binds it to the browser that started it.
create table auth_upstream_states (
  state_hash    text primary key,
  project_id    text not null references projects(id) on delete cascade,
  provider_key  text not null,
  browser_hash  text not null,
  issuer        text not null,
  callback_uri  text not null,
  request       jsonb not null,
  expires_at    timestamptz not null,
  used_at       timestamptz
);
create index auth_upstream_states_expires on auth_upstream_states (expires_at);

-- Upstream identities linked to customers (by provider key and the upstream `sub`).
create table customer_identities (
  project_id    text not null references projects(id) on delete cascade,
  provider_key  text not null,
  subject       text not null,
  customer_id   text not null references customers(id) on delete cascade,
  email         text,
  created_at    timestamptz not null default now(),
  last_login_at timestamptz not null default now(),
  primary key (project_id, provider_key, subject)
);
create index customer_identities_customer on customer_identities (project_id, customer_id);
