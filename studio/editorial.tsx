import { useEffect, useState } from 'preact/hooks';
import { canEdit, gql, request, type ProjectRef } from './api.ts';
import { BASE, onLink } from './router.ts';
import { ErrorLine, ListTable, NoticeLine } from './screen-parts.tsx';

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
  const columns = ['When', 'Action', 'Record', 'Status', ''];
  return (
    <section>
      <h1>Scheduled</h1>
      <ErrorLine error={error} />
      <NoticeLine notice={msg} />
      <h2>Upcoming</h2>
      <ListTable label="Upcoming" columns={columns} items={items && upcoming} row={row} empty="Nothing scheduled" />
      {past.length > 0 && (
        <>
          <h2>Done, cancelled or failed</h2>
          <ListTable label="Past" columns={columns} items={past} row={row} />
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
      <ErrorLine error={error} />
      <ListTable
        label="Audit log"
        columns={['When', 'Who', 'Action', 'Target', 'From']}
        items={entries}
        empty={error ? undefined : 'No entries'}
        row={(e) => (
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
        )}
      />
      {more && (
        <button type="button" class="ghost" onClick={() => void load(cursor)}>
          Older entries
        </button>
      )}
    </section>
  );
}
