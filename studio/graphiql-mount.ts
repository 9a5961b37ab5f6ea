import { createElement } from 'react';
import { createRoot } from 'react-dom/client';
import { GraphiQL } from 'graphiql';
import 'graphiql/style.css';

/**
 * The real GraphiQL (npm `graphiql`, Monaco editors with autocompletion, docs and history),
 * built by the server as a bundle of its own (src/studio/bundle.ts, `buildExplorer`) and mounted
 * into the Studio's explorer screen (as the member) or the `/graphiql` page (with an API key
 * typed into GraphiQL's headers editor).
 */
export type Fetcher = (
  params: { query: string; variables?: unknown; operationName?: string | null },
  opts?: { headers?: Record<string, unknown> },
) => Promise<unknown>;

export interface MountOptions {
  defaultQuery: string;
  /** Show GraphiQL's headers editor (the /graphiql page: `x-api-key`, `X-Project-Id`). */
  defaultHeaders?: string;
  /** Told the query editor's text on every edit (the Studio saves it as a trusted document). */
  onEditQuery?: (query: string) => void;
}

export function mountGraphiQL(
  el: HTMLElement,
  fetcher: Fetcher,
  workers: Record<string, string>,
  opts: MountOptions,
): () => void {
  (globalThis as { MonacoEnvironment?: unknown }).MonacoEnvironment = {
    getWorker(_id: string, label: string) {
      return new Worker(workers[label] ?? workers.editor!, { type: 'module' });
    },
  };
  const root = createRoot(el);
  root.render(
    createElement(GraphiQL, {
      fetcher,
      defaultQuery: opts.defaultQuery,
      ...(opts.onEditQuery ? { onEditQuery: opts.onEditQuery } : {}),
      defaultEditorToolsVisibility: opts.defaultHeaders ? 'headers' : true,
      isHeadersEditorEnabled: opts.defaultHeaders !== undefined,
      ...(opts.defaultHeaders !== undefined
        ? { defaultHeaders: opts.defaultHeaders, shouldPersistHeaders: true }
        : { shouldPersistHeaders: false }),
    }),
  );
  return () => root.unmount();
}
