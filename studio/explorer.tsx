import { useEffect, useRef, useState } from 'preact/hooks';
import { canEdit, csrfToken, request, type ProjectRef } from './api.ts';
import type { Fetcher, mountGraphiQL } from './graphiql-mount.ts';
import { names, type ProjectConfig } from './models.ts';

/** GET /studio/explorer/manifest.json: GraphiQL's bundle, built apart from the app. */
interface Manifest {
  entry: string;
  styles: string[];
  workers: Record<string, string>;
}

let loading: Promise<{ manifest: Manifest; mount: typeof mountGraphiQL }> | undefined;

/** Links GraphiQL's stylesheets and imports its bundle, once. */
function loadGraphiQL() {
  loading ??= (async () => {
    const manifest = (await (await fetch('/studio/explorer/manifest.json')).json()) as Manifest;
    await Promise.all(
      manifest.styles.map(
        (href) =>
          new Promise<void>((resolve) => {
            if (document.querySelector(`link[href="${href}"]`)) return resolve();
            const link = document.createElement('link');
            link.rel = 'stylesheet';
            link.href = href;
            link.onload = link.onerror = () => resolve();
            document.head.appendChild(link);
          }),
      ),
    );
    const mod = (await import(/* a runtime URL: GraphiQL is not part of the app's bundle */ manifest.entry)) as {
      mountGraphiQL: typeof mountGraphiQL;
    };
    return { manifest, mount: mod.mountGraphiQL };
  })();
  loading.catch(() => (loading = undefined));
  return loading;
}

/** The GraphQL explorer: GraphiQL against this project, as the member (same rights as the Studio). */
function starter(config: ProjectConfig): string {
  const m = config.models?.[0];
  // Short lines: the editor pane is narrow beside the docs and results, and does not wrap.
  const head =
    "# Runs as you, with your\n# role's rights here.\n# Ctrl+Space completes,\n# Ctrl+Enter runs; docs:\n# the book icon, left.\n";
  if (!m) return `${head}{\n  _schemaVersion\n}\n`;
  return `${head}{\n  ${names(m.key).list}(first: 5, preview: true) {\n    totalCount\n    edges {\n      node {\n        _id\n        _updatedAt\n        content\n      }\n    }\n  }\n}\n`;
}

/** SHA-256 of a document in lowercase hex: a trusted document's id (docs/documents.md). */
async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

interface Pushed {
  applied: { documents: number };
  errors: { path: string; message: string }[];
}

export function Explorer({ project, config }: { project: ProjectRef; config: ProjectConfig }) {
  const host = useRef<HTMLDivElement>(null);
  const [error, setError] = useState('');
  /** The query editor's text, as GraphiQL reports it. */
  const query = useRef(starter(config));
  const [saved, setSaved] = useState('');
  const [saving, setSaving] = useState(false);
  const save = async () => {
    setSaving(true);
    setSaved('');
    try {
      const text = query.current;
      const hash = await sha256Hex(text);
      const out = await request<Pushed>(
        'POST',
        `/v1/control/projects/${encodeURIComponent(project.id)}/documents`,
        { documents: { [hash]: text } },
        project.id,
      );
      setSaved(
        out.errors.length
          ? `Not saved: ${out.errors.map((e) => e.message).join('; ')}`
          : `Saved as trusted document sha256:${hash.slice(0, 12)}…`,
      );
    } catch (e) {
      setSaved(`Not saved: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      setSaving(false);
    }
  };
  useEffect(() => {
    let unmount: (() => void) | undefined;
    let live = true;
    const fetcher: Fetcher = async (params) => {
      const res = await fetch('/graphql', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          'x-csrf-token': csrfToken(),
          'x-project-id': project.id,
        },
        body: JSON.stringify(params),
        credentials: 'same-origin',
      });
      return res.json();
    };
    loadGraphiQL().then(
      ({ manifest, mount }) => {
        if (live)
          unmount = mount(host.current!, fetcher, manifest.workers, {
            defaultQuery: starter(config),
            onEditQuery: (q) => (query.current = q),
          });
      },
      (e: Error) => setError(`Could not load GraphiQL: ${e.message}`),
    );
    return () => {
      live = false;
      unmount?.();
    };
  }, [project.id]);
  return (
    <section class="explorer">
      <h1 class="sr-only">GraphQL explorer</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {canEdit(project.role) && (
        <div class="explorer-tools">
          <button
            type="button"
            onClick={save}
            disabled={saving}
            title="Validate the document in the editor and add it to the project's trusted documents (docs/documents.md)"
          >
            Save as trusted document
          </button>
          {saved && <span role="status">{saved}</span>}
        </div>
      )}
      <div class="graphiql-host" ref={host} aria-busy={!error} />
    </section>
  );
}
