import { useState } from 'preact/hooks';
import { gql, type ProjectRef } from './api.ts';

/** Runs GraphQL against the project as the signed-in member. */
export function Explorer({ project }: { project: ProjectRef }) {
  const [query, setQuery] = useState('{\n  _schemaVersion\n}');
  const [result, setResult] = useState('');
  const run = async () => {
    try { setResult(JSON.stringify(await gql(project.id, query), null, 2)); } catch (e) { setResult((e as Error).message); }
  };
  return (
    <section class="explorer">
      <h1>GraphQL explorer</h1>
      <label for="gql-query">Query</label>
      <textarea id="gql-query" class="mono" rows={12} value={query} onInput={(e) => setQuery(e.currentTarget.value)} onKeyDown={(e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); void run(); } }} />
      <button type="button" onClick={() => void run()}>Run (Ctrl+Enter)</button>
      <pre class="mono result" aria-live="polite">{result}</pre>
    </section>
  );
}
