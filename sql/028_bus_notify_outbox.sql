-- The PostgreSQL bus' transactional outbox (issue 11, session 4; src/actors/bus-postgres.ts).
-- A NOTIFY inside a write transaction takes a database-wide lock at commit and holds it through
-- the commit's WAL flush, so every notifying transaction committed one fsync at a time (16
-- connections of bare INSERTs: 8,920 commits/s; with a pg_notify each: 467/s). Record writes now
-- insert their notifications here, in their own transaction, and commit like any other write
-- (PostgreSQL flushes concurrent commits together); a relay sends committed rows as NOTIFYs in id
-- order and deletes them, in one transaction that commits without waiting for its flush (it
-- writes nothing that must survive a crash: its rows are back if its commit is lost, and sent again).
create table if not exists bus_notify_outbox (
  id bigserial primary key,
  payload text not null
);

-- One relay at a time across processes (transaction-scoped advisory lock; -1: another holds it).
-- Sends at most p_limit rows, oldest first, and answers how many.
create or replace function svc_bus_relay(p_channel text, p_limit int) returns int language plpgsql as $$
declare ps text[];
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
  -- unnest keeps the array's order: the notifications go out in id order.
  perform pg_notify(p_channel, p) from unnest(ps) as p;
  return cardinality(ps);
end $$;
