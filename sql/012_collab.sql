-- Collaboration rooms (issue 14). `room` is '<projectId>/<modelKey>:<recordId>:<variantId>'.
--
-- collab_state: the room's Yjs document, compacted (Y.encodeStateAsUpdate), and `base`, the
-- record content the document was last reconciled with. A write to the record made outside the
-- room is the difference between the record's working version and `base`; it is merged into
-- the document instead of being overwritten by the next autosave. Written by the one process
-- that holds the room's advisory lock (the saver).
create table collab_state (
  room        text primary key,
  project_id  text not null references projects(id) on delete cascade,
  record_id   text not null references records(id) on delete cascade,
  state       bytea not null,
  base        jsonb not null,
  updated_at  timestamptz not null default now()
);
create index collab_state_record on collab_state (record_id);

-- Relay between processes: a Yjs update or awareness update (kind 0 / 1) of a room open in
-- several processes. Updates exceed NOTIFY's 8,000 bytes, so NOTIFY carries only the row id.
-- Rows are read within milliseconds and pruned after a minute: unlogged, nothing to recover.
create unlogged table collab_updates (
  id          bigserial primary key,
  room        text not null,
  origin      text not null,
  kind        smallint not null,
  user_id     text,
  data        bytea not null,
  created_at  timestamptz not null default now()
);
create index collab_updates_created on collab_updates (created_at);

-- Who holds which room where: one row per (room, process, identity) with its socket count.
-- Rows of a process whose heartbeat (collab_processes) is older than 20 s are ignored and
-- pruned, so a killed process stops counting on its own.
create unlogged table collab_processes (
  process_id  text primary key,
  seen_at     timestamptz not null default now()
);
create unlogged table collab_presence (
  room        text not null,
  process_id  text not null,
  identity    text not null,
  clients     integer not null,
  primary key (room, process_id, identity)
);
create index collab_presence_identity on collab_presence (identity);
