import { useEffect, useRef, useState } from 'preact/hooks';
import { csrfToken, type ProjectRef } from './api.ts';
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
    await Promise.all(manifest.styles.map((href) => new Promise<void>((resolve) => {
      if (document.querySelector(`link[href="${href}"]`)) return resolve();
      const link = document.createElement('link');
      link.rel = 'stylesheet';
      link.href = href;
      link.onload = link.onerror = () => resolve();
      document.head.appendChild(link);
    })));
    const mod = (await import(/* a runtime URL: GraphiQL is not part of the app's bundle */ manifest.entry)) as { mountGraphiQL: typeof mountGraphiQL };
    return { manifest, mount: mod.mountGraphiQL };
  })();
  loading.catch(() => (loading = undefined));
  return loading;
}

/** The GraphQL explorer: GraphiQL against this project, as the member (same rights as the Studio). */
function starter(config: ProjectConfig): string {
  const m = config.models?.[0];
  // Short lines: the editor pane is narrow beside the docs and results, and does not wrap.
  const head = '# Runs as you, with your\n# role\'s rights here.\n# Ctrl+Space completes,\n# Ctrl+Enter runs; docs:\n# the book icon, left.\n';
  if (!m) return `${head}{\n  _schemaVersion\n}\n`;
  return `${head}{\n  ${names(m.key).list}(first: 5, preview: true) {\n    totalCount\n    edges {\n      node {\n        _id\n        _updatedAt\n        content\n      }\n    }\n  }\n}\n`;
}

export function Explorer({ project, config }: { project: ProjectRef; config: ProjectConfig }) {
  const host = useRef<HTMLDivElement>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    let unmount: (() => void) | undefined;
    let live = true;
    const fetcher: Fetcher = async (params) => {
      const res = await fetch('/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', 'x-csrf-token': csrfToken(), 'x-project-id': project.id },
        body: JSON.stringify(params),
        credentials: 'same-origin',
      });
      return res.json();
    };
    loadGraphiQL().then(({ manifest, mount }) => {
      if (live) unmount = mount(host.current!, fetcher, manifest.workers, { defaultQuery: starter(config) });
    }, (e: Error) => setError(`Could not load GraphiQL: ${e.message}`));
    return () => {
      live = false;
      unmount?.();
    };
  }, [project.id]);
  return (
    <section class="explorer">
      <h1 class="sr-only">GraphQL explorer</h1>
      {error && <p role="alert" class="error">{error}</p>}
      <div class="graphiql-host" ref={host} aria-busy={!error} />
    </section>
  );
}
