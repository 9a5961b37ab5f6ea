-- Restore any version (issue 30, docs/restore.md). A restore writes a new history entry, action
-- 'restored', naming the version it came from (`restored_from`, the 1-based position in the
-- record's history that recordVersions shows); nothing earlier is rewritten. Its `data` holds
-- the whole restored content per locale ({ "<locale>": { …fields } }), so history read forward
-- stays replayable: a 'restored' row replaces every locale's working content.
alter table record_versions add column restored_from integer;
alter domain svc_version_action drop constraint svc_version_action_check;
alter domain svc_version_action add constraint svc_version_action_check
  check (value in ('created', 'updated', 'published', 'unpublished', 'restored')) not valid;

-- The working content becomes `p_content` (locale → content): locales it does not name are
-- removed from the working version, the others replaced (variants are kept: a restore addresses
-- the default content). Unversioned models write the live stage too. Locks the record or fails
-- with SV404 (NOT_FOUND) like every write; required fields are checked for unversioned models.
create or replace function svc_write_restore(p_id text, p_project text, p_model text, p_user text, p_content jsonb,
  p_from integer, p_required text[], p_search_keys text[], p_versioned boolean, p_not_found text, p_locale text, p_default_locale text)
returns setof svc_record_row language plpgsql as $$
declare
  l record;
  e record;
  r records;
begin
  select project_id, model_key into l from records where id = p_id for update;
  if not found or l.project_id is distinct from p_project or l.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_not_found, detail = '';
  end if;
  delete from record_content c where c.record_id = p_id and (c.stage = 'draft' or not p_versioned)
    and not (p_content ? c.locale);
  for e in select key, value from jsonb_each(p_content) loop
    insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
    select p_id, p_project, p_model, s.stage, e.key, svc_required(e.value, p_required), svc_search(e.value, p_search_keys), now()
    from (values ('draft'), ('published')) as s(stage)
    where s.stage = 'draft' or not p_versioned
    on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, updated_at = now();
  end loop;
  update records set updated_at = now(), updated_by = p_user, has_draft = p_versioned,
    published_at = case when p_versioned then published_at else now() end
  where id = p_id returning * into r;
  insert into record_versions (record_id, project_id, action, locale, data, user_id, restored_from)
  values (p_id, p_project, 'restored', null, p_content, p_user, p_from);
  return query
  select r.id, r.model_key, r.natural_key, r.has_draft, r.created_at, r.updated_at, r.published_at, r.owner_customer_id, c.data, c.variants
  from record_content c
  where c.record_id = p_id and c.stage = 'draft' and c.locale in (p_locale, p_default_locale)
  order by (c.locale = p_locale) desc
  limit 1;
end $$;
