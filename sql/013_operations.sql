-- Operations, hooks and schedules (issue 15, docs/operations.md).

-- One row per execution of an operation. The row is the queue: dispatchers claim `pending`
-- rows with FOR UPDATE SKIP LOCKED; a claimed row carries its owner's lease, and a row whose
-- lease ran out (its process died mid-call) is claimed again. Hook and schedule executions are
-- inserted in the transaction of what caused them, so the row is also the outbox.
create table operation_executions (
  id                text primary key,
  project_id        text not null references projects(id) on delete cascade,
  operation_key     text not null,
  -- The endpoint as pushed when the execution was created (operationBaseUrl joined).
  url               text not null,
  status            text not null default 'pending'
                    check (status in ('pending', 'dispatched', 'running', 'completed', 'failed', 'cancelled', 'timed_out')),
  trigger           text not null default 'api' check (trigger in ('api', 'hook', 'schedule')),
  trigger_key       text,
  input             jsonb,
  progress_pct      integer,
  progress_message  text,
  result            jsonb,
  error             jsonb,
  -- The endpoint answered 202: callbacks drive the execution now, no call is in flight.
  accepted          boolean not null default false,
  attempts          integer not null default 0,
  max_attempts      integer not null default 1,
  -- Failed after its last retry (hooks): kept for `svc executions list --dead-letter`.
  dead_letter       boolean not null default false,
  next_run_at       timestamptz not null default now(),
  lease_owner       text,
  lease_until       timestamptz,
  deadline_at       timestamptz,
  timeout_ms        integer not null default 30000,
  created_by        text,
  created_at        timestamptz not null default now(),
  updated_at        timestamptz not null default now(),
  finished_at       timestamptz
);
create index operation_executions_pending on operation_executions (next_run_at) where status = 'pending';
create index operation_executions_active on operation_executions (project_id) where status in ('dispatched', 'running');
create index operation_executions_list on operation_executions (project_id, created_at desc, id desc);

-- The per-project secret endpoints verify X-Svc-Signature with (AES-256-GCM at rest, vault
-- key). The newest version signs; the one before still verifies callbacks for a grace period.
create table operation_signing_secrets (
  project_id  text not null references projects(id) on delete cascade,
  version     integer not null,
  iv          bytea not null,
  ciphertext  bytea not null,
  tag         bytea not null,
  created_at  timestamptz not null default now(),
  primary key (project_id, version)
);

-- One row per schedule and occurrence: the primary key makes each occurrence fire once,
-- whichever process sees it first. Manual triggers are rows too (manual = true).
create table schedule_runs (
  project_id    text not null references projects(id) on delete cascade,
  schedule_key  text not null,
  fire_at       timestamptz not null,
  manual        boolean not null default false,
  execution_id  text,
  created_at    timestamptz not null default now(),
  primary key (project_id, schedule_key, fire_at)
);
create index schedule_runs_last on schedule_runs (project_id, schedule_key, fire_at desc) where not manual;

-- The call timeout of an operation: `timeoutSeconds` from its definition (up to 900), else 30 s.
create function operation_timeout_ms(definition jsonb) returns integer language sql immutable as $$
  select coalesce(case when jsonb_typeof(definition->'timeoutSeconds') = 'number' and (definition->>'timeoutSeconds')::numeric > 0
                       then least((definition->>'timeoutSeconds')::numeric, 900) * 1000 end, 30000)::integer
$$;
