/**
 * One error base class with a stable `code` (CONTRACT §5), one subclass per case.
 * `status` is the HTTP status used on REST surfaces; GraphQL surfaces put `code`
 * into `extensions.code`. Messages are written for clients: never SQL, never stacks.
 */
export type SvcErrorCode =
  | 'BAD_USER_INPUT'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'RATE_LIMITED'
  | 'PAYLOAD_TOO_LARGE'
  | 'METHOD_NOT_ALLOWED'
  | 'INTERNAL_SERVER_ERROR';

export class SvcError extends Error {
  readonly code: SvcErrorCode = 'INTERNAL_SERVER_ERROR';
  readonly status: number = 500;
  /** Extra JSON-safe fields a REST body may carry (for example `limit`, `held`). */
  readonly details: Record<string, unknown> | undefined;

  constructor(message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = new.target.name;
    this.details = details;
  }
}

export class BadUserInput extends SvcError {
  override readonly code = 'BAD_USER_INPUT';
  override readonly status = 400;
}

export class Unauthenticated extends SvcError {
  override readonly code = 'UNAUTHENTICATED';
  override readonly status = 401;
}

export class PermissionDenied extends SvcError {
  override readonly code = 'PERMISSION_DENIED';
  override readonly status = 403;
}

export class NotFound extends SvcError {
  override readonly code = 'NOT_FOUND';
  override readonly status = 404;
}

export class Conflict extends SvcError {
  override readonly code = 'CONFLICT';
  override readonly status = 409;
}

export class RateLimited extends SvcError {
  override readonly code = 'RATE_LIMITED';
  override readonly status = 429;
}

export class PayloadTooLarge extends SvcError {
  override readonly code = 'PAYLOAD_TOO_LARGE';
  override readonly status = 413;
}

export class MethodNotAllowed extends SvcError {
  override readonly code = 'METHOD_NOT_ALLOWED';
  override readonly status = 405;
}

export class InternalError extends SvcError {
  override readonly code = 'INTERNAL_SERVER_ERROR';
  override readonly status = 500;
}

/** The JSON body of a REST error: `{ error, message, ...details }`. */
export function errorBody(err: SvcError): Record<string, unknown> {
  return { ...err.details, error: err.code, message: err.message };
}

/** Anything thrown that is not an SvcError becomes a masked internal error. */
export function toSvcError(err: unknown): SvcError {
  if (err instanceof SvcError) return err;
  return new InternalError('Internal server error');
}
