-- Member sign-in for the Studio (src/control/sessions.ts, docs/studio.md). A login is one
-- (tenant, email): its member rows (one per project, or tenant-wide) give its roles. Passwords
-- are argon2id; sessions, invitations and one-time codes keep only a hash of their secret.
create table member_logins (
  tenant_id      text not null references tenants(id) on delete cascade,
  email          text not null,
  password_hash  text,
  failed_logins  int not null default 0,
  locked_until   timestamptz,
  updated_at     timestamptz not null default now(),
  primary key (tenant_id, email)
);
create index member_logins_email on member_logins (email);

create table member_sessions (
  id            text primary key,
  tenant_id     text not null references tenants(id) on delete cascade,
  email         text not null,
  token_hash    text not null unique,
  created_at    timestamptz not null default now(),
  last_seen_at  timestamptz not null default now(),
  expires_at    timestamptz not null,
  revoked_at    timestamptz
);
create index member_sessions_login on member_sessions (tenant_id, email);

-- First-login links (`svc members add`) and password resets: single use.
create table member_invites (
  token_hash  text primary key,
  tenant_id   text not null references tenants(id) on delete cascade,
  email       text not null,
  expires_at  timestamptz not null,
  used_at     timestamptz
);

-- One-time sign-in codes (HMAC'd), 10 minutes, 5 tries.
create table member_codes (
  tenant_id   text not null references tenants(id) on delete cascade,
  email       text not null,
  code_hash   text not null,
  expires_at  timestamptz not null,
  attempts    int not null default 0,
  primary key (tenant_id, email)
);
