import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Subprocess } from 'bun';
import { startTestServer, type TestServer } from '../support/server.ts';
import { spawnBeside } from '../support/process.ts';
import { opsProject, type OpsProject } from '../operations/support.ts';
import { httpsSite, type HttpsSite } from './support.ts';

/**
 * Apps and placements (issue 19): `svc push` fetches each manifest over https, validates it and
 * the installation, stores it; `apps` and `placements(modelKey)` serve an editor UI, from any
 * process of the deployment.
 */
let site: HttpsSite;
let server: TestServer;
let p: OpsProject;
let proc: Subprocess | undefined;
let version = '1.0.0';

const manifest = () => ({
  name: 'Shop sync',
  version,
  settings: { apiKey: { type: 'secret', required: true }, storeName: { type: 'string' }, batch: { type: 'number' } },
  sources: { products: { fields: ['title', 'sku', 'price'] } },
  sinks: { orders: { fields: ['orderId'] } },
  placementFields: ['productPicker'],
  placements: [{ type: 'sidebar', url: 'panel.html', modelKeys: ['product'], tabName: 'Shop' }],
});

const MODELS = [
  {
    key: 'product',
    name: 'Product',
    fields: [
      { key: 'name', type: 'text' },
      { key: 'sku', type: 'text' },
      { key: 'price', type: 'number' },
    ],
  },
  { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
];

const install = (source: string, extra: Record<string, unknown> = {}) => ({
  source,
  settings: { apiKey: 'shopKey', storeName: 'acme' },
  mappings: {
    sources: {
      products: { toModel: 'product', naturalKey: 'sku', fields: { title: 'name', sku: 'sku', price: 'price' } },
    },
    placementFields: { productPicker: { model: 'product', field: 'name' } },
  },
  ...extra,
});

beforeAll(async () => {
  site = httpsSite({
    '/shop/manifest.json': () => Response.json(manifest()),
    '/html': () =>
      new Response('<!doctype html><title>hi</title>', { headers: { 'content-type': 'text/html; charset=utf-8' } }),
    '/huge.json': () =>
      new Response(new Uint8Array(10 * 1024 * 1024).fill(32), { headers: { 'content-type': 'application/json' } }),
    '/to-http': () => new Response(null, { status: 301, headers: { location: 'http://127.0.0.1:9/x.json' } }),
  });
  server = await startTestServer({ SVC_APPS_CA_FILE: site.caFile });
  p = await opsProject(server, 'apps');
  let url: string;
  ({ proc, url } = await spawnBeside(server));
  (globalThis as any).otherApi = url;
}, 60_000);

afterAll(async () => {
  proc?.kill('SIGKILL');
  await server.stop();
  site.stop();
});

async function push(config: Record<string, unknown>): Promise<any> {
  const res = await fetch(`${server.apiUrl}/v1/control/projects/${p.projectId}/config`, {
    method: 'POST',
    headers: { authorization: `Bearer ${p.ownerKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ config: { key: 'cfg', name: 'cfg', ...config } }),
  });
  return res.json();
}

async function gqlAt(apiUrl: string, key: string, query: string): Promise<any> {
  const res = await fetch(`${apiUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ query }),
  });
  return res.json();
}

const APPS = '{ apps { name source settings mappings manifest updatedAt } }';

describe('apps and placements', () => {
  test('an app is installed only once its manifest, settings, secrets and mappings check out; both processes serve it', async () => {
    const source = `${site.url}/shop/manifest.json`;
    const key = await p.key(['schemas:read', 'secrets:put.project']);
    // The secret the app's settings name does not exist yet: the app is reported and not stored.
    const first = await push({
      models: MODELS,
      apps: { shop: install(source) },
      placements: [{ type: 'main-editor', url: 'https://seo.example/panel', modelKeys: ['page'], tabName: 'SEO' }],
    });
    expect(first.errors).toEqual([
      {
        path: 'apps.shop.settings.apiKey',
        message: 'names the secret "shopKey", which this project does not have (svc secrets push or putSecret)',
      },
    ]);
    expect(first.applied.apps).toBe(0);
    expect(first.applied.placements).toBe(1);
    expect((await gqlAt(server.apiUrl, key, APPS)).data.apps).toEqual([]);

    await gqlAt(server.apiUrl, key, 'mutation { putSecret(label: "shopKey", value: "shpat_PLAINTEXT") { created } }');
    const second = await push({
      models: MODELS,
      apps: { shop: install(source) },
      placements: [{ type: 'main-editor', url: 'https://seo.example/panel', modelKeys: ['page'], tabName: 'SEO' }],
    });
    expect(second.errors).toEqual([]);
    expect(second.applied.apps).toBe(1);

    const other = (globalThis as any).otherApi as string;
    for (const api of [server.apiUrl, other]) {
      const apps = (await gqlAt(api, key, APPS)).data.apps;
      expect(apps).toHaveLength(1);
      expect(apps[0]).toMatchObject({ name: 'shop', source, settings: { apiKey: 'shopKey', storeName: 'acme' } });
      expect(apps[0].manifest).toMatchObject({ name: 'Shop sync', version: '1.0.0' });
      expect(JSON.stringify(apps[0])).not.toContain('PLAINTEXT');
      const forProduct = (
        await gqlAt(api, key, '{ placements(modelKey: "product") { type url modelKeys tabName hideContentTab app } }')
      ).data.placements;
      expect(forProduct).toEqual([
        {
          type: 'sidebar',
          url: `${site.url}/shop/panel.html`,
          modelKeys: ['product'],
          tabName: 'Shop',
          hideContentTab: false,
          app: 'shop',
        },
      ]);
      const forPage = (await gqlAt(api, key, '{ placements(modelKey: "page") { type url tabName app } }')).data
        .placements;
      expect(forPage).toEqual([{ type: 'main-editor', url: 'https://seo.example/panel', tabName: 'SEO', app: null }]);
    }

    // A new manifest version, pushed through one process, is what the other serves next (its cache is dropped).
    version = '1.1.0';
    expect((await push({ apps: { shop: install(source) } })).errors).toEqual([]);
    let seen = '';
    const end = Date.now() + 15_000;
    while (seen !== '1.1.0' && Date.now() < end) {
      seen = (await gqlAt(other, key, APPS)).data.apps[0].manifest.version;
      if (seen !== '1.1.0') await Bun.sleep(50);
    }
    expect(seen).toBe('1.1.0');
  }, 60_000);

  test('bad manifests and bad mappings are reported with paths; nothing of them is stored', async () => {
    const key = await p.key(['schemas:read']);
    const before = (await gqlAt(server.apiUrl, key, APPS)).data.apps;
    const out = await push({
      apps: {
        page: install(`${site.url}/html`),
        huge: install(`${site.url}/huge.json`),
        hop: install(`${site.url}/to-http`),
        mapped: install(`${site.url}/shop/manifest.json`, {
          mappings: {
            sources: {
              products: { toModel: 'product', fields: { title: 'nope', colour: 'name' } },
              stock: { toModel: 'product', fields: {} },
            },
            sinks: { orders: { toModel: 'ghost', fields: {} } },
            placementFields: { productPicker: { model: 'page', field: 'body' } },
          },
          settings: { apiKey: 'shopKey', batch: 'ten', extra: 1 },
        }),
      },
    });
    const byPath = Object.fromEntries(out.errors.map((e: any) => [e.path, e.message]));
    expect(byPath['apps.page.source']).toBe('the manifest must be JSON (application/json), not text/html');
    expect(byPath['apps.huge.source']).toBe('the manifest is larger than 256 KB');
    expect(byPath['apps.hop.source']).toContain('a redirect to a http: URL is not allowed');
    expect(byPath['apps.mapped.mappings.sources.products.fields.title']).toBe('"nope" is not a field of product');
    expect(byPath['apps.mapped.mappings.sources.products.fields.colour']).toBe(
      'the app\'s products has no field "colour"',
    );
    expect(byPath['apps.mapped.mappings.sources.stock']).toBe('the app\'s manifest declares no source "stock"');
    expect(byPath['apps.mapped.mappings.sinks.orders.toModel']).toBe('"ghost" is not a model of this project');
    expect(byPath['apps.mapped.mappings.placementFields.productPicker.field']).toBe('"body" is not a field of page');
    expect(byPath['apps.mapped.settings.batch']).toBe('must be a number');
    expect(byPath['apps.mapped.settings.extra']).toBe('the app\'s manifest declares no setting "extra"');
    expect(out.applied.apps).toBe(0);
    // None of the refused apps was stored (the push's app list replaced the installed one, as for
    // every keyed collection, so `shop` is gone too).
    const after = (await gqlAt(server.apiUrl, key, APPS)).data.apps.map((a: any) => a.name);
    expect(after).not.toContain('page');
    expect(after).not.toContain('huge');
    expect(after).not.toContain('mapped');
    expect(after).not.toContain('hop');
    expect(before.length).toBe(1);
  }, 30_000);

  test('apps and placements need schemas:read; an unknown model is BAD_USER_INPUT', async () => {
    const none = await p.key(['records:read']);
    expect((await gqlAt(server.apiUrl, none, '{ apps { name } }')).errors[0].message).toBe(
      'missing required scope: schemas:read',
    );
    expect((await gqlAt(server.apiUrl, none, '{ placements { url } }')).errors[0].message).toBe(
      'missing required scope: schemas:read',
    );
    const key = await p.key(['schemas:read']);
    const r = await gqlAt(server.apiUrl, key, '{ placements(modelKey: "nope") { url } }');
    expect(r.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  test('production refuses a manifest on a private address', async () => {
    const prod = await startTestServer({
      SVC_ENV: 'production',
      SVC_APPS_CA_FILE: site.caFile,
      DATABASE_URL: server.databaseUrl,
    });
    try {
      const res = await fetch(`${prod.apiUrl}/v1/control/projects/${p.projectId}/config`, {
        method: 'POST',
        headers: { authorization: `Bearer ${p.ownerKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          config: { key: 'cfg', name: 'cfg', apps: { local: install(`${site.url}/shop/manifest.json`) } },
        }),
      });
      const out = (await res.json()) as any;
      expect(out.errors[0].path).toBe('apps.local.source');
      expect(out.errors[0].message).toContain('not a public address');
      expect(out.applied.apps).toBe(0);
    } finally {
      await prod.stop();
    }
  }, 30_000);
});
