-- Read replicas (issue 32, src/store/replicas.ts): every notification the relay sends names the
-- primary's flushed WAL position, `"lsn":"X/Y"`, first in the payload's object. It is read after
-- the DELETE took its snapshot: the rows sent were committed before that, and a commit (with
-- synchronous_commit on, as docs/scaling.md asks) is flushed before it is visible, so the
-- position is at or past each one's commit record. The flushed position rather than the insert
-- or write one: it leaves out this relay's own delete (committed without waiting for its flush),
-- which no reader needs and a replica cannot have until the WAL writer flushes it. A process
-- hearing the events then knows how far a replica must have replayed to show them, and realtime
-- clients get it in content events' data. Everything else as 028_bus_notify_outbox.sql.
create or replace function svc_bus_relay(p_channel text, p_limit int) returns int language plpgsql as $$
declare ps text[];
declare stamp text;
begin
  if not pg_try_advisory_xact_lock(7302811461) then
    return -1;
  end if;
  perform set_config('synchronous_commit', 'off', true);
  with d as (
    delete from bus_notify_outbox where id in (select id from bus_notify_outbox order by id limit p_limit) returning id, payload
  )
  select array_agg(payload order by id) into ps from d;
  if ps is null then
    return 0;
  end if;
  stamp := '{"lsn":"' || pg_current_wal_flush_lsn()::text || '",';
  -- unnest keeps the array's order: the notifications go out in id order. Payloads are JSON
  -- objects ('{' first); 30 bytes more stay within NOTIFY's 8,000 (src/bus/postgres.ts budgets 7,500).
  perform pg_notify(p_channel, case when left(p, 1) = '{' then stamp || substr(p, 2) else p end) from unnest(ps) as p;
  return cardinality(ps);
end $$;
