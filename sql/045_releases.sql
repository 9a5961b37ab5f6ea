-- Releases (issue 30, item 3; src/releases): a named set of record versions across models that
-- goes live in one transaction. An item names a record and either nothing (the record's working
-- version as it stands when the release publishes) or a version of its history: that version's
-- content, every locale as it stood right after history entry `version`, is copied into `data`
-- ({ "<locale>": { …content… } }) when the item is added, so the release keeps what was chosen.
create table releases (
  id          text primary key,
  project_id  text not null references projects(id) on delete cascade,
  name        text not null,
  status      text not null default 'open' check (status in ('open', 'scheduled', 'published', 'discarded')),
  -- When it is scheduled to go live (status 'scheduled') or when it went live ('published').
  at          timestamptz,
  -- Why the last scheduled publish failed (the release is open again then).
  error       text,
  created_by  text,
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now()
);
create index releases_project on releases (project_id, created_at desc, id desc);
-- The release clock (src/releases/schedule.ts) looks only at what is due.
create index releases_due on releases (at) where status = 'scheduled';

create table release_items (
  release_id  text not null references releases(id) on delete cascade,
  project_id  text not null,
  -- A record deleted while in a release leaves it.
  record_id   text not null references records(id) on delete cascade,
  model_key   text not null,
  version     integer,
  data        jsonb,
  added_at    timestamptz not null default now(),
  primary key (release_id, record_id)
);
create index release_items_record on release_items (record_id);

-- Publishes a pinned version (`p_content`: locale → content) of one record, as svc_write_publish
-- publishes the working version: locks the record (NOT_FOUND when it is not this project's
-- record of this model), checks required fields per locale, replaces the published locales,
-- writes a 'published' history entry. Variants are not kept in history: each published locale
-- keeps the variants of the working version of that locale. The record has a draft afterwards
-- when its working version differs from what went live.
create or replace function svc_release_publish_pinned(p_id text, p_project text, p_model text, p_user text,
  p_required text[], p_search_keys text[], p_not_found text, p_content jsonb)
returns boolean language plpgsql as $$
declare
  l record;
  e record;
begin
  select project_id, model_key into l from records where id = p_id for update;
  if not found or l.project_id is distinct from p_project or l.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_not_found, detail = '';
  end if;
  for e in select key, value from jsonb_each(p_content) loop
    perform svc_required(e.value, p_required);
  end loop;
  delete from record_content p where p.record_id = p_id and p.stage = 'published' and not (p_content ? p.locale);
  insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at, variants)
  select p_id, p_project, p_model, 'published', j.key, j.value, svc_search(j.value, p_search_keys), now(),
    (select k.variants from record_content k where k.record_id = p_id and k.stage = 'draft' and k.locale = j.key)
  from jsonb_each(p_content) j
  on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, variants = excluded.variants, updated_at = now();
  insert into record_versions (record_id, project_id, action, locale, data, user_id) values (p_id, p_project, 'published', null, null, p_user);
  update records set published_at = now(), updated_by = p_user, has_draft = exists (
      select 1 from record_content k where k.record_id = p_id and k.stage = 'draft'
        and (not (p_content ? k.locale) or p_content -> k.locale is distinct from k.data))
    or exists (select 1 from jsonb_object_keys(p_content) o(k)
      where not exists (select 1 from record_content d where d.record_id = p_id and d.stage = 'draft' and d.locale = o.k))
  where id = p_id;
  return true;
end $$;
