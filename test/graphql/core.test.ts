import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { GraphQLError } from 'graphql';
import { contextFor, execute } from '../../src/graphql/execute.ts';
import { prepareFor, variablesFor } from '../../src/graphql/prepare.ts';
import { targetOf } from '../../src/graphql/schema-entries.ts';
import { maskErrors } from '../../src/graphql/errors.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { ALL_SECRET, gqlProject, type GqlProject } from './helpers.ts';

/**
 * The GraphQL core as a non-HTTP transport (graphql-ws) uses it: a plain ExecutionResult with
 * unmasked errors, and a prepare step usable without executing. The second Service runs as
 * SVC_ROLE=gateway over the same database, with no API listener: its response cache must still
 * follow writes made elsewhere (the invalidation is the Service's, not the HTTP route's).
 */
let api: TestServer;
let gateway: TestServer;
let p: GqlProject;

beforeAll(async () => {
  api = await startTestServer();
  gateway = await startTestServer({ DATABASE_URL: api.databaseUrl, SVC_ROLE: 'gateway' });
  p = await gqlProject(api, [{ key: 'post', name: 'Post', fields: [{ key: 'title', type: 'text' }] }]);
});
afterAll(async () => {
  await gateway.stop();
  await api.stop();
});

const principal = async (server: TestServer, key: string) =>
  (await server.svc.gate.authenticate({ headers: { 'x-api-key': key } })).key;

describe('GraphQL core', () => {
  test('answers an ExecutionResult; errors stay GraphQLErrors until a transport masks them', async () => {
    const pk = await principal(api, await p.key('pk', ['records:read']));
    const ok = await execute(
      api.svc,
      pk,
      { query: '{ posts(first: 1) { edges { node { title } } } }' },
      { method: 'POST', customer: null },
    );
    expect(ok.rejected).toBe(false);
    expect(ok.result).toEqual({ data: { posts: { edges: [] } } });
    expect(JSON.parse(ok.body!)).toEqual(ok.result);

    const bad = await execute(api.svc, pk, { query: '{ nope }' }, { method: 'POST', customer: null });
    expect(bad.rejected).toBe(true);
    expect(bad.result.errors![0]).toBeInstanceOf(GraphQLError);
    expect(maskErrors(bad.result.errors!, true)[0]!.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');

    const denied = await execute(
      api.svc,
      pk,
      { query: '{ post(naturalKey: "x", preview: true) { title } }' },
      { method: 'POST', customer: null },
    );
    expect(denied.rejected).toBe(false);
    expect(maskErrors(denied.result.errors!, true)[0]).toMatchObject({
      message: 'missing required scope: drafts:read',
    });
  });

  test('the prepare step serves a subscribe path: compiled document, context and variables without executing', async () => {
    const pk = await principal(api, await p.key('pk', ['records:read']));
    const target = await targetOf(api.svc, pk);
    const prepared = prepareFor(target, { query: 'query Q($n: Int) { posts(first: $n) { edges { node { _id } } } }' });
    if (!prepared.ok) throw new Error('expected a prepared document');
    expect(prepared.operation).toBe('query');
    const vars = variablesFor(target, prepared, { n: 2 });
    if ('errors' in vars) throw new Error('expected variables');
    const result = await prepared.compiled.query(undefined, contextFor(api.svc, pk, target), vars.values);
    expect(result).toEqual({ data: { posts: { edges: [] } } });
    const refused = prepareFor(target, { query: '{' });
    expect(refused.ok).toBe(false);
  });

  test('a gateway-only process drops cached reads when another process writes', async () => {
    const sk = await p.key('sk', ALL_SECRET);
    const pk = await principal(gateway, await p.key('pk', ['records:read']));
    const read = () =>
      execute(
        gateway.svc,
        pk,
        { query: '{ posts(first: 5) { edges { node { title } } } }' },
        { method: 'POST', customer: null },
      );
    const first = await read();
    expect(first.cacheControl).toBe('public, max-age=30, stale-while-revalidate=30');
    expect((await read()).body).toBe(first.body);
    const c = await p.gql(sk, 'mutation { createPost(naturalKey: "g", data: { title: "fresh" }) { _id } }');
    await p.gql(sk, 'mutation($id: ID!) { publishPostVersion(_id: $id) { _id } }', { id: c.body.data.createPost._id });
    const deadline = Date.now() + 10_000;
    let titles: string[] = [];
    while (Date.now() < deadline) {
      const r = await read();
      titles = (r.result.data as any).posts.edges.map((e: any) => e.node.title);
      if (titles.includes('fresh')) break;
      await Bun.sleep(50);
    }
    expect(titles).toContain('fresh');
  });
});
