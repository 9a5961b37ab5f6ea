import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { freePort } from '../../src/store/ports.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { perTestDirs } from '../support/tmp.ts';

/** Each test's data dirs, removed after it. */
const tempDir = perTestDirs();

/**
 * GET /metrics as Prometheus scrapes it, and the request log as an operator reads it from a
 * real process's stdout (SVC_LOG=json): one line per request naming the key id, never the key.
 */
let server: TestServer;
let p: GqlProject;
const TOKEN = 'metrics-secret-token';

beforeAll(async () => {
  server = await startTestServer({ SVC_METRICS_TOKEN: TOKEN });
  p = await gqlProject(server, [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }]);
});
afterAll(() => server.stop());

/** `name{labels} value` lines → value, for the series whose labels include all of `want`. */
function value(text: string, name: string, want: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = Object.fromEntries(
      [...(m[3] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]),
    );
    if (Object.entries(want).every(([k, v]) => labels[k] === v)) return Number(m[4]);
  }
  return undefined;
}

const scrape = (url: string, token: string | null = TOKEN) =>
  fetch(`${url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

describe('GET /metrics', () => {
  test('needs SVC_METRICS_TOKEN when it is set, on both listeners', async () => {
    for (const url of [server.apiUrl, server.gatewayUrl]) {
      const none = await scrape(url, null);
      expect(none.status).toBe(401);
      expect(((await none.json()) as { error: string }).error).toBe('UNAUTHENTICATED');
      expect((await scrape(url, 'wrong')).status).toBe(401);
      const ok = await scrape(url);
      expect(ok.status).toBe(200);
      expect(ok.headers.get('content-type')).toStartWith('text/plain; version=0.0.4');
    }
  });

  test('counts requests by surface, route and status, cache hits, refusals, actors and pools', async () => {
    const pk = await p.key('pk', ['records:read']);
    const q = '{ posts(first: 1) { edges { node { title } } } }';
    const before = await (await scrape(server.apiUrl)).text();
    const okBefore =
      value(before, 'svc_http_requests_total', { surface: 'graphql', route: '/graphql', status: '200' }) ?? 0;
    const hitsBefore = value(before, 'svc_response_cache_hits_total') ?? 0;
    for (let i = 0; i < 3; i++) expect((await p.gql(pk, q)).status).toBe(200);
    expect((await p.gql('pk_nope', q)).status).toBe(401);
    expect((await fetch(`${server.apiUrl}/v1/control/projects/${p.projectId}/config`)).status).toBe(401);
    const text = await (await scrape(server.apiUrl)).text();
    expect(value(text, 'svc_http_requests_total', { surface: 'graphql', route: '/graphql', status: '200' })).toBe(
      okBefore + 3,
    );
    expect(
      value(text, 'svc_http_requests_total', { surface: 'graphql', route: '/graphql', status: '401' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      value(text, 'svc_http_requests_total', {
        surface: 'control',
        route: '/v1/control/projects/:id/config',
        status: '401',
      }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      value(text, 'svc_http_request_duration_seconds_count', { surface: 'graphql', route: '/graphql' }),
    ).toBeGreaterThanOrEqual(okBefore + 3);
    expect(
      value(text, 'svc_http_request_duration_seconds_bucket', { route: '/graphql', le: '+Inf' }),
    ).toBeGreaterThanOrEqual(okBefore + 3);
    expect(value(text, 'svc_response_cache_hits_total')).toBeGreaterThanOrEqual(hitsBefore + 2);
    expect(value(text, 'svc_graphql_cache_entries', { kind: 'responses' })).toBeGreaterThanOrEqual(1);
    expect(value(text, 'svc_graphql_cache_bytes', { kind: 'responses' })).toBeGreaterThan(0);
    expect(value(text, 'svc_live_actors', { kind: 'project', state: 'live' })).toBeGreaterThanOrEqual(1);
    expect(value(text, 'svc_db_connections', { pool: 'control', state: 'in_use' })).toBeGreaterThanOrEqual(0);
    expect(value(text, 'svc_db_connections', { pool: 'read' })).toBeDefined();
    expect(value(text, 'svc_rate_limit_refusals_total')).toBeGreaterThanOrEqual(0);
    expect(value(text, 'svc_bus_lag_seconds')).toBeGreaterThanOrEqual(0);
  });

  test('a rate-limit refusal is counted', async () => {
    const pk = await p.key('pk', ['records:read']);
    await server.svc.sql`update api_keys set rate_limit = 1 where key_hint = ${pk.slice(0, pk.lastIndexOf('_') + 5)}`;
    const before = value(await (await scrape(server.apiUrl)).text(), 'svc_rate_limit_refusals_total')!;
    await p.gql(pk, '{ posts(first: 1) { edges { node { title } } } }');
    const refused = await p.gql(pk, '{ posts(first: 1) { edges { node { title } } } }');
    expect(refused.status).toBe(429);
    expect(value(await (await scrape(server.apiUrl)).text(), 'svc_rate_limit_refusals_total')).toBe(before + 1);
  });
});

describe('request log', () => {
  test('SVC_LOG=json: one JSON line per request with request id, project, key id and status; never the key', async () => {
    const port = await freePort();
    const dataDir = tempDir('svc-log-');
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    Object.assign(env, {
      DATABASE_URL: server.databaseUrl,
      PORT: String(port),
      REALTIME_PORT: String(await freePort()),
      SVC_DATA_DIR: dataDir,
      SVC_ROOT_TOKEN: 'rt_log_test',
      SVC_LOG: 'json',
    });
    const child = Bun.spawn([process.execPath, 'src/main.ts'], {
      cwd: join(import.meta.dir, '..', '..'),
      env,
      stdout: 'pipe',
      stderr: 'pipe',
    });
    try {
      const url = `http://127.0.0.1:${port}`;
      const pk = await p.key('pk', ['records:read']);
      const keyId = (await server.svc.gate.authenticate({ headers: { 'x-api-key': pk } })).key.keyId;
      const end = Date.now() + 30_000;
      while (Date.now() < end) {
        if (
          await fetch(`${url}/health`).then(
            (r) => r.ok,
            () => false,
          )
        )
          break;
        await Bun.sleep(100);
      }
      const res = await fetch(`${url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': pk, 'x-request-id': 'req-123' },
        body: JSON.stringify({ query: '{ posts(first: 1) { edges { node { title } } } }' }),
      });
      expect(res.status).toBe(200);
      child.kill('SIGTERM');
      await child.exited;
      const out = await new Response(child.stdout).text();
      expect(out).not.toContain(pk);
      const lines = out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l));
      const line = lines.find((l) => l.requestId === 'req-123');
      expect(line).toMatchObject({
        method: 'POST',
        path: '/graphql',
        surface: 'graphql',
        route: '/graphql',
        status: 200,
        projectId: p.projectId,
        keyId,
      });
      expect(line.durationMs).toBeGreaterThan(0);
      expect(lines.find((l) => l.path === '/health')).toMatchObject({ status: 200, keyId: null, projectId: null });
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);
});
