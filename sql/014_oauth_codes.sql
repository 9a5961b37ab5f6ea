-- Hosted customer login (issue 16): authorization codes of the OpenID provider. Stored as
-- SHA-256, single use, 60 seconds, bound to the client, the redirect URI and the PKCE
-- challenge. The session is written at login; the code hands it out once. A code presented
-- again (used_at set) revokes that session (RFC 6749 §4.1.2, RFC 9700 §4.2.4).
create table oauth_codes (
  code_hash      text primary key,
  project_id     text not null references projects(id) on delete cascade,
  client_id      text not null,
  redirect_uri   text not null,
  code_challenge text not null,
  nonce          text,
  scopes         text[] not null,
  customer_id    text not null references customers(id) on delete cascade,
  session_id     text not null references customer_sessions(id) on delete cascade,
  auth_time      timestamptz not null default now(),
  expires_at     timestamptz not null,
  used_at        timestamptz
);
create index oauth_codes_expires on oauth_codes (expires_at);
