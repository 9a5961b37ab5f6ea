-- The dispatcher's claim as one function (issue 15, src/operations/dispatcher.ts): it takes a
-- transaction-scoped advisory lock that every dispatcher takes, then claims. In a volatile
-- function each statement takes its own snapshot, so the claim statement, which starts after the
-- lock was granted, counts every claim the previous holder committed: the per-project cap holds
-- across processes. One round trip: BEGIN, lock, claim and COMMIT sent as four statements
-- brought `bun bench operations` from a median 868 to 594 executions/s (bench/RESULTS.md).
create function operations_claim(p_owner text, p_room integer, p_cap integer, p_lost integer, p_lease_ms integer)
returns setof operation_executions language plpgsql volatile as $$
begin
  -- 'ops:claim' as a number; held until the statement calling this function ends.
  perform pg_advisory_xact_lock(1869636460);
  return query
    with busy as (
      select project_id, count(*)::int as n from operation_executions
      where status in ('dispatched', 'running') and not accepted and lease_until > now()
      group by project_id
    ), ranked as (
      select x.id, row_number() over (partition by x.project_id order by x.next_run_at, x.id) + coalesce(b.n, 0) as slot
      from (
        select o.id, o.project_id, o.next_run_at from operation_executions o
        where ((o.status = 'pending' and o.next_run_at <= now())
            or (o.status in ('dispatched', 'running') and not o.accepted and o.lease_until < now() and o.attempts < greatest(o.max_attempts, p_lost)))
          and o.project_id not in (select busy.project_id from busy where busy.n >= p_cap)
        order by o.next_run_at limit p_room * 4
      ) x left join busy b on b.project_id = x.project_id
    ), cand as (
      select o.id from operation_executions o
      where o.id in (select ranked.id from ranked where ranked.slot <= p_cap)
        and ((o.status = 'pending' and o.next_run_at <= now())
          or (o.status in ('dispatched', 'running') and not o.accepted and o.lease_until < now() and o.attempts < greatest(o.max_attempts, p_lost)))
      order by o.next_run_at limit p_room
      for update skip locked
    )
    update operation_executions e set
      status = 'dispatched', lease_owner = p_owner,
      lease_until = now() + p_lease_ms * interval '1 millisecond',
      deadline_at = now() + e.timeout_ms * interval '1 millisecond',
      attempts = e.attempts + 1, accepted = false, progress_pct = null, updated_at = now()
    from cand where e.id = cand.id
    returning e.*;
end $$;
