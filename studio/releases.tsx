import { useEffect, useState } from 'preact/hooks';
import { canEdit, gql, type ProjectRef } from './api.ts';
import { onLink } from './router.ts';
import { ErrorLine, NoticeLine, useActions } from './screen-parts.tsx';

/**
 * Releases (docs/releases.md): the project's releases with their records, create one, publish
 * or discard it; and `AddToRelease`, the record editor's control that puts the record being
 * edited (its working version) into an open release.
 */
export interface ReleaseRow {
  id: string;
  name: string;
  status: 'open' | 'scheduled' | 'published' | 'discarded';
  at: string | null;
  error: string | null;
  items: { modelKey: string; recordId: string; version: number | null }[];
}

const FIELDS = 'id name status at error items { modelKey recordId version }';

/** Newest first, ten a page (a page of releases with their records is a costly query), at most 100. */
export async function loadReleases(projectId: string): Promise<ReleaseRow[]> {
  const out: ReleaseRow[] = [];
  let after: string | null = null;
  for (let page = 0; page < 10; page++) {
    const d: any = await gql(
      projectId,
      `query($a: String) { releases(first: 10, after: $a) { edges { node { ${FIELDS} } } pageInfo { hasNextPage endCursor } } }`,
      { a: after },
    );
    out.push(...d.releases.edges.map((e: { node: ReleaseRow }) => e.node));
    if (!d.releases.pageInfo.hasNextPage) break;
    after = d.releases.pageInfo.endCursor;
  }
  return out;
}

export function ReleasesPanel({ project }: { project: ProjectRef }) {
  const [rows, setRows] = useState<ReleaseRow[] | null>(null);
  const [name, setName] = useState('');
  const { error, setError, notice, busy, act } = useActions(() => reload());
  const writer = canEdit(project.role);
  const reload = () => loadReleases(project.id).then(setRows, (e: Error) => setError(e.message));
  useEffect(() => void reload(), [project.id]);

  const create = (e: Event) => {
    e.preventDefault();
    void act('Release created', async () => {
      await gql(project.id, 'mutation($n:String!){ createRelease(name:$n){ id } }', { n: name });
      setName('');
    });
  };
  const publish = (r: ReleaseRow) => {
    if (!confirm(`Publish "${r.name}"? Its ${r.items.length} records go live together.`)) return;
    void act(`Published ${r.name}`, () =>
      gql(project.id, 'mutation($id:ID!){ publishRelease(id:$id){ id } }', { id: r.id }),
    );
  };
  const discard = (r: ReleaseRow) =>
    void act(`Discarded ${r.name}`, () =>
      gql(project.id, 'mutation($id:ID!){ discardRelease(id:$id){ id } }', { id: r.id }),
    );

  return (
    <section>
      <h1>Releases</h1>
      <p class="muted">A release is a set of record versions that go live together, in one step.</p>
      {writer && (
        <form class="inline-form" onSubmit={create}>
          <label for="release-name">New release</label>
          <input
            id="release-name"
            type="text"
            maxLength={200}
            required
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
          <button type="submit" disabled={busy || !name.trim()}>
            Create release
          </button>
        </form>
      )}
      <ErrorLine error={error} />
      <NoticeLine notice={notice} />
      {!rows ? (
        <p aria-busy="true" class="muted">
          Loading…
        </p>
      ) : rows.length === 0 ? (
        <p class="muted">No releases yet.</p>
      ) : (
        <table aria-label="Releases">
          <thead>
            <tr>
              <th>Name</th>
              <th>Status</th>
              <th>Records</th>
              <th>When</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.id} data-release={r.id}>
                <td>
                  {r.name}
                  {r.error && <div class="error">{r.error}</div>}
                </td>
                <td>
                  <span class={`badge ${r.status}`}>{r.status}</span>
                </td>
                <td>
                  <ul class="plain" aria-label={`Records in ${r.name}`}>
                    {r.items.map((i) => (
                      <li key={i.recordId}>
                        <a
                          onClick={onLink}
                          href={`/studio/p/${encodeURIComponent(project.id)}/m/${i.modelKey}/r/${encodeURIComponent(i.recordId)}`}
                        >
                          {i.modelKey} {i.recordId}
                        </a>
                        {i.version !== null && <span class="muted"> · version {i.version}</span>}
                      </li>
                    ))}
                  </ul>
                </td>
                <td>{r.at ? new Date(r.at).toLocaleString() : ''}</td>
                <td>
                  {writer && (r.status === 'open' || r.status === 'scheduled') && (
                    <>
                      <button type="button" disabled={busy} onClick={() => publish(r)}>
                        Publish release
                      </button>
                      <button type="button" class="ghost" disabled={busy} onClick={() => discard(r)}>
                        Discard
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/**
 * The editor's "Add to release": the open releases, and the one this record is in. `before`
 * saves the room's edits first, so the release takes what the editor sees.
 */
export function AddToRelease({
  project,
  modelKey,
  recordId,
  before,
}: {
  project: ProjectRef;
  modelKey: string;
  recordId: string;
  before: () => Promise<unknown>;
}) {
  const [rows, setRows] = useState<ReleaseRow[]>([]);
  const [chosen, setChosen] = useState('');
  const [message, setMessage] = useState('');
  const [busy, setBusy] = useState(false);
  const reload = () =>
    loadReleases(project.id).then(
      (all) => {
        const open = all.filter((r) => r.status === 'open' || r.status === 'scheduled');
        setRows(open);
        setChosen((c) => c || open.find((r) => !r.items.some((i) => i.recordId === recordId))?.id || '');
      },
      (e: Error) => setMessage(e.message),
    );
  useEffect(() => void reload(), [recordId]);
  const inRelease = rows.filter((r) => r.items.some((i) => i.recordId === recordId));
  const add = async () => {
    setBusy(true);
    setMessage('');
    try {
      await before();
      const d = await gql(
        project.id,
        `mutation($r:ID!,$m:String!,$id:ID!){ addToRelease(releaseId:$r, modelKey:$m, recordId:$id){ name } }`,
        { r: chosen, m: modelKey, id: recordId },
      );
      setMessage(`Added to ${d.addToRelease.name}`);
      await reload();
    } catch (e) {
      setMessage((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  if (rows.length === 0) return <span class="muted release-picker">No open releases</span>;
  return (
    <span class="release-picker">
      {inRelease.length > 0 && (
        <span class="badge scheduled" role="note" aria-label="In releases">
          In {inRelease.map((r) => r.name).join(', ')}
        </span>
      )}
      <select aria-label="Release" value={chosen} onChange={(e) => setChosen(e.currentTarget.value)}>
        {rows.map((r) => (
          <option key={r.id} value={r.id}>
            {r.name}
          </option>
        ))}
      </select>
      <button type="button" class="ghost" disabled={busy || !chosen} onClick={() => void add()}>
        Add to release
      </button>
      {message && (
        <span role="status" class="muted">
          {message}
        </span>
      )}
    </span>
  );
}
