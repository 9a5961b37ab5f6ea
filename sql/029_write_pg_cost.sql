-- PostgreSQL CPU per write (issue 11, session 5; docs/decisions.md, "Writes, session 5"). The
-- write functions of sql/027_write_rows.sql, same arguments, checks, SQLSTATEs and answers, for
-- less backend CPU per call:
--
-- * No `set plan_cache_mode` clause. A function with a SET clause runs through
--   fmgr_security_definer, which opens a GUC nest level, sets the value and restores it on every
--   call (~2 µs a call, and twice for a publish, whose lock and read-back were functions with the
--   clause too). Every statement below reaches rows by primary key (or a unique key) with
--   parameters only in equality conditions, so the plan cache's generic plan costs what a custom
--   one does and `plan_cache_mode = auto` settles on it after the fifth call, as forcing did. (A
--   statement whose estimate depends on a parameter's value — `unnest` of an array parameter —
--   would be planned again at every call: such shapes are written otherwise below.)
-- * The record's lock is a statement of the function itself, not a nested call of
--   svc_lock_record (a function call, a statement and a GUC nest level less per write).
-- * After the lock and the reads the write depends on, the writes go as ONE statement (writable
--   CTEs): each statement of a PL/pgSQL function costs an executor start and end (relations,
--   indexes and check constraints opened and their expressions prepared again each time). The
--   lock stays a statement of its own before them: a statement's snapshot is taken when it
--   starts, so content read in the statement that waited for the lock could predate a write
--   committed meanwhile (READ COMMITTED takes a new snapshot per statement).
--   `svc_write_create` keeps its separate inserts: as one statement it measured no cheaper.
--
-- Further down: `svc_search` without per-call planning, content and history deleted with their
-- record by a trigger instead of foreign keys, history's `action` checked by a domain instead of a
-- CHECK constraint, and `svc_prepare` for the write calls src/content/tx.ts sends as EXECUTE.

create or replace function svc_lock_record(p_project text, p_id text, p_model text, p_message text)
returns boolean language plpgsql as $$
declare r record;
begin
  select project_id, model_key into r from records where id = p_id for update;
  if not found or r.project_id is distinct from p_project or r.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_message, detail = '';
  end if;
  return true;
end $$;

create or replace function svc_write_create(p_id text, p_project text, p_model text, p_natural_key text, p_versioned boolean,
  p_user text, p_locale text, p_data jsonb, p_search text)
returns setof svc_record_row language plpgsql as $$
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

-- The stages written are a filtered VALUES list rather than `unnest(case … end)`, whose estimate
-- (and so the plan cache's choice) would depend on `p_versioned`.
create or replace function svc_write_update(p_id text, p_project text, p_model text, p_locale text, p_default_locale text,
  p_patch jsonb, p_required text[], p_search_keys text[], p_versioned boolean, p_user text, p_not_found text)
returns setof svc_record_row language plpgsql as $$
declare
  l record;
  v_cur record;
  v_base jsonb;
  v_variants jsonb;
  merged jsonb;
begin
  select project_id, model_key into l from records where id = p_id for update;
  if not found or l.project_id is distinct from p_project or l.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_not_found, detail = '';
  end if;
  select c.data, c.variants into v_cur from record_content c where c.record_id = p_id and c.stage = 'draft' and c.locale = p_locale;
  if found then
    v_base := v_cur.data;
    v_variants := v_cur.variants;
  else
    v_base := coalesce((select c.data from record_content c where c.record_id = p_id and c.stage = 'draft' and c.locale = p_default_locale), '{}'::jsonb);
  end if;
  merged := svc_required(v_base || p_patch, p_required);
  return query
  with c as (
    insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at)
    select p_id, p_project, p_model, s.stage, p_locale, merged, svc_search(merged, p_search_keys), now()
    from (values ('draft'), ('published')) as s(stage)
    where s.stage = 'draft' or not p_versioned
    on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, updated_at = now()
  ), v as (
    insert into record_versions (record_id, project_id, action, locale, data, user_id)
    values (p_id, p_project, 'updated', p_locale, p_patch, p_user)
  ), r as (
    update records set updated_at = now(), updated_by = p_user, has_draft = p_versioned,
      published_at = case when p_versioned then published_at else now() end
    where id = p_id
    returning natural_key, created_at, updated_at, published_at, owner_customer_id
  )
  select p_id, p_model, r.natural_key, p_versioned, r.created_at, r.updated_at, r.published_at, r.owner_customer_id, merged, v_variants
  from r;
end $$;

-- The working content in the locale asked for, else the default locale (none: no row), with the
-- record's columns as the write left them. Kept for anything calling it; the writes below read
-- it in their own statement.
create or replace function svc_written_row(p_id text, p_locale text, p_default_locale text, r records)
returns setof svc_record_row language plpgsql stable as $$
begin
  return query
  select r.id, r.model_key, r.natural_key, r.has_draft, r.created_at, r.updated_at, r.published_at, r.owner_customer_id, c.data, c.variants
  from record_content c
  where c.record_id = p_id and c.stage = 'draft' and c.locale in (p_locale, p_default_locale)
  order by (c.locale = p_locale) desc
  limit 1;
end $$;

-- Deleting stale published locales and copying the working ones over touch different rows
-- (locales without a working version, and those with one), so they can share a statement.
create or replace function svc_write_publish(p_id text, p_project text, p_model text, p_user text, p_required text[], p_not_found text,
  p_locale text, p_default_locale text)
returns setof svc_record_row language plpgsql as $$
declare
  l record;
  v_draft record;
begin
  select project_id, model_key into l from records where id = p_id for update;
  if not found or l.project_id is distinct from p_project or l.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_not_found, detail = '';
  end if;
  if cardinality(p_required) > 0 then
    for v_draft in select data from record_content where record_id = p_id and stage = 'draft' order by locale loop
      perform svc_required(v_draft.data, p_required);
    end loop;
  end if;
  return query
  with d as (
    delete from record_content p where p.record_id = p_id and p.stage = 'published'
      and not exists (select 1 from record_content k where k.record_id = p_id and k.stage = 'draft' and k.locale = p.locale)
  ), c as (
    insert into record_content (record_id, project_id, model_key, stage, locale, data, search, updated_at, variants)
    select k.record_id, k.project_id, k.model_key, 'published', k.locale, k.data, k.search, now(), k.variants
    from record_content k where k.record_id = p_id and k.stage = 'draft'
    on conflict (record_id, stage, locale) do update set data = excluded.data, search = excluded.search, variants = excluded.variants, updated_at = now()
  ), v as (
    insert into record_versions (record_id, project_id, action, locale, data, user_id)
    values (p_id, p_project, 'published', null, null, p_user)
  ), r as (
    update records set published_at = now(), has_draft = false, updated_by = p_user where id = p_id
    returning id, model_key, natural_key, has_draft, created_at, updated_at, published_at, owner_customer_id
  )
  select r.id, r.model_key, r.natural_key, r.has_draft, r.created_at, r.updated_at, r.published_at, r.owner_customer_id, w.data, w.variants
  from r cross join lateral (
    select k.data, k.variants from record_content k
    where k.record_id = p_id and k.stage = 'draft' and k.locale in (p_locale, p_default_locale)
    order by (k.locale = p_locale) desc
    limit 1
  ) w;
end $$;

create or replace function svc_write_unpublish(p_id text, p_project text, p_model text, p_user text, p_not_found text,
  p_locale text, p_default_locale text)
returns setof svc_record_row language plpgsql as $$
declare l record;
begin
  select project_id, model_key into l from records where id = p_id for update;
  if not found or l.project_id is distinct from p_project or l.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_not_found, detail = '';
  end if;
  return query
  with d as (
    delete from record_content where record_id = p_id and stage = 'published'
  ), v as (
    insert into record_versions (record_id, project_id, action, locale, data, user_id)
    values (p_id, p_project, 'unpublished', null, null, p_user)
  ), r as (
    update records set published_at = null, has_draft = true, updated_by = p_user where id = p_id
    returning id, model_key, natural_key, has_draft, created_at, updated_at, published_at, owner_customer_id
  )
  select r.id, r.model_key, r.natural_key, r.has_draft, r.created_at, r.updated_at, r.published_at, r.owner_customer_id, w.data, w.variants
  from r cross join lateral (
    select k.data, k.variants from record_content k
    where k.record_id = p_id and k.stage = 'draft' and k.locale in (p_locale, p_default_locale)
    order by (k.locale = p_locale) desc
    limit 1
  ) w;
end $$;

create or replace function svc_delete_record(p_project text, p_id text, p_model text, p_message text)
returns boolean language plpgsql as $$
declare l record;
begin
  select project_id, model_key into l from records where id = p_id for update;
  if not found or l.project_id is distinct from p_project or l.model_key is distinct from p_model then
    raise exception using errcode = 'SV404', message = p_message, detail = '';
  end if;
  delete from records where id = p_id;
  return true;
end $$;

-- The search vector of content the database merged (svc_write_update, updateVariant): the same
-- text as sql/009_records_write.sql's svc_search (every string, depth-first in stored order, to
-- depth 6 below the field, joined by spaces), from one jsonpath walk per field. The recursive SQL
-- function it replaces was planned again at every level of every call (PostgreSQL 15 does not
-- cache the plans of SQL functions): most of an update's ~360 µs. PL/pgSQL keeps this one's plan
-- per connection — generic, because nothing in its estimate depends on `keys`: with
-- `unnest(keys)` a custom plan, which sees the array's length, looked cheaper and was made anew
-- at every call.
create or replace function svc_search(data jsonb, keys text[]) returns tsvector
language plpgsql immutable parallel safe as $$
begin
  return to_tsvector('simple', left(coalesce((
    select string_agg(s.v #>> '{}', ' ' order by i, s.j)
    from generate_subscripts(keys, 1) as i
      cross join lateral jsonb_path_query(data -> keys[i], 'strict $.**{0 to 6} ? (@.type() == "string")') with ordinality as s(v, j)
  ), ''), 200000));
end $$;

-- Content and history go with their record through a trigger, not foreign keys. A foreign key
-- checks every inserted child row with a query of its own (`select 1 from records where id = …
-- for key share`, a full executor run) at the end of each statement: two per create (content,
-- history) and two per publish — in transactions that have just inserted or locked that very
-- record. Every write that adds content or history inserts the record in the same statement or
-- transaction, or holds it locked (FOR UPDATE) first, so the record cannot go from under it;
-- a delete of the record waits for that lock, and its trigger, running after the delete with a
-- snapshot of its own, sees and removes what the write committed. What cascaded still goes, in
-- the deleting statement: a record's delete, and a project's, whose foreign key (records →
-- projects, kept) deletes its records.
alter table record_content drop constraint record_content_record_id_fkey;
alter table record_versions drop constraint record_versions_record_id_fkey;

create or replace function svc_records_deleted() returns trigger language plpgsql as $$
begin
  delete from record_content c using gone g where c.record_id = g.id;
  delete from record_versions v using gone g where v.record_id = g.id;
  return null;
end $$;

create trigger records_deleted after delete on records referencing old table as gone
  for each statement execute function svc_records_deleted();

-- History's action as a domain, not a check constraint: a table's CHECK expressions are read back
-- from their stored text and prepared again at every statement that inserts (~2.5 µs each), a
-- domain's are kept per connection. Altering the column to a domain without a constraint
-- rewrites nothing (no index covers `action`); the constraint is added NOT VALID, so existing
-- rows are not scanned: the check constraint it replaces held for every one of them, and new
-- values are checked as before. `record_content.stage` keeps its check constraint: the per-field
-- expression indexes (src/content/indexes.ts) cover `stage`, and changing its type would rebuild
-- every one of them.
create domain svc_version_action as text;
alter table record_versions alter column action type svc_version_action;
alter domain svc_version_action add constraint svc_version_action_check
  check (value in ('created', 'updated', 'published', 'unpublished')) not valid;
alter table record_versions drop constraint record_versions_action_check;

-- Prepares a statement on this connection under `p_name` unless it has one of that name
-- (src/content/tx.ts: the write functions' calls go as EXECUTE, which PostgreSQL neither parses,
-- analyses nor plans again; ~9 µs of a call's ~23 µs outside the function). Called inside a
-- write transaction, only when an EXECUTE found its statement missing. A prepared statement is
-- not transactional: it stays when the transaction that made it rolls back.
create or replace function svc_prepare(p_name text, p_statement text) returns void language plpgsql as $$
begin
  execute format('prepare %I as %s', p_name, p_statement);
exception when duplicate_prepared_statement then
  null;
end $$;
