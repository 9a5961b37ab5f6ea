-- Collaboration rooms save deltas (issue 27 item 9): a save appends what changed since the last
-- save to collab_log instead of rewriting the whole Yjs state of collab_state. A document near the
-- 4 MiB limit took 180–360 ms of the event loop per save to encode whole (bench/collab-big-type.ts);
-- a delta is the updates the room applied since, a few hundred bytes while someone types.
--
-- A room's document is collab_state.state plus its log rows in seq order (Yjs updates commute, and
-- applying one twice changes nothing). Compaction (src/collab/compactor-worker.ts, off the event
-- loop) merges the state and the rows it read into a new state, bumps `gen` only if it is still
-- the generation it read (two compactors: one wins, the other changes nothing) and deletes exactly
-- the rows it merged, so a row appended meanwhile — whatever its seq — stays.
alter table collab_state
  add column gen bigint not null default 0,
  -- The state vector of `state` (null: written before this migration).
  add column sv bytea;

create table collab_log (
  room        text not null references collab_state(room) on delete cascade,
  seq         bigserial,
  -- The updates of one save: lib0 var-length byte arrays, one per Yjs update, in the order the
  -- room applied them (src/collab/log-store.ts packUpdates).
  updates     bytea not null,
  -- The state vector of the saver's document once these updates were in it: the document held
  -- every struct below it, so the stored rows do too. A process taking the saving over computes
  -- its first delta against it (src/collab/room-delta.ts).
  sv          bytea not null,
  created_at  timestamptz not null default now(),
  primary key (room, seq)
);
