-- Record writes as pipelined statements (issue 11, src/content/write.ts). A write transaction is
-- sent in one go (BEGIN, statements, NOTIFY, COMMIT) and never waits on the service while it is
-- open, so every check that depends on stored rows runs here and fails the statement with a
-- stable SQLSTATE the service maps to its errors: SV404 NOT_FOUND, SV400 BAD_USER_INPUT (DETAIL
-- carries the field). Messages are written by the service and passed in as parameters.

create or replace function svc_check(ok boolean, state text, message text, field text default null)
returns boolean language plpgsql as $$
begin
  if ok is not true then
    raise exception using errcode = state, message = message, detail = coalesce(field, '');
  end if;
  return true;
end $$;

-- The text of one value for full-text search, depth-first, as searchText in src/content/validate.ts
-- (strings only; arrays and objects to depth 6).
create or replace function svc_text_of(v jsonb, depth int) returns text
language sql immutable parallel safe as $$
  select case jsonb_typeof(v)
    when 'string' then v #>> '{}'
    when 'array' then (select string_agg(svc_text_of(e, depth + 1), ' ' order by i) from jsonb_array_elements(v) with ordinality a(e, i) where depth < 6)
    when 'object' then (select string_agg(svc_text_of(e, depth + 1), ' ' order by i) from jsonb_each(v) with ordinality o(k, e, i) where depth < 6)
  end
$$;

-- The search vector of record content: the named fields' text, in model order, at most 200,000 characters.
create or replace function svc_search(data jsonb, keys text[]) returns tsvector
language sql immutable parallel safe as $$
  select to_tsvector('simple', left(coalesce((select string_agg(svc_text_of(data -> k, 0), ' ' order by i) from unnest(keys) with ordinality u(k, i)), ''), 200000))
$$;

-- Required fields must hold a value (not null, not an empty string or list): checkRequired in
-- src/content/validate.ts. Returns the content unchanged, so a write can select through it.
create or replace function svc_required(data jsonb, keys text[]) returns jsonb
language plpgsql immutable as $$
declare k text;
begin
  foreach k in array keys loop
    if coalesce(data -> k, 'null'::jsonb) in ('null'::jsonb, '""'::jsonb, '[]'::jsonb) then
      raise exception using errcode = 'SV400', message = format('Field "%s" is required', k), detail = k;
    end if;
  end loop;
  return data;
end $$;
