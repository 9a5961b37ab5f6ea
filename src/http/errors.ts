import { Elysia } from 'elysia';
import { errorBody, SvcError, toSvcError, BadUserInput, InternalError, describeInternal } from '../errors.ts';

/**
 * REST error boundary (CONTRACT §5): every failure leaves as `{ error, message }` with a
 * fitting status. Unknown errors are logged by message and answered as a masked 500.
 */
export function restError(err: unknown): Response {
  const e = toSvcError(err);
  if (e instanceof InternalError) console.error('internal error:', describeInternal(e));
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (e.details && typeof e.details.retryAfter === 'number') headers['retry-after'] = String(e.details.retryAfter);
  if (e.headers) Object.assign(headers, e.headers);
  return new Response(JSON.stringify(errorBody(e)), { status: e.status, headers });
}

export const errorBoundary = new Elysia({ name: 'svc.errors' }).onError({ as: 'global' }, ({ code, error }) => {
  // Our own errors first: Elysia reports an error's own `code` as its code, so a NotFound
  // ("API key not found") would otherwise be taken for an unknown route.
  if (error instanceof SvcError) return restError(error);
  // A body over its limit fails while Elysia reads it (src/http/body.ts): the cause says so.
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  if (code === 'PARSE')
    return restError(cause instanceof SvcError ? cause : new BadUserInput('The request body is not valid JSON'));
  if (code === 'NOT_FOUND')
    return new Response(JSON.stringify({ error: 'NOT_FOUND', message: 'No such endpoint' }), {
      status: 404,
      headers: { 'content-type': 'application/json' },
    });
  if (code === 'VALIDATION') return restError(new BadUserInput('The request is not valid'));
  return restError(error);
});
