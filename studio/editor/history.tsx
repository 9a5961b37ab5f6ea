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
}

/**
 * A version row holds what that write sent (a create: everything; an update: the fields it
 * changed). The record as of version N is the writes up to N merged, per locale.
 */
function snapshots(rows: Version[]): Version[] {
  const state = new Map<string, Record<string, unknown>>();
  return rows.map((v) => {
    if (!v.content) return { ...v, content: null };
    const key = v.locale ?? '';
    const merged = { ...(state.get(key) ?? state.get('') ?? {}), ...v.content };
    state.set(key, merged);
    return { ...v, content: merged };
  });
}

const show = (v: unknown): string => (v === undefined || v === null ? '—' : typeof v === 'string' ? v : JSON.stringify(v, null, 1));

/** Version history (`recordVersions`): pick a version, see its diff with the current draft, restore it. */
export function History({ project, model, recordId, current, canWrite, onRestored }: {
  project: ProjectRef; model: ModelDef; recordId: string; current: Record<string, unknown>; canWrite: boolean; onRestored: () => void;
}) {
  const [versions, setVersions] = useState<Version[] | null>(null);
  const [picked, setPicked] = useState<Version | null>(null);
  const [error, setError] = useState('');
  const load = () => gql(project.id, 'query($id:ID!){ v: recordVersions(_id:$id){ version action locale content userId userEmail createdAt } }', { id: recordId })
    .then((d) => setVersions(snapshots(d.v).reverse()), (e: Error) => setError(e.message));
  useEffect(() => void load(), [recordId]);
  const restore = async (v: Version) => {
    setError('');
    try {
      const data = Object.fromEntries(model.fields.map((f) => [f.key, v.content?.[f.key] ?? null]));
      await gql(project.id, `mutation($id:ID!,$data:${names(model.key).input}!){ ${names(model.key).update}(_id:$id, data:$data){ _id } }`, { id: recordId, data });
      onRestored();
      void load();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  if (error) return <p role="alert" class="error">{error}</p>;
  if (!versions) return <p class="muted">Loading…</p>;
  return (
    <div class="history">
      <ol class="versions" aria-label="Versions">
        {versions.map((v) => (
          <li key={v.version}>
            <button type="button" class={picked?.version === v.version ? 'ghost active' : 'ghost'} aria-pressed={picked?.version === v.version} onClick={() => setPicked(v)}>
              v{v.version} · {v.action}{v.locale ? ` · ${v.locale}` : ''} · {new Date(v.createdAt).toLocaleString()} · {v.userEmail ?? v.userId ?? 'unknown'}
            </button>
          </li>
        ))}
      </ol>
      {picked && (
        <div class="diff">
          <h3>Version {picked.version} compared with the current draft</h3>
          <table>
            <thead><tr><th scope="col">Field</th><th scope="col">Version {picked.version}</th><th scope="col">Now</th></tr></thead>
            <tbody>
              {model.fields.map((f) => {
                const was = picked.content?.[f.key];
                const now = current[f.key];
                const same = JSON.stringify(was ?? null) === JSON.stringify(now ?? null);
                return <tr key={f.key} class={same ? 'same' : 'changed'}><th scope="row">{labelOf(f)}</th><td><del>{same ? '' : show(was)}</del>{same ? show(was) : ''}</td><td><ins>{same ? '' : show(now)}</ins>{same ? show(now) : ''}</td></tr>;
              })}
            </tbody>
          </table>
          {canWrite && picked.content && <button type="button" onClick={() => void restore(picked)}>Restore version {picked.version}</button>}
        </div>
      )}
    </div>
  );
}
