import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { fetchManifest, ManifestError, validateManifest } from '../../src/apps/manifest.ts';
import { httpsSite, type HttpsSite } from './support.ts';

/** Manifest fetching under the operations' address rules (issue 19): caps, types, redirects. */
let site: HttpsSite;
const MANIFEST = { name: 'Shop sync', settings: { apiKey: { type: 'secret', required: true } } };

beforeAll(() => {
  site = httpsSite({
    '/ok.json': () => Response.json(MANIFEST),
    '/page': () => new Response('<html><body>not json</body></html>', { headers: { 'content-type': 'text/html' } }),
    '/huge.json': () =>
      new Response(new Uint8Array(10 * 1024 * 1024).fill(32), { headers: { 'content-type': 'application/json' } }),
    '/to-private': () =>
      new Response(null, {
        status: 302,
        headers: { location: site.url.replace('127.0.0.1', '127.0.0.2') + '/ok.json' },
      }),
    '/to-http': () =>
      new Response(null, { status: 302, headers: { location: site.url.replace('https:', 'http:') + '/ok.json' } }),
    '/slow.json': () => new Promise<Response>((resolve) => setTimeout(() => resolve(Response.json(MANIFEST)), 3000)),
    '/gone': () => new Response('nope', { status: 404 }),
  });
});

afterAll(() => site.stop());

// Only 127.0.0.1 counts as public here, as in the operations' SSRF test.
const policy = { publicOnly: true, allowed: (ip: string) => ip === '127.0.0.1' };

async function problem(url: string, opts: { timeoutMs?: number } = {}): Promise<string> {
  try {
    await fetchManifest(url, policy, { ca: site.ca, ...opts });
    return 'fetched';
  } catch (err) {
    expect(err).toBeInstanceOf(ManifestError);
    return (err as Error).message;
  }
}

describe('fetchManifest', () => {
  test('fetches and validates a JSON manifest over https', async () => {
    const m = validateManifest(
      await fetchManifest(`${site.url}/ok.json`, policy, { ca: site.ca }),
      `${site.url}/ok.json`,
    );
    expect(m.name).toBe('Shop sync');
    expect(m.settings.apiKey).toEqual({ type: 'secret', required: true });
  });

  test('refuses HTML, 10 MB, a redirect to a private address or to http, plain http, a slow or failing source', async () => {
    expect(await problem(`${site.url}/page`)).toBe('the manifest must be JSON (application/json), not text/html');
    expect(await problem(`${site.url}/huge.json`)).toBe('the manifest is larger than 256 KB');
    expect(await problem(`${site.url}/to-private`)).toContain('which is not a public address');
    expect(await problem(`${site.url}/to-http`)).toContain('a redirect to a http: URL is not allowed');
    expect(await problem(site.url.replace('https:', 'http:') + '/ok.json')).toBe('source must be an https URL');
    expect(await problem(`${site.url}/slow.json`, { timeoutMs: 300 })).toBe('the manifest did not arrive within 0.3 s');
    expect(await problem(`${site.url}/gone`)).toBe('the manifest URL answered HTTP 404');
    expect(await problem('https://169.254.169.254/latest/meta-data')).toContain('not a public address');
    // Without the test CA the self-signed certificate is refused like any untrusted one.
    const untrusted = await fetchManifest(`${site.url}/ok.json`, policy).catch((e) => e);
    expect(untrusted).toBeInstanceOf(ManifestError);
  });

  test('validation names what is wrong', () => {
    const bad = (v: unknown) => {
      try {
        validateManifest(v, 'https://apps.example/m.json');
        return 'valid';
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(bad([])).toBe('the manifest must be a JSON object');
    expect(bad({})).toBe('the manifest needs a name (1 to 200 characters)');
    expect(bad({ name: 'x', settings: { k: { type: 'money' } } })).toBe(
      'settings.k.type must be one of string, number, boolean, secret',
    );
    expect(bad({ name: 'x', placements: [{ type: 'main-editor', url: 'http://apps.example/p' }] })).toBe(
      'placements[0].url must be https',
    );
    expect(bad({ name: 'x', sources: { products: { fields: ['ok', 'not ok'] } } })).toContain(
      'sources.products.fields',
    );
    const good = validateManifest(
      { name: 'x', placements: [{ type: 'main-editor', url: 'panel.html' }] },
      'https://apps.example/app/m.json',
    );
    expect(good.placements[0]!.url).toBe('https://apps.example/app/panel.html');
  });
});
