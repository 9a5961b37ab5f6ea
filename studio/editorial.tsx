import { useEffect, useState } from 'preact/hooks';
import { canEdit, gql, request, type ProjectRef } from './api.ts';
import { BASE, onLink } from './router.ts';

/**
 * Scheduled publishing and the audit log in the Studio (docs/scheduling.md, docs/audit.md): the
 * list of what goes live (or comes down) when, with cancel, and the project's audit log.
 */
export interface Scheduled {
  id: string;
  action: string;
  modelKey: string | null;
  recordId: string | null;
  version: number | null;
  at: string;
  status: string;
  error: string | null;
}

const when = (s: string) => new Date(s).toLocaleString();

export async function scheduledActions(projectId: string, modelKey?: string): Promise<Scheduled[]> {
  const d = await gql(
    projectId,
    'query($m:String){ s: scheduledActions(first: 100, modelKey:$m){ edges { node { id action modelKey recordId version at status error } } } }',
    { m: modelKey ?? null },
  );
  return d.s.edges.map((e: any) => e.node);
}

export function ScheduledPanel({ project }: { project: ProjectRef }) {
  const [items, setItems] = useState<Scheduled[] | null>(null);
  const [error, setError] = useState('');
  const [msg, setMsg] = useState('');
  const load = () => scheduledActions(project.id).then(setItems, (e: Error) => setError(e.message));
  useEffect(() => void load(), [project.id]);
  const cancel = async (id: string) => {
    try {
      await gql(project.id, 'mutation($id:ID!){ cancelScheduledAction(id:$id){ id } }', { id });
      setMsg('Cancelled');
      void load();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const upcoming = (items ?? []).filter((s) => s.status === 'scheduled');
  const past = (items ?? []).filter((s) => s.status !== 'scheduled').reverse();
  const base = `${BASE}/p/${encodeURIComponent(project.id)}`;
  const row = (s: Scheduled) => (
    <tr key={s.id}>
      <td>{when(s.at)}</td>
      <td>{s.action === 'publish' ? `Publish${s.version ? ` v${s.version}` : ''}` : 'Unpublish'}</td>
      <td>
        {s.modelKey && s.recordId ? (
          <a href={`${base}/m/${s.modelKey}/r/${encodeURIComponent(s.recordId)}`} onClick={onLink}>
            {s.modelKey} · {s.recordId}
          </a>
        ) : (
          '—'
        )}
      </td>
      <td>
        <span class={`badge ${s.status === 'scheduled' ? 'changed' : s.status === 'done' ? 'published' : 'draft'}`}>
          {s.status}
        </span>
        {s.error ? <span class="muted"> {s.error}</span> : null}
      </td>
      <td>
        {s.status === 'scheduled' && canEdit(project.role) && (
          <button type="button" class="ghost" onClick={() => void cancel(s.id)}>
            Cancel
          </button>
        )}
      </td>
    </tr>
  );
  const head = (
    <thead>
      <tr>
        <th scope="col">When</th>
        <th scope="col">Action</th>
        <th scope="col">Record</th>
        <th scope="col">Status</th>
        <th scope="col"></th>
      </tr>
    </thead>
  );
  return (
    <section>
      <h1>Scheduled</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {msg && (
        <p role="status" class="ok">
          {msg}
        </p>
      )}
      <h2>Upcoming</h2>
      <table aria-label="Upcoming">
        {head}
        <tbody>
          {upcoming.map(row)}
          {items && upcoming.length === 0 && (
            <tr>
              <td colSpan={5} class="muted">
                Nothing scheduled
              </td>
            </tr>
          )}
        </tbody>
      </table>
      {past.length > 0 && (
        <>
          <h2>Done, cancelled or failed</h2>
          <table aria-label="Past">
            {head}
            <tbody>{past.map(row)}</tbody>
          </table>
        </>
      )}
    </section>
  );
}

interface AuditEntry {
  id: string;
  at: string;
  actor: { kind: string; id: string | null };
  action: string;
  target: { kind: string; id: string | null };
  ip: string | null;
  userAgent: string | null;
  requestId: string | null;
}

export function AuditPanel({ project }: { project: ProjectRef }) {
  const [entries, setEntries] = useState<AuditEntry[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [more, setMore] = useState(false);
  const [error, setError] = useState('');
  const load = (after: string | null) =>
    request(
      'GET',
      `/v1/control/audit?${new URLSearchParams({ projectId: project.id, first: '50', ...(after ? { after } : {}) })}`,
      undefined,
      project.id,
    ).then(
      (d) => {
        setEntries((e) => (after ? [...e, ...d.entries] : d.entries));
        setCursor(d.pageInfo.endCursor);
        setMore(d.pageInfo.hasNextPage);
      },
      (e: Error) => setError(e.message),
    );
  useEffect(() => void load(null), [project.id]);
  return (
    <section>
      <h1>Audit log</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <table aria-label="Audit log">
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Who</th>
            <th scope="col">Action</th>
            <th scope="col">Target</th>
            <th scope="col">From</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((e) => (
            <tr key={e.id}>
              <td>{when(e.at)}</td>
              <td>
                {e.actor.kind}
                {e.actor.id ? ` ${e.actor.id}` : ''}
              </td>
              <td>
                <code>{e.action}</code>
              </td>
              <td>
                {e.target.kind}
                {e.target.id ? ` ${e.target.id}` : ''}
              </td>
              <td class="muted" title={e.userAgent ?? ''}>
                {e.ip ?? '—'}
              </td>
            </tr>
          ))}
          {!error && entries.length === 0 && (
            <tr>
              <td colSpan={5} class="muted">
                No entries
              </td>
            </tr>
          )}
        </tbody>
      </table>
      {more && (
        <button type="button" class="ghost" onClick={() => void load(cursor)}>
          Older entries
        </button>
      )}
    </section>
  );
}
