import { useEffect, useState } from 'preact/hooks';
import { gql, type ProjectRef } from '../api.ts';
import { labelOf, names, type ModelDef } from '../models.ts';

interface Version {
  version: number;
  action: string;
  locale: string | null;
  content: Record<string, unknown> | null;
  userId: string | null;
  userEmail: string | null;
  createdAt: string;
  restoredFrom?: number | null;
}

/**
 * A version row holds what that write sent (a create: everything; an update: the fields it
 * changed; a restore: every locale's content). The record as of version N is the writes up to N
 * merged, per locale (the rule the server's restore follows, docs/restore.md); shown here for
 * the default locale (the create's).
 */
function snapshots(rows: Version[], defaultLocale: string): Version[] {
  let state = new Map<string, Record<string, unknown>>();
  let shown: Record<string, unknown> | null = null;
  return rows.map((v) => {
    if (v.action === 'restored' && v.content)
      state = new Map(Object.entries(v.content as Record<string, Record<string, unknown>>));
    else if (v.content && v.locale)
      state.set(v.locale, { ...(state.get(v.locale) ?? state.get(defaultLocale) ?? {}), ...v.content });
    shown = state.get(defaultLocale) ?? shown;
    return { ...v, content: shown };
  });
}

const show = (v: unknown): string =>
  v === undefined || v === null ? '—' : typeof v === 'string' ? v : JSON.stringify(v, null, 1);

/** Version history (`recordVersions`): pick a version, see its diff with the current draft, restore it. */
export function History({
  project,
  model,
  recordId,
  current,
  canWrite,
  onRestored,
}: {
  project: ProjectRef;
  model: ModelDef;
  recordId: string;
  current: Record<string, unknown>;
  canWrite: boolean;
  onRestored: () => void;
}) {
  const [versions, setVersions] = useState<Version[] | null>(null);
  const [picked, setPicked] = useState<Version | null>(null);
  const [error, setError] = useState('');
  const [notice, setNotice] = useState('');
  const load = () =>
    gql(
      project.id,
      'query($id:ID!){ v: recordVersions(_id:$id){ version action locale content userId userEmail createdAt restoredFrom } }',
      { id: recordId },
    ).then(
      (d) => setVersions(snapshots(d.v, d.v[0]?.locale ?? 'en').reverse()),
      (e: Error) => setError(e.message),
    );
  useEffect(() => void load(), [recordId]);
  const restore = async (v: Version) => {
    setError('');
    try {
      // The server makes the version's content (every locale) the new working version; a live
      // room on the record receives it as one update (docs/restore.md).
      await gql(project.id, `mutation($id:ID!,$v:Int!){ ${names(model.key).restore}(_id:$id, version:$v){ _id } }`, {
        id: recordId,
        v: v.version,
      });
      setPicked(null);
      setNotice(`Restored version ${v.version}`);
      onRestored();
      void load();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  if (error)
    return (
      <p role="alert" class="error">
        {error}
      </p>
    );
  if (!versions) return <p class="muted">Loading…</p>;
  return (
    <div class="history">
      {notice && (
        <p role="status" class="ok">
          {notice}
        </p>
      )}
      <ol class="versions" aria-label="Versions">
        {versions.map((v) => (
          <li key={v.version}>
            <button
              type="button"
              class={picked?.version === v.version ? 'ghost active' : 'ghost'}
              aria-pressed={picked?.version === v.version}
              onClick={() => setPicked(v)}
            >
              v{v.version} · {v.action}
              {v.restoredFrom ? ` from v${v.restoredFrom}` : ''}
              {v.locale ? ` · ${v.locale}` : ''} · {new Date(v.createdAt).toLocaleString()} ·{' '}
              {v.userEmail ?? v.userId ?? 'unknown'}
            </button>
          </li>
        ))}
      </ol>
      {picked && (
        <div class="diff">
          <h3>Version {picked.version} compared with the current draft</h3>
          <table>
            <thead>
              <tr>
                <th scope="col">Field</th>
                <th scope="col">Version {picked.version}</th>
                <th scope="col">Now</th>
              </tr>
            </thead>
            <tbody>
              {model.fields.map((f) => {
                const was = picked.content?.[f.key];
                const now = current[f.key];
                const same = JSON.stringify(was ?? null) === JSON.stringify(now ?? null);
                return (
                  <tr key={f.key} class={same ? 'same' : 'changed'}>
                    <th scope="row">{labelOf(f)}</th>
                    <td>
                      <del>{same ? '' : show(was)}</del>
                      {same ? show(was) : ''}
                    </td>
                    <td>
                      <ins>{same ? '' : show(now)}</ins>
                      {same ? show(now) : ''}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          {canWrite && picked.content && (
            <button type="button" onClick={() => void restore(picked)}>
              Restore this version
            </button>
          )}
        </div>
      )}
    </div>
  );
}
