-- Writes that answer with the record they wrote (issue 11, session 4). A mutation used to send
-- its write and then `svc_records_by_ids` in the same transaction to read the record back: one
-- more statement for PostgreSQL to parse, plan and run (and for the service to inline and
-- decode) per mutation, although the write had every value at hand. These functions do what
-- svc_create_record, svc_update_record, svc_publish_record and svc_unpublish_record
-- (sql/016_write_functions.sql) do, with the same checks and SQLSTATEs, and return the row the
-- read-back returned: the working (draft) content of the locale asked for, else of the default
-- locale, with the record's columns. The functions of 016 stay for anything still calling them.

create type svc_record_row as (
  id text, model_key text, natural_key text, has_draft boolean, created_at timestamptz, updated_at timestamptz,
  published_at timestamptz, owner_customer_id text, data jsonb, variants jsonb
);

-- A create returns what it inserted: nothing needs reading (now() is the transaction's start,
-- the default of records.created_at and updated_at).
create or replace function svc_write_create(p_id text, p_project text, p_model text, p_natural_key text, p_versioned boolean,
  p_user text, p_locale text, p_data jsonb, p_search text)
returns setof svc_record_row language plpgsql set plan_cache_mode = force_generic_plan as $$
declare v_search tsvector := to_tsvector('simple', p_search);
begin
  insert into records (id, project_id, model_key, natural_key, has_draft, published_at, created_by, updated_by)
  values (p_id, p_project, p_model, p_natural_key, p_versioned, case when p_versioned then null else now() end, p_user, p_user);
  insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
  values (p_id, p_project, p_model, 'draft', p_locale, p_data, v_search, now());
  if not p_versioned then
    insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
    values (p_id, p_project, p_model, 'published', p_locale, p_data, v_search, now());
  end if;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'created', p_locale, p_data, p_user);
  return next row(p_id, p_model, p_natural_key, p_versioned, now(), now(), case when p_versioned then null else now() end,
    null::text, p_data, null::jsonb)::svc_record_row;
end $$;

-- A patch over the working content of the locale (svc_update_record), answering with the merged
-- content and the locale row's variants (an update of the default content keeps them).
create or replace function svc_write_update(p_id text, p_project text, p_model text, p_locale text, p_default_locale text,
  p_patch jsonb, p_required text[], p_search_keys text[], p_versioned boolean, p_user text, p_not_found text)
returns setof svc_record_row language plpgsql set plan_cache_mode = force_generic_plan as $$
declare
  v_cur record;
  v_base jsonb;
  v_variants jsonb;
  merged jsonb;
  r record;
begin
  perform svc_lock_record(p_project, p_id, p_model, p_not_found);
  select c.data, c.variants into v_cur from record_content c where c.record_id = p_id and c.stage = 'draft' and c.locale = p_locale;
  if found then
    v_base := v_cur.data;
    v_variants := v_cur.variants;
  else
    v_base := coalesce((select c.data from record_content c where c.record_id = p_id and c.stage = 'draft' and c.locale = p_default_locale), '{}'::jsonb);
  end if;
  merged := svc_required(v_base || p_patch, p_required);
  insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
  select p_id, p_project, p_model, s.stage, p_locale, merged, svc_search(merged, p_search_keys), now()
  from unnest(case when p_versioned then array['draft'] else array['draft', 'published'] end) as s(stage)
  on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, updated_at = now();
  update records set updated_at = now(), updated_by = p_user, has_draft = p_versioned,
    published_at = case when p_versioned then published_at else now() end
  where id = p_id
  returning natural_key, created_at, updated_at, published_at, owner_customer_id into r;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'updated', p_locale, p_patch, p_user);
  return next row(p_id, p_model, r.natural_key, p_versioned, r.created_at, r.updated_at, r.published_at, r.owner_customer_id,
    merged, v_variants)::svc_record_row;
end $$;

-- The working content in the locale asked for, else the default locale (none: no row, as the
-- read-back answered), with the record's columns as the write left them.
create or replace function svc_written_row(p_id text, p_locale text, p_default_locale text, r records)
returns setof svc_record_row language plpgsql stable set plan_cache_mode = force_generic_plan as $$
begin
  return query
  select r.id, r.model_key, r.natural_key, r.has_draft, r.created_at, r.updated_at, r.published_at, r.owner_customer_id, c.data, c.variants
  from record_content c
  where c.record_id = p_id and c.stage = 'draft' and c.locale in (p_locale, p_default_locale)
  order by (c.locale = p_locale) desc
  limit 1;
end $$;

-- svc_publish_record, answering with the working content of `p_locale`.
create or replace function svc_write_publish(p_id text, p_project text, p_model text, p_user text, p_required text[], p_not_found text,
  p_locale text, p_default_locale text)
returns setof svc_record_row language plpgsql set plan_cache_mode = force_generic_plan as $$
declare
  v_draft record;
  r records;
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
  update records set published_at = now(), has_draft = false, updated_by = p_user where id = p_id returning * into r;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'published', null, null, p_user);
  return query select * from svc_written_row(p_id, p_locale, p_default_locale, r);
end $$;

-- svc_unpublish_record, answering with the working content of `p_locale`.
create or replace function svc_write_unpublish(p_id text, p_project text, p_model text, p_user text, p_not_found text,
  p_locale text, p_default_locale text)
returns setof svc_record_row language plpgsql set plan_cache_mode = force_generic_plan as $$
declare r records;
begin
  perform svc_lock_record(p_project, p_id, p_model, p_not_found);
  delete from record_content where record_id = p_id and stage = 'published';
  update records set published_at = null, has_draft = true, updated_by = p_user where id = p_id returning * into r;
  insert into record_versions (record_id, project_id, action, locale, data, user_id)
  values (p_id, p_project, 'unpublished', null, null, p_user);
  return query select * from svc_written_row(p_id, p_locale, p_default_locale, r);
end $$;
