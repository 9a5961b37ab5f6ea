import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bootstrapProject, cli, startTestServer, type TestServer } from '../support/server.ts';
import { folder } from './support.ts';
import { loadConfig } from '../../src/config/load.ts';
import { httpsSite, type HttpsSite } from '../apps/support.ts';

let server: TestServer;
// The example's app manifest, served over https as an app would serve it (push fetches it).
let site: HttpsSite;
beforeAll(async () => {
  site = httpsSite({
    '/shopify/manifest.json': () =>
      new Response(readFileSync(join(import.meta.dir, '../../examples/full/shopify-manifest.json')), {
        headers: { 'content-type': 'application/json' },
      }),
  });
  server = await startTestServer({ SVC_APPS_CA_FILE: site.caFile });
});
afterAll(async () => {
  await server.stop();
  site.stop();
});

function example(pin: { projectId: string; tenantId: string }): string {
  const dir = folder({});
  const src = readFileSync(join(import.meta.dir, '../../examples/full/svc.config.ts'), 'utf8');
  writeFileSync(
    join(dir, 'svc.config.ts'),
    src
      .replace("'prj_example'", `'${pin.projectId}'`)
      .replace("'ten_example'", `'${pin.tenantId}'`)
      .replace('https://apps.acme.example/shopify/', `${site.url}/shopify/`),
  );
  return dir;
}

describe('svc push and svc pull', () => {
  test('the full example covering every collection and field type pushes and pulls back equal', async () => {
    const p = await bootstrapProject(server, 'full');
    const dir = example(p);
    const pushed = await cli(server, p.ownerKey, 'push', '--dir', dir, '--json');
    expect(pushed.err + JSON.stringify(pushed.json?.errors ?? [])).toBe('[]');
    expect(pushed.code).toBe(0);
    expect(pushed.json.projectId).toBe(p.projectId);
    expect(pushed.json.errors).toEqual([]);
    expect(pushed.json.applied).toEqual({
      project: 1,
      models: 3,
      operations: 2,
      hooks: 1,
      schedules: 1,
      segments: 1,
      authProviders: 1,
      relyingParties: 1,
      placements: 1,
      apiKeys: 2,
      customerRoles: 2,
      apps: 1,
      designTokens: 1,
    });
    const loaded = await cli(server, p.ownerKey, 'pull', '--dir', dir, '--json');
    expect(loaded.code).toBe(0);
    const original = (await loadConfig(dir)).config;
    const { domains, ...live } = loaded.json;
    expect(domains[0].domain).toBe('login.acme.example');
    expect(live).toEqual(JSON.parse(JSON.stringify(original)));
  });
});
