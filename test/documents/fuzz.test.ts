import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { insertApiKey } from '../../src/auth/api-keys.ts';
import { apqBytes, DOCUMENT_LIMITS } from '../../src/documents/store.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { gqlProject, type GqlProject } from '../graphql/helpers.ts';
import { manifestOf, MODELS, pushManifest, sha } from './support.ts';

/**
 * Fuzz of the surfaces that name documents (docs/documents.md): `documentId`, `extensions`
 * (Apollo's persistedQuery) in POST bodies, and every GET /graphql URL parameter, under each key
 * policy. Every answer is a 2xx/3xx/4xx with a stable code (never a 500), the APQ store stays
 * within its bound, and a normal read still works afterwards.
 */
const SEED =
  process.env.FUZZ_SEED === 'random' ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.FUZZ_SEED ?? 20261128);
const RUNS = Number(process.env.FUZZ_RUNS ?? 1000);

const STABLE = new Set([
  'BAD_USER_INPUT',
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'QUERY_TOO_DEEP',
  'TOO_MANY_ALIASES',
  'QUERY_TOO_COMPLEX',
  'NOT_FOUND',
  'PAYLOAD_TOO_LARGE',
  'METHOD_NOT_ALLOWED',
  'PERSISTED_QUERY_NOT_FOUND',
  'DOCUMENT_NOT_TRUSTED',
]);
const LIST = 'query Titles { articles(first: 10) { edges { node { title } } } }';

let server: TestServer;
let p: GqlProject;
const keys: string[] = [];

beforeAll(async () => {
  server = await startTestServer();
  p = await gqlProject(server, MODELS, 'fuzz-docs');
  for (const documents of ['any', 'apq', 'trusted-only'] as const) {
    keys.push(
      (
        await insertApiKey(server.svc.sql, {
          tenantId: p.tenantId,
          projectId: p.projectId,
          kind: 'pk',
          name: `fuzz-${documents}`,
          scopes: ['records:read'],
          rateLimit: 10_000_000,
          documents,
        })
      ).key,
    );
  }
  expect((await pushManifest(server, p.ownerKey, p.projectId, manifestOf(LIST))).code).toBe(0);
}, 60_000);
afterAll(() => server.stop());

/** Text with what breaks naive handling: NUL, lone surrogates, non-ASCII, long runs. */
const nasty = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.constantFrom(
    '\u0000',
    '\ud800',
    'sha256:\udfff',
    'sha256:',
    'sha256:' + 'A'.repeat(64),
    `sha256:${sha(LIST)}`,
    `SHA256:${sha(LIST)}`,
    ' '.repeat(3),
    'ü'.repeat(64),
  ),
  fc.string({ unit: 'grapheme', maxLength: 40 }).map((s) => `sha256:${s}`),
  fc.nat(5).map((n) => 'x'.repeat(10 ** n)),
);
const hexish = fc.oneof(fc.constant(sha(LIST)), fc.stringMatching(/^[0-9a-fA-F]{60,68}$/), nasty);
/** Deeply nested JSON (objects and arrays), up to a few hundred levels. */
const deep = fc.integer({ min: 1, max: 400 }).map((n) => {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { persistedQuery: v };
  return v;
});
const persistedQuery = fc.oneof(
  fc.record(
    {
      version: fc.oneof(fc.constant(1), fc.integer(), fc.string(), fc.constant(null)),
      sha256Hash: fc.oneof(hexish, fc.integer(), fc.constant(null)),
    },
    { requiredKeys: [] },
  ),
  fc.jsonValue({ maxDepth: 4 }),
  deep,
);
const extensions = fc.oneof(
  fc.record({ persistedQuery }, { requiredKeys: [] }),
  fc.jsonValue({ maxDepth: 3 }),
  deep,
  nasty,
);
const query = fc.oneof(fc.constant(LIST), fc.constant('mutation { __typename }'), nasty, fc.constant(undefined));
/** A text with its true hash (APQ registers it under an `apq` key): the store's bound must hold. */
const registered = fc
  .string({ unit: 'binary', minLength: 1, maxLength: 3_000 })
  .map((t) => ({ query: t, extensions: { persistedQuery: { version: 1, sha256Hash: sha(t) } } }));

const body = fc.oneof(
  fc.record(
    {
      query,
      documentId: fc.oneof(hexish, fc.integer(), fc.jsonValue({ maxDepth: 2 })),
      extensions,
      variables: fc.oneof(fc.constant(undefined), fc.jsonValue({ maxDepth: 3 }), nasty),
    },
    { requiredKeys: [] },
  ),
  registered,
);
const params = fc.dictionary(
  fc.constantFrom('query', 'documentId', 'variables', 'extensions', 'operationName', 'x'),
  fc.oneof(
    nasty,
    hexish,
    extensions.map((e) => JSON.stringify(e) ?? ''),
  ),
  { maxKeys: 5 },
);

function checkAnswer(status: number, text: string): void {
  expect(status).toBeLessThan(500);
  // 304: no body. 431: the HTTP server refused headers past its size limit before any handler ran.
  if (status === 304 || status === 431) return;
  const json = JSON.parse(text);
  for (const e of json.errors ?? []) expect(STABLE.has(e.extensions?.code)).toBe(true);
}

describe('fuzz: documentId, extensions and GET parameters', () => {
  test('POST bodies naming documents', async () => {
    await fc.assert(
      fc.asyncProperty(body, fc.nat(2), async (b, k) => {
        const res = await fetch(`${server.apiUrl}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': keys[k]! },
          body: JSON.stringify(b),
        });
        checkAnswer(res.status, await res.text());
      }),
      { seed: SEED, numRuns: RUNS },
    );
    expect(await apqBytes(server.svc.sql, p.projectId)).toBeLessThanOrEqual(DOCUMENT_LIMITS.apqDefaultBytes);
  }, 600_000);

  test('GET /graphql URL parameters (with If-None-Match)', async () => {
    await fc.assert(
      fc.asyncProperty(
        params,
        fc.nat(2),
        fc.oneof(
          fc.constant(undefined),
          nasty.filter((s) => /^[\x20-\x7e]*$/.test(s)),
        ),
        async (ps, k, inm) => {
          const url = `${server.apiUrl}/graphql?${new URLSearchParams(ps as Record<string, string>)}`;
          const res = await fetch(url, {
            headers: { 'x-api-key': keys[k]!, ...(inm !== undefined ? { 'if-none-match': inm } : {}) },
          });
          checkAnswer(res.status, await res.text());
        },
      ),
      { seed: SEED + 1, numRuns: RUNS },
    );
  }, 600_000);

  test('a normal read still works afterwards, by id and by text', async () => {
    const byId = await fetch(`${server.apiUrl}/graphql?documentId=sha256:${sha(LIST)}`, {
      headers: { 'x-api-key': keys[2]! },
    });
    expect(byId.status).toBe(200);
    const text = await p.gql(keys[0]!, LIST);
    expect(text.status).toBe(200);
  });
});
