-- Record writes as PL/pgSQL functions (issue 11, src/content/write.ts). A write transaction is
-- one simple-protocol message, which PostgreSQL parses and plans statement by statement on every
-- call; the statements of a create, publish and read-back cost 0.3–0.4 ms of planning each, more
-- than running them (docs/decisions.md, "Writes"). The statements inside a PL/pgSQL function are
-- planned once per backend and reused, so each write is now `select svc_….(literals)`, whose own
-- plan is trivial. The semantics are those of the statements they replace (sql/009_records_write.sql
-- raises the same SQLSTATEs: SV404 NOT_FOUND, SV400 BAD_USER_INPUT with the field in DETAIL).
--
-- `record_content.variants` (sql/017_targeting.sql) is added after this file: PL/pgSQL resolves
-- the columns a function names when it first runs, by which time every migration has applied.
--
-- Records are found by primary key alone and checked for project and model afterwards: with the
-- project and model in the WHERE clause an unanalysed `records` let the planner pick
-- `records_model` (project, model, created_at, id) and scan every record of the model — 6.7 ms
-- per publish at 34,000 records.

-- Locks the record (FOR UPDATE) or fails with SV404 and `message`.
create or replace function svc_lock_record(p_project text, p_id text, p_model text, p_message text)
returns boolean language plpgsql set plan_cache_mode = force_generic_plan as $$
declare r record;
begin
  select project_id, model_key into r from records where id = p_id for update;
  if not found or r.project_id is distinct from p_project or r.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_message, detail = '';
  end if;
  return true;
end $$;

-- A new record: its row, its content (draft, and published for unversioned models) and the
-- history entry. A duplicate natural key is a unique violation of records_natural_key.
create or replace function svc_create_record(p_id text, p_project text, p_model text, p_natural_key text, p_versioned boolean,
  p_user text, p_locale text, p_data jsonb, p_search text)
returns boolean language plpgsql set plan_cache_mode = force_generic_plan as $$
begin
  insert into records (id, project_id, model_key, natural_key, has_draft, published_at, created_by, updated_by)
  values (p_id, p_project, p_model, p_natural_key, p_versioned, case when p_versioned then null else now() end, p_user, p_user);
  insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
  values (p_id, p_project, p_model, 'draft', p_locale, p_data, to_tsvector('simple', p_search), now());
  if not p_versioned then
    insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
    values (p_id, p_project, p_model, 'published', p_locale, p_data, to_tsvector('simple', p_search), now());
  end if;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'created', p_locale, p_data, p_user);
  return true;
end $$;

-- A patch over the working content of the locale (a locale written for the first time starts as
-- a copy of the default locale's); unversioned models check required fields of the result and
-- write both stages. Locks the record first, or fails with SV404 and `p_not_found`.
create or replace function svc_update_record(p_id text, p_project text, p_model text, p_locale text, p_default_locale text,
  p_patch jsonb, p_required text[], p_search_keys text[], p_versioned boolean, p_user text, p_not_found text)
returns boolean language plpgsql set plan_cache_mode = force_generic_plan as $$
declare merged jsonb;
begin
  perform svc_lock_record(p_project, p_id, p_model, p_not_found);
  merged := svc_required(coalesce(
    (select data from record_content where record_id = p_id and stage = 'draft' and locale = p_locale),
    (select data from record_content where record_id = p_id and stage = 'draft' and locale = p_default_locale),
    '{}'::jsonb) || p_patch, p_required);
  insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
  select p_id, p_project, p_model, s.stage, p_locale, merged, svc_search(merged, p_search_keys), now()
  from unnest(case when p_versioned then array['draft'] else array['draft', 'published'] end) as s(stage)
  on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, updated_at = now();
  update records set updated_at = now(), updated_by = p_user, has_draft = p_versioned,
    published_at = case when p_versioned then published_at else now() end
  where id = p_id;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'updated', p_locale, p_patch, p_user);
  return true;
end $$;

-- Copies every locale of the working version to published (required fields checked per locale,
-- in locale order); published locales without a working version go. Locks the record first.
create or replace function svc_publish_record(p_id text, p_project text, p_model text, p_user text, p_required text[], p_not_found text)
returns boolean language plpgsql set plan_cache_mode = force_generic_plan as $$
declare v_draft record;
begin
  perform svc_lock_record(p_project, p_id, p_model, p_not_found);
  if cardinality(p_required) > 0 then
    for v_draft in select data from record_content where record_id = p_id and stage = 'draft' order by locale loop
      perform svc_required(v_draft.data, p_required);
    end loop;
  end if;
  delete from record_content p where p.record_id = p_id and p.stage = 'published'
    and not exists (select 1 from record_content d where d.record_id = p_id and d.stage = 'draft' and d.locale = p.locale);
  insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at, variants)
  select record_id, project_id, model_key, 'published', locale, data, search, now(), variants
  from record_content where record_id = p_id and stage = 'draft'
  on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, variants = excluded.variants, updated_at = now();
  update records set published_at = now(), has_draft = false, updated_by = p_user where id = p_id;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'published', null, null, p_user);
  return true;
end $$;

-- Removes the published version. Locks the record first.
create or replace function svc_unpublish_record(p_id text, p_project text, p_model text, p_user text, p_not_found text)
returns boolean language plpgsql set plan_cache_mode = force_generic_plan as $$
begin
  perform svc_lock_record(p_project, p_id, p_model, p_not_found);
  delete from record_content where record_id = p_id and stage = 'published';
  update records set published_at = null, has_draft = true, updated_by = p_user where id = p_id;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'unpublished', null, null, p_user);
  return true;
end $$;

-- Deletes the record (content, history and variants go with it) or fails with SV404.
create or replace function svc_delete_record(p_project text, p_id text, p_model text, p_message text)
returns boolean language plpgsql set plan_cache_mode = force_generic_plan as $$
begin
  perform svc_lock_record(p_project, p_id, p_model, p_message);
  delete from records where id = p_id;
  return true;
end $$;

-- The working or published version of records by id, one row per id in the locale or else the
-- default locale: the read-back of a write transaction (readByIds in src/content/read.ts). The
-- plan is cached per backend and generic, so the rows are found by primary key alone (the
-- subquery cannot be flattened past OFFSET 0) and filtered after: with the project and stage
-- in the same WHERE, a generic plan on unanalysed tables chose `record_content_scan` and read
-- every row of the project (71 ms at 39,000 rows).
create or replace function svc_records_by_ids(p_project text, p_ids text[], p_stage text, p_locale text, p_default_locale text, p_models text[])
returns table (id text, model_key text, natural_key text, has_draft boolean, created_at timestamptz, updated_at timestamptz, published_at timestamptz,
  owner_customer_id text, data jsonb, variants jsonb)
language plpgsql stable set plan_cache_mode = force_generic_plan as $$
begin
  return query
  select distinct on (c.record_id) r.id, r.model_key, r.natural_key, r.has_draft, r.created_at, r.updated_at, r.published_at,
    r.owner_customer_id, c.data, c.variants
  from (
    select k.record_id, k.project_id, k.model_key, k.locale, k.data, k.variants from record_content k
    where k.record_id = any(p_ids) and k.stage = p_stage and k.locale in (p_locale, p_default_locale)
    offset 0
  ) c join records r on r.id = c.record_id
  where c.project_id = p_project and (p_models is null or c.model_key = any(p_models))
  order by c.record_id, (c.locale = p_locale) desc;
end $$;
