import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { validateConfig } from '../../src/config/validate.ts';
import { bootstrapProject, startTestServer, type TestServer } from '../support/server.ts';

/**
 * Fuzz of the auth-provider surface a push accepts (issue 27 item 7): `authProviders[].config`
 * of any shape — NUL bytes, lone surrogates, non-ASCII text, huge and deeply nested values —
 * is validated without throwing into `{ path, message }` errors and warnings, and over HTTP a
 * push answers 200 (what is valid applies) or a 4xx, never a 500.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261128);

const text = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udfffy',
    'Zürich-報告',
    'https://sso.example',
    'http://127.0.0.1:1/x',
    'corp.example',
    '',
  ),
  fc.integer({ min: 1, max: 200_000 }).map((n) => 'x'.repeat(n)),
);
const deep = fc.integer({ min: 1, max: 5_000 }).map((n) => {
  let v: unknown = 'leaf';
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { v };
  return v;
});
const value = fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null), fc.array(text, { maxLength: 5 }), deep);
const config = fc.oneof(
  fc.record(
    { clientId: fc.oneof(text, value), allowedDomains: fc.oneof(fc.array(text, { maxLength: 4 }), value) },
    { requiredKeys: [] },
  ),
  fc.record(
    {
      clientId: text,
      issuer: fc.oneof(text, value),
      authorizeUrl: text,
      tokenUrl: text,
      userinfoUrl: text,
      scopes: fc.array(text, { maxLength: 3 }),
      clientSecretLabel: text,
    },
    { requiredKeys: [] },
  ),
  fc.dictionary(text, value, { maxKeys: 6 }),
  value,
);
const provider = fc.record(
  {
    key: fc.oneof(fc.constant('corp'), text),
    name: fc.oneof(fc.constant('Corp'), text),
    type: fc.oneof(fc.constant('oauth2'), text),
    enabled: fc.oneof(fc.boolean(), value),
    config,
  },
  { requiredKeys: ['key', 'name', 'type', 'config'] },
);

const shaped = (list: unknown) =>
  Array.isArray(list) && list.every((e) => typeof e?.path === 'string' && typeof e?.message === 'string');

describe('auth provider configs, fuzzed', () => {
  test('validation never throws and reports errors and warnings as { path, message }', () => {
    fc.assert(
      fc.property(fc.array(provider, { maxLength: 3 }), (authProviders) => {
        const r = validateConfig({ key: 'site', name: 'Site', authProviders });
        expect(shaped(r.errors)).toBe(true);
        expect(shaped(r.warnings)).toBe(true);
        for (const w of [...r.errors, ...r.warnings]) expect(w.message.length).toBeLessThan(5_000);
      }),
      { seed: SEED, numRuns: Number(process.env.FUZZ_RUNS ?? 500) },
    );
  }, 60_000);

  test('a client id with allowed domains (and no issuer) is always a warning, never an error', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 100 }).filter((s) => s.trim() !== '' && !s.includes('\u0000')),
        (clientId) => {
          const r = validateConfig({
            key: 'site',
            name: 'Site',
            authProviders: [
              { key: 'corp', name: 'Corp', type: 'oauth2', config: { clientId, allowedDomains: ['corp.example'] } },
            ],
          });
          expect(r.errors).toEqual([]);
          expect(r.warnings.map((w) => w.path)).toEqual(['authProviders[0].config']);
        },
      ),
      { seed: SEED, numRuns: 500 },
    );
  }, 60_000);
});

describe('over HTTP', () => {
  let server: TestServer;
  let project: { projectId: string; ownerKey: string };
  beforeAll(async () => {
    server = await startTestServer();
    project = await bootstrapProject(server, 'providers-fuzz');
  }, 60_000);
  afterAll(() => server.stop());

  test('a push of fuzzed providers answers 200 or 4xx with a JSON body, never 500', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(provider, { maxLength: 3 }), async (authProviders) => {
        const res = await fetch(`${server.apiUrl}/v1/control/projects/${project.projectId}/config`, {
          method: 'POST',
          headers: { authorization: `Bearer ${project.ownerKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ config: { key: 'site', name: 'Site', authProviders } }),
        });
        const body = (await res.json()) as { errors?: unknown; warnings?: unknown };
        expect(res.status).toBeLessThan(500);
        if (res.status === 200) {
          expect(shaped(body.errors)).toBe(true);
          expect(shaped(body.warnings)).toBe(true);
        }
      }),
      { seed: SEED, numRuns: 150 },
    );
  }, 120_000);
});
