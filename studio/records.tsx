import { useEffect, useState } from 'preact/hooks';
import { canEdit, gql, type ProjectRef } from './api.ts';
import { labelOf, names, recordTitle, type FieldDef, type ModelDef } from './models.ts';
import { BASE, navigate, onLink } from './router.ts';
import { useChannel } from './live.ts';

export interface RecordRow {
  _id: string;
  naturalKey: string | null;
  _updatedAt: string;
  _publishedAt: string | null;
  _hasDraft?: boolean;
  content: Record<string, unknown> | null;
}

const PAGE = 20;
const FILTERABLE = new Set(['text', 'number', 'boolean', 'date', 'enum', 'select', 'reference']);

/** Draft/published state of a record as a badge. */
export function StatusBadge({ r }: { r: Pick<RecordRow, '_publishedAt' | '_hasDraft'> }) {
  if (!r._publishedAt) return <span class="badge draft">Draft</span>;
  if (r._hasDraft) return <span class="badge changed">Changed</span>;
  return <span class="badge published">Published</span>;
}

function whereOf(fields: FieldDef[], filters: Record<string, string>): Record<string, unknown> | null {
  const and: Record<string, unknown>[] = [];
  for (const f of fields) {
    const raw = filters[f.key];
    if (raw === undefined || raw === '') continue;
    if (f.type === 'number') and.push({ [f.key]: { eq: Number(raw) } });
    else if (f.type === 'boolean') and.push({ [f.key]: { eq: raw === 'true' } });
    else if (f.type === 'date') and.push({ [f.key]: { gte: new Date(raw).toISOString() } });
    else and.push({ [f.key]: { eq: raw } });
  }
  return and.length ? { AND: and } : null;
}

export function RecordList({ project, model }: { project: ProjectRef; model: ModelDef }) {
  const n = names(model.key);
  const queryable = model.fields.filter((f) => f.queryable && FILTERABLE.has(f.type));
  const [search, setSearch] = useState('');
  const [applied, setApplied] = useState('');
  const [filters, setFilters] = useState<Record<string, string>>({});
  // What is typed into a filter box before it is applied (on change: Enter, Tab, leaving it).
  // Kept in state so a render in between (the list updating live) does not put the old value back.
  const [typed, setTyped] = useState<Record<string, string>>({});
  const [sort, setSort] = useState('');
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const [page, setPage] = useState<{ rows: RecordRow[]; total: number | null; next: string | null } | null>(null);
  const [error, setError] = useState('');
  const after = cursors[cursors.length - 1] ?? null;
  const filterKey = JSON.stringify(filters);
  // Records created, edited, published or deleted by anyone show up without a reload.
  const [version, setVersion] = useState(0);
  const live = useChannel(project.id, `changes:${model.key}`, () => setVersion((v) => v + 1));

  useEffect(() => {
    let live = true;
    setError('');
    const fields = '_id naturalKey _updatedAt _publishedAt _hasDraft content';
    const run = applied
      ? gql(
          project.id,
          `query($q:String!,$first:Int,$after:String){ list: ${n.search}(query:$q, first:$first, after:$after){ totalCount pageInfo{hasNextPage endCursor} edges{ node{ ${fields} } } } }`,
          { q: applied, first: PAGE, after },
        )
      : gql(
          project.id,
          `query($first:Int,$after:String${queryable.length ? `,$where:${n.where},$orderBy:[${n.orderBy}!]` : ''}){ list: ${n.list}(first:$first, after:$after, preview:true${queryable.length ? ', where:$where, orderBy:$orderBy' : ''}){ totalCount pageInfo{hasNextPage endCursor} edges{ node{ ${fields} } } } }`,
          {
            first: PAGE,
            after,
            ...(queryable.length
              ? {
                  where: whereOf(queryable, filters),
                  orderBy: sort
                    ? [{ field: sort.replace(/^-/, ''), direction: sort.startsWith('-') ? 'DESC' : 'ASC' }]
                    : null,
                }
              : {}),
          },
        );
    run.then(
      (d: any) =>
        live &&
        setPage({
          rows: d.list.edges.map((e: any) => e.node),
          total: d.list.totalCount ?? null,
          next: d.list.pageInfo.hasNextPage ? d.list.pageInfo.endCursor : null,
        }),
      (e: Error) => live && setError(e.message),
    );
    return () => void (live = false);
  }, [project.id, model.key, applied, filterKey, sort, after, version]);

  const reset = () => setCursors([null]);
  // A functional update: two filters changed before a render (select one, clear another) must
  // not write back the first one's old value from this render's closure.
  const setFilter = (key: string, v: string) => {
    reset();
    setFilters((x) => ({ ...x, [key]: v }));
  };
  const base = `${BASE}/p/${encodeURIComponent(project.id)}/m/${model.key}`;
  return (
    <section>
      <div class="bar">
        <h1>{model.name || model.key}</h1>
        <span class={`badge ${live ? 'published' : 'draft'}`} role="status" title="Updates as records change">
          {live ? 'live' : 'offline'}
        </span>
        <span class="grow" />
        {canEdit(project.role) && (
          <button type="button" onClick={() => navigate(`/p/${encodeURIComponent(project.id)}/m/${model.key}/r/new`)}>
            New {model.name || model.key}
          </button>
        )}
      </div>
      {/* biome-ignore lint/a11y/useSemanticElements: a form with role=search is the landmark; <search> would need its own form inside */}
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          reset();
          setApplied(search.trim());
        }}
      >
        <label>
          Search
          <input
            type="search"
            aria-label="Search"
            value={search}
            onInput={(e) => setSearch(e.currentTarget.value)}
            placeholder="Words in any text field"
          />
        </label>
        {/* aria-label: a wrapping label would name a select after its options too ("FeaturedAnyYesNo"). */}
        {queryable.map((f) => (
          // biome-ignore lint/a11y/noLabelWithoutControl: the control (a select or an input, by field type) is inside the label
          <label key={f.key}>
            {labelOf(f)}
            {f.type === 'enum' ? (
              <select
                aria-label={labelOf(f)}
                value={filters[f.key] ?? ''}
                onChange={(e) => setFilter(f.key, e.currentTarget.value)}
              >
                <option value="">Any</option>
                {(f.config?.options ?? []).map((o) => (
                  <option key={o.value} value={o.value}>
                    {o.label}
                  </option>
                ))}
              </select>
            ) : f.type === 'boolean' ? (
              <select
                aria-label={labelOf(f)}
                value={filters[f.key] ?? ''}
                onChange={(e) => setFilter(f.key, e.currentTarget.value)}
              >
                <option value="">Any</option>
                <option value="true">Yes</option>
                <option value="false">No</option>
              </select>
            ) : (
              <input
                aria-label={labelOf(f)}
                type={(f.type === 'number' ? 'number' : f.type === 'date' ? 'date' : 'text') as 'text'}
                value={typed[f.key] ?? filters[f.key] ?? ''}
                onInput={(e) => {
                  const v = e.currentTarget.value;
                  setTyped((x) => ({ ...x, [f.key]: v }));
                }}
                onChange={(e) => setFilter(f.key, e.currentTarget.value)}
              />
            )}
          </label>
        ))}
        {queryable.length > 0 && (
          <label>
            Sort
            <select
              aria-label="Sort"
              value={sort}
              onChange={(e) => {
                reset();
                setSort(e.currentTarget.value);
              }}
            >
              <option value="">Newest first</option>
              {queryable.flatMap((f) => [
                <option key={f.key} value={f.key}>
                  {labelOf(f)} ↑
                </option>,
                <option key={`-${f.key}`} value={`-${f.key}`}>
                  {labelOf(f)} ↓
                </option>,
              ])}
            </select>
          </label>
        )}
        <button type="submit">Search</button>
      </form>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {page && (
        <>
          <table class="records">
            <caption class="muted">
              {page.total !== null ? `${page.total} record${page.total === 1 ? '' : 's'}` : ''}
              {applied ? ` matching “${applied}” (published)` : ''}
            </caption>
            <thead>
              <tr>
                <th scope="col">Title</th>
                <th scope="col">Status</th>
                <th scope="col">Updated</th>
              </tr>
            </thead>
            <tbody>
              {page.rows.map((r) => (
                <tr key={r._id}>
                  <td>
                    <a href={`${base}/r/${r._id}`} onClick={onLink}>
                      {recordTitle(model, r)}
                    </a>
                  </td>
                  <td>
                    <StatusBadge r={r} />
                  </td>
                  <td>
                    <time dateTime={r._updatedAt}>{new Date(r._updatedAt).toLocaleString()}</time>
                  </td>
                </tr>
              ))}
              {page.rows.length === 0 && (
                <tr>
                  <td colSpan={3} class="muted">
                    No records
                  </td>
                </tr>
              )}
            </tbody>
          </table>
          <div class="pager">
            <button type="button" disabled={cursors.length < 2} onClick={() => setCursors(cursors.slice(0, -1))}>
              ← Previous
            </button>
            <span class="muted">Page {cursors.length}</span>
            <button type="button" disabled={!page.next} onClick={() => setCursors([...cursors, page.next])}>
              Next →
            </button>
          </div>
        </>
      )}
    </section>
  );
}
