-- Per-key request counts for rate limiting (src/auth/rate-limit.ts). Each process counts in
-- memory and adds its counts here in batches, so every process sharing this database sees
-- the sum. One row per key and fixed one-hour window (window_start in unix seconds).
-- No foreign key: a batch must never fail because a key was removed meanwhile.
create table api_key_usage (
  key_id        text not null,
  window_start  bigint not null,
  count         bigint not null default 0,
  primary key (key_id, window_start)
);
create index api_key_usage_window on api_key_usage (window_start);
