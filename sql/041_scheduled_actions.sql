-- Scheduled publishing (issue 30, docs/scheduling.md). One row per scheduled action; a worker in
-- every `all`/`worker` process fires the due ones (src/editorial/schedule-worker.ts). Firing is
-- claimed by the update that moves `status` from 'scheduled' to 'done' inside the transaction
-- that makes the change: the row lock serialises processes, a second claimer's update finds the
-- row done and changes nothing, and a failed change rolls its claim back — so an action fires
-- exactly once, with its change, or not at all.
--
-- `action` is checked by a named constraint so a later capability (releases) can widen it:
--   alter table scheduled_actions drop constraint scheduled_actions_action_check,
--     add constraint scheduled_actions_action_check check (action in ('publish', 'unpublish', 'release'));
-- and register a handler for its action with the worker.
create table scheduled_actions (
  id          text primary key,
  project_id  text not null references projects(id) on delete cascade,
  action      text not null constraint scheduled_actions_action_check check (action in ('publish', 'unpublish')),
  model_key   text,
  record_id   text,
  -- A publish of a given version: the version asked for and its content (locale → content),
  -- fixed when scheduled. Null: publish the working version as it stands when the action fires.
  version     integer,
  content     jsonb,
  -- Anything else an action kind needs (a release id, …).
  target      jsonb,
  at          timestamptz not null,
  status      text not null default 'scheduled' check (status in ('scheduled', 'done', 'cancelled', 'failed')),
  error       text,
  -- Who scheduled it (audit actor kind and id): the change it makes is theirs.
  created_by_kind text not null default 'apiKey',
  created_by  text,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  fired_at    timestamptz
);
-- The worker's poll: due rows only, oldest first.
create index scheduled_actions_due on scheduled_actions (at) where status = 'scheduled';
create index scheduled_actions_project on scheduled_actions (project_id, at, id);
create index scheduled_actions_record on scheduled_actions (record_id) where status = 'scheduled';

-- Publishes given content (locale → content) instead of the working version: what a scheduled
-- publish of a version does. Published locales it does not name are removed; the working
-- version is left alone (has_draft says whether it now differs from what is live). Required
-- fields are checked per locale; the record is locked or the statement fails with SV404.
create or replace function svc_write_publish_content(p_id text, p_project text, p_model text, p_user text, p_content jsonb,
  p_required text[], p_search_keys text[], p_not_found text)
returns void language plpgsql as $$
declare
  l record;
  e record;
  v_differs boolean;
begin
  select project_id, model_key into l from records where id = p_id for update;
  if not found or l.project_id is distinct from p_project or l.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_not_found, detail = '';
  end if;
  delete from record_content c where c.record_id = p_id and c.stage = 'published' and not (p_content ? c.locale);
  for e in select key, value from jsonb_each(p_content) loop
    insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at, variants)
    values (p_id, p_project, p_model, 'published', e.key, svc_required(e.value, p_required), svc_search(e.value, p_search_keys), now(),
      (select d.variants from record_content d where d.record_id = p_id and d.stage = 'draft' and d.locale = e.key))
    on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, variants = excluded.variants, updated_at = now();
  end loop;
  select exists (
    select 1 from record_content d where d.record_id = p_id and d.stage = 'draft'
      and (not (p_content ? d.locale) or d.data is distinct from p_content -> d.locale))
    or exists (select 1 from jsonb_object_keys(p_content) k
      where not exists (select 1 from record_content d where d.record_id = p_id and d.stage = 'draft' and d.locale = k))
  into v_differs;
  update records set published_at = now(), has_draft = v_differs, updated_by = p_user where id = p_id;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'published', null, null, p_user);
end $$;
