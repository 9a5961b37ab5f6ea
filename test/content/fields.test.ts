import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { TestServer } from '../support/server.ts';
import { startSecretProject, type GqlProject } from '../graphql/helpers.ts';

let server: TestServer;
let p: GqlProject;
let sk: string;

beforeAll(async () => {
  ({ server, p, sk } = await startSecretProject([
    { key: 'category', name: 'Category', fields: [{ key: 'label', type: 'text' }] },
    {
      key: 'seo',
      name: 'SEO',
      fields: [
        { key: 'metaTitle', type: 'text' },
        { key: 'noindex', type: 'boolean' },
      ],
    },
    {
      key: 'article',
      name: 'Article',
      fields: [
        { key: 'title', type: 'text' },
        { key: 'summary', type: 'text', config: { widget: 'textarea' } },
        { key: 'body', type: 'richtext' },
        { key: 'blocks', type: 'flexible' },
        { key: 'price', type: 'number' },
        { key: 'live', type: 'boolean' },
        { key: 'when', type: 'date' },
        {
          key: 'status',
          type: 'enum',
          config: {
            options: [
              { value: 'draft', label: 'Draft' },
              { value: 'in-review', label: 'In review' },
            ],
            default: 'draft',
          },
        },
        {
          key: 'colors',
          type: 'enum',
          config: {
            multiple: true,
            options: [
              { value: 'red', label: 'Red' },
              { value: 'blue', label: 'Blue' },
            ],
          },
        },
        { key: 'category', type: 'select', config: { optionModelKey: 'category' } },
        { key: 'categories', type: 'select', config: { optionModelKey: 'category', multiple: true } },
        { key: 'related', type: 'reference', config: { modelKey: 'article' } },
        { key: 'seo', type: 'model', config: { modelKey: 'seo' } },
        { key: 'hero', type: 'image' },
        { key: 'clip', type: 'video' },
        { key: 'attachment', type: 'file' },
        { key: 'tags', type: 'list', itemType: 'text' },
        { key: 'scores', type: 'list', itemType: 'number' },
        { key: 'extra', type: 'json' },
      ],
    },
  ]));
});
afterAll(() => server.stop());

const SELECT = `_id title summary body blocks { type data } price live when status colors
  category { _id label } categories { label } related { _id title } seo { metaTitle noindex }
  hero { url alt width focalPoint { x y } } clip { url poster hlsUrl duration } attachment { name size mimeType }
  tags scores extra content`;

describe('every field type round-trips', () => {
  test('create then read returns what was written, typed', async () => {
    const cat = await p.gql(sk, `mutation { createCategory(data: { label: "News" }) { _id } }`);
    const catId = cat.body.data.createCategory._id;
    const other = await p.gql(sk, `mutation { createArticle(data: { title: "Other" }) { _id } }`);
    const otherId = other.body.data.createArticle._id;
    const data = {
      title: 'T',
      summary: 'line1\nline2',
      body: { type: 'doc', content: [{ type: 'paragraph', text: 'hi' }] },
      blocks: [{ type: 'quote', data: { text: 'q' } }],
      price: 9.5,
      live: true,
      when: '2024-05-01T10:00:00.000Z',
      colors: ['red', 'blue'],
      category: catId,
      categories: [catId],
      related: otherId,
      seo: { metaTitle: 'M', noindex: false },
      hero: { url: 'https://x/img.png', alt: 'A', width: 10, focalPoint: { x: 0.5, y: 0.25 } },
      clip: { url: 'https://x/v.mp4', poster: 'https://x/p.png', hlsUrl: 'https://x/v.m3u8', duration: 12 },
      attachment: { name: 'a.pdf', size: 100, mimeType: 'application/pdf' },
      tags: ['a', 'b'],
      scores: [1, 2.5],
      extra: { any: ['thing', 1, null] },
    };
    const c = await p.gql(sk, `mutation($d: ArticleInput!) { createArticle(data: $d) { ${SELECT} } }`, { d: data });
    expect(c.body.errors).toBeUndefined();
    const a = c.body.data.createArticle;
    expect(a).toMatchObject({
      title: 'T',
      summary: 'line1\nline2',
      body: data.body,
      blocks: data.blocks,
      price: 9.5,
      live: true,
      when: data.when,
      status: 'draft',
      colors: ['red', 'blue'],
      category: { _id: catId, label: 'News' },
      categories: [{ label: 'News' }],
      related: { _id: otherId, title: 'Other' },
      seo: data.seo,
      hero: data.hero,
      clip: data.clip,
      attachment: data.attachment,
      tags: ['a', 'b'],
      scores: [1, 2.5],
      extra: data.extra,
    });
    expect(a.content.colors).toEqual(['red', 'blue']);
    const r = await p.gql(sk, `query($id: ID!) { article(_id: $id, preview: true) { ${SELECT} } }`, { id: a._id });
    expect(r.body.data.article).toEqual(a);
  });

  test('enum values that are not GraphQL names are mapped, the option value is stored', async () => {
    const c = await p.gql(sk, `mutation { createArticle(data: { status: IN_REVIEW }) { status content } }`);
    expect(c.body.data.createArticle).toEqual({ status: 'IN_REVIEW', content: { status: 'in-review' } });
  });

  test('bad values are BAD_USER_INPUT naming the field', async () => {
    for (const [d, field] of [
      [{ price: 'x' }, 'price'],
      [{ when: 'yesterday' }, 'when'],
      [{ hero: { url: 3 } }, 'hero'],
      [{ colors: ['GREEN'] }, 'colors'],
    ] as const) {
      const r = await p.gql(sk, `mutation($d: ArticleInput!) { createArticle(data: $d) { _id } }`, { d });
      expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect(r.body.errors[0].message).toContain(field);
    }
  });

  test('batch data (JSON) is validated the same way', async () => {
    const r = await p.gql(
      sk,
      `mutation { batchRecordOperations(operations: [{ action: CREATE, modelKey: "article", data: { price: "nope" } }]) { _id } }`,
    );
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toContain('"price"');
  });
});
