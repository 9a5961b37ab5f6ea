import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { readDesignTokens, renderDesignTokensCss } from '../config/design-tokens.ts';
import { CACHE_MAX_AGE } from '../graphql/response-cache.ts';

/**
 * GET /v1/design-tokens.css (docs/design-tokens.md): the project's design tokens as CSS custom
 * properties, references resolved. Any API key of the project (`x-api-key`, or `?apiKey=` for a
 * `<link>` tag, which cannot send headers; `projectId` for tenant keys); cached like a published
 * read, with an ETag for conditional requests.
 */
export function designTokenRoutes(svc: Service) {
  return new Elysia({ name: 'svc.design-tokens' }).get('/v1/design-tokens.css', async ({ request }) => {
    const url = new URL(request.url);
    const admission = await svc.gate.admit({ headers: request.headers, params: url.searchParams, request });
    const rendered = renderDesignTokensCss(await readDesignTokens(svc.sql, admission.key.projectId));
    const headers: Record<string, string> = {
      ...admission.headers,
      'content-type': 'text/css; charset=utf-8',
      'cache-control': `public, max-age=${CACHE_MAX_AGE}`,
      vary: 'x-api-key, X-Project-Id',
      etag: rendered.etag,
    };
    if (rendered.skipped.length) headers['x-svc-skipped-tokens'] = String(rendered.skipped.length);
    if (request.headers.get('if-none-match') === rendered.etag) return new Response(null, { status: 304, headers });
    return new Response(rendered.css, { status: 200, headers });
  });
}
