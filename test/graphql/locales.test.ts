import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { startKeyedProject, type GqlProject } from './helpers.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;
let pk: string;

beforeAll(async () => {
  ({ server, p, sk, pk } = await startKeyedProject([
    {
      key: 'page',
      name: 'Page',
      fields: [
        { key: 'title', type: 'text', required: true },
        { key: 'slug', type: 'text', required: true },
      ],
    },
  ]));
});
afterAll(() => server.stop());

async function ok(key: string, q: string, v?: Record<string, unknown>) {
  const r = await p.gql(key, q, v);
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
}

describe('locales', () => {
  test('the locale argument selects that locale; a locale without content falls back to the default locale', async () => {
    const c = await ok(
      sk,
      `mutation { createPage(naturalKey: "home", data: { title: "Home", slug: "home" }) { _id } }`,
    );
    const id = c.createPage._id;
    await ok(sk, `mutation($id: ID!) { updatePage(_id: $id, locale: "de", data: { title: "Startseite" }) { _id } }`, {
      id,
    });
    await ok(sk, `mutation($id: ID!) { publishPageVersion(_id: $id) { _id } }`, { id });
    const read = (locale: string) =>
      ok(pk, `query($l: String) { page(naturalKey: "home", locale: $l) { title slug } }`, { l: locale });
    expect((await read('en')).page).toEqual({ title: 'Home', slug: 'home' });
    // A translation changes only what it translates; the rest comes from the default locale.
    expect((await read('de')).page).toEqual({ title: 'Startseite', slug: 'home' });
    expect((await read('fr')).page).toEqual({ title: 'Home', slug: 'home' });
    const list = await ok(pk, `{ pages(first: 5, locale: "de") { edges { node { title } } } }`);
    expect(list.pages.edges.map((e: any) => e.node.title)).toEqual(['Startseite']);
  });
});
