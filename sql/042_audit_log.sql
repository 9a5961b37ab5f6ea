-- Audit log (issue 30, docs/audit.md): one row per change made through the control plane,
-- GraphQL writes (and so the CLI and the Studio, which use them) and collaboration saves.
-- Rows are written in the transaction of the change where there is one (a record write's
-- pipelined transaction carries one more INSERT), never holding a secret's value. No foreign
-- keys: an entry outlives what it names (a deleted record, key or project) until the project's
-- retention (project.settings.auditRetentionDays, default 90) purges it.
--
-- Kept cheap to write (it rides along every record write): no primary key (ids come from the
-- sequence, unique by construction), one btree that serves every read (a project's entries,
-- newest first, paged by id), and a BRIN index on `at` for the purge (rows arrive in time order,
-- so BRIN's few pages cover it at almost no cost per insert).
create sequence audit_log_id_seq;
create table audit_log (
  id          bigint not null default nextval('audit_log_id_seq'),
  project_id  text,
  tenant_id   text,
  at          timestamptz not null default now(),
  -- 'member' | 'apiKey' | 'customer' | 'root' (written by the service only: no CHECK, whose
  -- expression PostgreSQL prepares again at every insert; sql/029_write_pg_cost.sql).
  actor_kind  text not null,
  actor_id    text,
  action      text not null,
  target_kind text not null,
  target_id   text,
  request_id  text,
  ip          text,
  user_agent  text
);
create index audit_log_project on audit_log (project_id, id desc);
create index audit_log_tenant on audit_log (tenant_id, id desc) where project_id is null;
create index audit_log_at on audit_log using brin (at);
