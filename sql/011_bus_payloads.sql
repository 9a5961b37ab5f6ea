-- Bus events too large for a NOTIFY (PostgreSQL's limit is 8,000 bytes): the notification
-- carries the row id and listeners read the payload here. Rows are swept after ten minutes.
create table if not exists bus_payloads (
  id bigserial primary key,
  payload text not null,
  created_at timestamptz not null default now()
);
create index if not exists bus_payloads_created_at on bus_payloads (created_at);
