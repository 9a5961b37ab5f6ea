import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { opsProject, type OpsProject } from '../operations/support.ts';
import { renderDesignTokensCss } from '../../src/config/design-tokens.ts';

/** Design tokens (issue 19): `designTokens: JSON` as pushed, GET /v1/design-tokens.css resolved. */
let server: TestServer;
let p: OpsProject;

const DOC = {
  color: {
    $type: 'color',
    brand: { primary: { $value: '#0055ff' }, accent: { $value: '{color.brand.primary}' } },
    text: { $value: { colorSpace: 'srgb', components: [0.1, 0.2, 0.3], alpha: 0.5 } },
  },
  font: {
    size: {
      $type: 'dimension',
      display1: { $value: { value: 3, unit: 'rem' } },
      body: { $value: '16px' },
      hero: { $value: '{font.size.display1}' },
    },
    family: { sans: { $type: 'fontFamily', $value: ['Inter', 'Helvetica Neue', 'sans-serif'] } },
  },
  space: { $type: 'dimension', md: { $value: '16px' }, lg: { $value: 'calc({space.md} * 2)', $type: 'string' } },
  motion: { ease: { $type: 'cubicBezier', $value: [0.4, 0, 0.2, 1] } },
  heading: {
    $type: 'typography',
    $value: { fontFamily: '{font.family.sans}', fontSize: '{font.size.display1}', fontWeight: 700, lineHeight: 1.2 },
  },
};

beforeAll(async () => {
  server = await startTestServer();
  p = await opsProject(server, 'tokens');
}, 30_000);

afterAll(async () => {
  await server.stop();
});

async function css(key: string, headers: Record<string, string> = {}, query = ''): Promise<Response> {
  return fetch(`${server.apiUrl}/v1/design-tokens.css${query}`, { headers: { 'x-api-key': key, ...headers } });
}

describe('design tokens', () => {
  test('designTokens returns the document as pushed, references preserved; the CSS resolves them', async () => {
    const pub = await p.key(['records:read'], 'pk');
    const empty = await css(pub);
    expect(empty.status).toBe(200);
    expect(await empty.text()).toContain(':root {\n}');
    expect((await p.gql(pub, '{ designTokens }')).data.designTokens).toBeNull();

    await p.push({ designTokens: DOC });
    const r = await fetch(`${server.apiUrl}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': pub },
      body: JSON.stringify({ query: '{ designTokens }' }),
    });
    expect(r.headers.get('cache-control')).toStartWith('public, max-age=');
    const body = (await r.json()) as any;
    expect(body.data.designTokens).toEqual(DOC);
    expect(body.data.designTokens.font.size.hero.$value).toBe('{font.size.display1}');

    const res = await css(pub);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect(res.headers.get('cache-control')).toStartWith('public, max-age=');
    expect(res.headers.get('vary')).toBe('x-api-key, X-Project-Id');
    expect(res.headers.get('x-ratelimit-limit')).toBeTruthy();
    const text = await res.text();
    for (const line of [
      '--color-brand-primary: #0055ff;',
      '--color-brand-accent: #0055ff;',
      '--color-text: color(srgb 0.1 0.2 0.3 / 0.5);',
      '--font-size-display1: 3rem;',
      '--font-size-hero: 3rem;',
      '--font-family-sans: Inter, "Helvetica Neue", sans-serif;',
      '--space-lg: calc(16px * 2);',
      '--motion-ease: cubic-bezier(0.4, 0, 0.2, 1);',
      '--heading-font-family: Inter, "Helvetica Neue", sans-serif;',
      '--heading-font-size: 3rem;',
      '--heading-font-weight: 700;',
      '--heading-line-height: 1.2;',
    ])
      expect(text).toContain(line);
    // Every reference resolved: the only brace is the rule's own.
    expect(text.match(/\{/g)?.length).toBe(1);
    // In document order (the document is kept as pushed, key order included).
    expect(text.indexOf('--color-brand-primary')).toBeLessThan(text.indexOf('--font-size-display1'));
    expect(JSON.stringify(body.data.designTokens)).toBe(JSON.stringify(DOC));

    // Conditional request: same ETag, 304 without a body. A link tag passes the key as a parameter.
    const etag = res.headers.get('etag')!;
    const again = await css(pub, { 'if-none-match': etag });
    expect(again.status).toBe(304);
    const viaParam = await fetch(`${server.apiUrl}/v1/design-tokens.css?apiKey=${pub}`);
    expect([viaParam.status, viaParam.headers.get('etag')]).toEqual([200, etag]);

    // A new push is visible at once (the cached GraphQL answer is dropped with the push).
    await p.push({ designTokens: { color: { $type: 'color', brand: { primary: { $value: '#111111' } } } } });
    expect((await p.gql(pub, '{ designTokens }')).data.designTokens.color.brand.primary.$value).toBe('#111111');
    expect(await (await css(pub)).text()).toContain('--color-brand-primary: #111111;');
  });

  test('no key, a bad key: 401; a reference cycle or a missing reference is refused at push with nothing stored', async () => {
    expect((await fetch(`${server.apiUrl}/v1/design-tokens.css`)).status).toBe(401);
    expect((await css('pk_0000')).status).toBe(401);
    const before = (await p.gql(await p.key(['records:read']), '{ designTokens }')).data.designTokens;
    const res = await fetch(`${server.apiUrl}/v1/control/projects/${p.projectId}/config`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.ownerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        config: {
          key: 'cfg',
          name: 'cfg',
          designTokens: { a: { $type: 'dimension', x: { $value: '{a.y}' }, y: { $value: '{a.x}' } } },
        },
      }),
    });
    const out = (await res.json()) as any;
    expect(out.errors[0].message).toContain('reference cycle');
    expect(out.applied).toEqual({});
    expect((await p.gql(await p.key(['records:read']), '{ designTokens }')).data.designTokens).toEqual(before);
  });

  test('values that could break out of the declaration are left out of the CSS', () => {
    const out = renderDesignTokensCss({
      evil: { $type: 'string', $value: 'red; } body { display: none' },
      ok: { $type: 'color', $value: '#fff' },
      tag: { $value: '</style><script>' },
    });
    expect(out.css).toContain('--ok: #fff;');
    expect(out.css).not.toContain('display');
    expect(out.css).not.toContain('script');
    expect(out.skipped.sort()).toEqual(['evil', 'tag']);
  });
});
