import { mountGraphiQL, type Fetcher } from './graphiql-mount.ts';

/**
 * `GET /graphiql`: GraphiQL for developers, with the API key (and `X-Project-Id` for tenant keys)
 * in GraphiQL's headers editor, sent with every request. Not served in production (SVC_ENV).
 */
const meta = JSON.parse(document.querySelector('meta[name="svc-explorer"]')!.getAttribute('content')!) as {
  workers: Record<string, string>;
};

const fetcher: Fetcher = async (params, opts) => {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  for (const [k, v] of Object.entries(opts?.headers ?? {}))
    if (typeof v === 'string' && v.trim() !== '') headers[k] = v.trim();
  const res = await fetch('/graphql', { method: 'POST', headers, body: JSON.stringify(params), credentials: 'omit' });
  return res.json();
};

mountGraphiQL(document.getElementById('graphiql')!, fetcher, meta.workers, {
  defaultQuery:
    '# Put your API key in the headers below (and X-Project-Id for a tenant key).\n# Ctrl+Space completes, Ctrl+Enter runs; the docs are on the left.\n{\n  _schemaVersion\n}\n',
  defaultHeaders: '{\n  "x-api-key": ""\n}',
});
