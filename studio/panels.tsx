import { useEffect, useState } from 'preact/hooks';
import { canAdmin, canEdit, gql, request, upload, type ProjectRef } from './api.ts';
import { useChannel } from './live.ts';
import type { ProjectConfig } from './models.ts';
import { ErrorLine, ListTable } from './screen-parts.tsx';

/** A list loaded from the API, with its error and a reload. */
function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data: T | null; error: string; reload: () => void } {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState('');
  const reload = () =>
    load().then(
      (d) => {
        setData(d);
        setError('');
      },
      (e: Error) => setError(e.message),
    );
  useEffect(() => void reload(), deps);
  return { data, error, reload };
}

const when = (s: string | null | undefined) => (s ? new Date(s).toLocaleString() : '—');
const pid = (p: ProjectRef) => encodeURIComponent(p.id);

export function FilesPanel({ project }: { project: ProjectRef }) {
  const { data, error, reload } = useLoad(
    () =>
      gql(
        project.id,
        '{ files(first: 60) { edges { node { id url filename contentType size width height alt createdAt } } } }',
      ).then((d) => d.files.edges.map((e: any) => e.node)),
    [project.id],
  );
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState('');
  return (
    <section>
      <div class="bar">
        <h1>Files</h1>
        <span class="grow" />
        {canEdit(project.role) && (
          <label class="button">
            Upload
            <input
              type="file"
              class="sr-only"
              disabled={busy}
              onChange={async (e) => {
                const f = e.currentTarget.files?.[0];
                if (!f) return;
                setBusy(true);
                try {
                  await upload(project.id, f);
                  setErr('');
                  reload();
                } catch (x) {
                  setErr((x as Error).message);
                } finally {
                  setBusy(false);
                }
              }}
            />
          </label>
        )}
      </div>
      <ErrorLine error={error || err} />
      <ul class="files">
        {(data ?? []).map((f: any) => (
          <li key={f.id} class="file">
            {f.contentType.startsWith('image/') ? (
              <img src={f.url} alt={f.alt ?? f.filename} loading="lazy" />
            ) : (
              <span class="filetype">{f.contentType}</span>
            )}
            <a href={f.url} target="_blank" rel="noreferrer">
              {f.filename}
            </a>
            <span class="muted">
              {Math.ceil(f.size / 1024)} KB{f.width ? ` · ${f.width}×${f.height}` : ''}
            </span>
          </li>
        ))}
        {data?.length === 0 && <li class="muted">No files yet</li>}
      </ul>
    </section>
  );
}

export function KeysPanel({ project }: { project: ProjectRef }) {
  const admin = canAdmin(project.role);
  const { data, error, reload } = useLoad(
    () =>
      admin
        ? request('GET', `/v1/control/api-keys?project=${pid(project)}`, undefined, project.id).then((d) => d.keys)
        : Promise.resolve([]),
    [project.id],
  );
  const [name, setName] = useState('');
  const [type, setType] = useState<'public' | 'secret'>('public');
  const [scopes, setScopes] = useState('records:read');
  const [shown, setShown] = useState<{ key: string } | null>(null);
  const [err, setErr] = useState('');
  if (!admin)
    return (
      <section>
        <h1>API keys</h1>
        <p>Only owners and admins manage API keys.</p>
      </section>
    );
  const create = async (e: Event) => {
    e.preventDefault();
    try {
      setShown(
        await request(
          'POST',
          '/v1/control/api-keys',
          {
            name,
            type,
            project: project.id,
            scopes: scopes
              .split(',')
              .map((s) => s.trim())
              .filter(Boolean),
          },
          project.id,
        ),
      );
      setErr('');
      setName('');
      reload();
    } catch (x) {
      setErr((x as Error).message);
    }
  };
  const toggle = async (k: any) => {
    try {
      await request(
        'POST',
        `/v1/control/api-keys/${encodeURIComponent(k.id)}/${k.disabled ? 'enable' : 'disable'}`,
        undefined,
        project.id,
      );
      reload();
    } catch (x) {
      setErr((x as Error).message);
    }
  };
  return (
    <section>
      <h1>API keys</h1>
      <form class="filters" onSubmit={create}>
        <label>
          Name
          <input required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Type
          <select
            aria-label="Type"
            value={type}
            onChange={(e) => setType(e.currentTarget.value as 'public' | 'secret')}
          >
            <option value="public">public (pk_)</option>
            <option value="secret">secret (sk_)</option>
          </select>
        </label>
        <label>
          Scopes
          <input value={scopes} onInput={(e) => setScopes(e.currentTarget.value)} />
        </label>
        <button type="submit">Create key</button>
      </form>
      {shown && (
        <p class="notice" role="status">
          New key (shown once — copy it now): <code class="secret">{shown.key}</code>
        </p>
      )}
      <ErrorLine error={error || err} />
      <ListTable
        columns={['Name', 'Key', 'Scopes', 'Created', 'State']}
        items={data}
        row={(k: any) => (
          <tr key={k.id}>
            <td>{k.name}</td>
            <td>
              <code>{k.hint}</code>
            </td>
            <td>{k.scopes.join(', ')}</td>
            <td>{when(k.createdAt)}</td>
            <td>
              <button type="button" class="ghost" onClick={() => void toggle(k)}>
                {k.disabled ? 'Enable' : 'Disable'}
              </button>{' '}
              {k.disabled ? <span class="badge draft">disabled</span> : <span class="badge published">active</span>}
            </td>
          </tr>
        )}
      />
    </section>
  );
}

export function CustomersPanel({ project }: { project: ProjectRef }) {
  const customers = useLoad(
    () =>
      request('GET', `/v1/control/projects/${pid(project)}/customers`, undefined, project.id).then((d) => d.customers),
    [project.id],
  );
  const roles = useLoad(
    () =>
      request('GET', `/v1/control/projects/${pid(project)}/customer-roles`, undefined, project.id).then((d) => d.roles),
    [project.id],
  );
  return (
    <section>
      <h1>Customers</h1>
      <ErrorLine error={customers.error} />
      <ListTable
        columns={['Email', 'Name', 'Roles', 'Signed up', 'Last login']}
        items={customers.data}
        empty="No customers yet"
        row={(c: any) => (
          <tr key={c.id}>
            <td>{c.email}</td>
            <td>{c.name ?? '—'}</td>
            <td>{c.roles.join(', ') || '—'}</td>
            <td>{when(c.createdAt)}</td>
            <td>{when(c.lastLoginAt)}</td>
          </tr>
        )}
      />
      <h2>Roles</h2>
      <ErrorLine error={roles.error} />
      <ul>
        {(roles.data ?? []).map((r: any) => (
          <li key={r.key}>
            <strong>{r.name}</strong> <code>{r.key}</code>
            {r.isDefault ? ' · default' : ''} — {r.permissions.join(', ')}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** Executions, updated live from the gateway's `jobs:*` channel (the session authenticates it). */
export function OperationsPanel({ project, config }: { project: ProjectRef; config: ProjectConfig }) {
  const { data, error, reload } = useLoad(
    () =>
      request('GET', `/v1/control/projects/${pid(project)}/executions?limit=50`, undefined, project.id).then(
        (d) => d.executions,
      ),
    [project.id],
  );
  const live = useChannel(project.id, 'jobs:*', reload);
  return (
    <section>
      <div class="bar">
        <h1>Operations</h1>
        <span class="grow" />
        <span class={`badge ${live ? 'published' : 'draft'}`} role="status">
          {live ? 'live' : 'offline'}
        </span>
      </div>
      <p class="muted">
        {(config.operations ?? []).map((o) => o.name ?? o.key).join(', ') || 'No operations configured'}
      </p>
      <ErrorLine error={error} />
      <ListTable
        columns={['Execution', 'Operation', 'Status', 'Progress', 'Created']}
        items={data}
        empty="No executions yet"
        row={(x: any) => (
          <tr key={x.id}>
            <td>
              <code>{x.id}</code>
            </td>
            <td>{x.operationKey}</td>
            <td>
              <span class={`badge status-${x.status}`}>{x.status}</span>
            </td>
            <td>
              {x.progressPct !== null && x.progressPct !== undefined ? (
                <progress max={100} value={x.progressPct} aria-label={`${x.progressPct}%`} />
              ) : (
                ''
              )}{' '}
              {x.progressMessage ?? ''}
            </td>
            <td>{when(x.createdAt)}</td>
          </tr>
        )}
      />
    </section>
  );
}

export function SchedulesPanel({ project }: { project: ProjectRef }) {
  const { data, error, reload } = useLoad(
    () =>
      request('GET', `/v1/control/projects/${pid(project)}/schedules`, undefined, project.id).then((d) => d.schedules),
    [project.id],
  );
  const [msg, setMsg] = useState('');
  const trigger = async (key: string) => {
    try {
      const r = await request(
        'POST',
        `/v1/control/projects/${pid(project)}/schedules/${encodeURIComponent(key)}/trigger`,
        undefined,
        project.id,
      );
      setMsg(`Triggered: execution ${r.executionId ?? r.id ?? ''}`);
      reload();
    } catch (x) {
      setMsg((x as Error).message);
    }
  };
  return (
    <section>
      <h1>Schedules</h1>
      <ErrorLine error={error} />
      {msg && <p role="status">{msg}</p>}
      <ListTable
        columns={['Schedule', 'Operation', 'Cron', 'Zone', 'Next run', '']}
        items={data}
        empty="No schedules"
        row={(s: any) => (
          <tr key={s.key}>
            <td>
              {s.key}
              {s.enabled === false ? ' (disabled)' : ''}
            </td>
            <td>{s.operationKey}</td>
            <td>
              <code>{s.cron}</code>
            </td>
            <td>{s.timezone ?? 'UTC'}</td>
            <td>{when(s.nextRunAt)}</td>
            <td>
              {canEdit(project.role) && (
                <button type="button" class="ghost" onClick={() => void trigger(s.key)}>
                  Run now
                </button>
              )}
            </td>
          </tr>
        )}
      />
    </section>
  );
}
