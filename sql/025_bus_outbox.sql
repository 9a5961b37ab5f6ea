-- The NATS transport's transactional outbox (src/actors/bus-nats.ts): a write's events are rows
-- here in the write's own transaction; a relay publishes committed rows to JetStream, in id
-- order, and deletes them. Unused (always empty) with the default PostgreSQL transport.
create table if not exists bus_outbox (
  id bigserial primary key,
  subject text not null, -- below the deployment's prefix: <project>.changes.<model>, _.<type> …
  payload text not null,
  created_at timestamptz not null default now()
);
