import { Elysia } from 'elysia';
import { errorBody, SvcError, toSvcError, BadUserInput } from '../errors.ts';

/**
 * REST error boundary (CONTRACT §5): every failure leaves as `{ error, message }` with a
 * fitting status. Unknown errors are logged by message and answered as a masked 500.
 */
export function restError(err: unknown): Response {
  const e = toSvcError(err);
  if (!(err instanceof SvcError)) console.error('internal error:', err instanceof Error ? err.stack ?? err.message : err);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (e.details && typeof e.details.retryAfter === 'number') headers['retry-after'] = String(e.details.retryAfter);
  return new Response(JSON.stringify(errorBody(e)), { status: e.status, headers });
}

export const errorBoundary = new Elysia({ name: 'svc.errors' }).onError({ as: 'global' }, ({ code, error }) => {
  if (code === 'PARSE') return restError(new BadUserInput('The request body is not valid JSON'));
  if (code === 'NOT_FOUND') return new Response(JSON.stringify({ error: 'NOT_FOUND', message: 'No such endpoint' }), { status: 404, headers: { 'content-type': 'application/json' } });
  if (code === 'VALIDATION') return restError(new BadUserInput('The request is not valid'));
  return restError(error);
});
