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
  | 'PERSISTED_QUERY_NOT_FOUND'
  | 'DOCUMENT_NOT_TRUSTED'
  | 'INTERNAL_SERVER_ERROR'
  | GraphqlErrorCode;

/** Codes only GraphQL surfaces produce (documents that do not parse, validate or fit the limits). */
export type GraphqlErrorCode =
  | 'GRAPHQL_PARSE_FAILED'
  | 'GRAPHQL_VALIDATION_FAILED'
  | 'QUERY_TOO_DEEP'
  | 'TOO_MANY_ALIASES'
  | 'QUERY_TOO_COMPLEX';

export class SvcError extends Error {
  readonly code: SvcErrorCode = 'INTERNAL_SERVER_ERROR';
  readonly status: number = 500;
  /** Extra JSON-safe fields a REST body may carry (for example `limit`, `held`). */
  readonly details: Record<string, unknown> | undefined;
  /**
   * Response headers a transport that has them sends with the error (`Retry-After` and the
   * rate-limit headers of a refusal, `Allow`). WebSocket transports ignore them.
   */
  headers: Record<string, string> | undefined;

  constructor(message: string, details?: Record<string, unknown>, headers?: Record<string, string>) {
    super(message);
    this.name = new.target.name;
    this.details = details;
    this.headers = headers;
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

/**
 * A missing scope. The spec gives it no `extensions.code` on GraphQL (callers branch on the
 * message `missing required scope: <scope>`), so the GraphQL boundary drops the code; REST
 * answers it as any PERMISSION_DENIED.
 */
export class ScopeDenied extends PermissionDenied {
  readonly scope: string;
  constructor(scope: string) {
    super(`missing required scope: ${scope}`);
    this.scope = scope;
  }
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

/** A request named a document (documentId or APQ hash) this project does not hold: resend with the text. */
export class PersistedQueryNotFound extends SvcError {
  override readonly code = 'PERSISTED_QUERY_NOT_FOUND';
  override readonly status = 400;
}

/** A key whose policy is `trusted-only` sent a document's text instead of a trusted document's id. */
export class DocumentNotTrusted extends SvcError {
  override readonly code = 'DOCUMENT_NOT_TRUSTED';
  override readonly status = 403;
}

export class GraphqlParseFailed extends SvcError {
  override readonly code = 'GRAPHQL_PARSE_FAILED';
  override readonly status = 400;
}

export class GraphqlValidationFailed extends SvcError {
  override readonly code = 'GRAPHQL_VALIDATION_FAILED';
  override readonly status = 400;
}

/** A document over one of the limits of docs/graphql.md (depth, aliases, cost). */
export class QueryLimitExceeded extends SvcError {
  override readonly status = 400;
  override readonly code: 'QUERY_TOO_DEEP' | 'TOO_MANY_ALIASES' | 'QUERY_TOO_COMPLEX';
  constructor(code: 'QUERY_TOO_DEEP' | 'TOO_MANY_ALIASES' | 'QUERY_TOO_COMPLEX', message: string) {
    super(message);
    this.code = code;
  }
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
  const e = new InternalError('Internal server error');
  e.cause = err;
  return e;
}

/** The log line of an internal error: the original fault's stack when there is one. */
export function describeInternal(err: unknown): string {
  const original = err instanceof InternalError && err.cause !== undefined ? err.cause : err;
  return original instanceof Error ? (original.stack ?? original.message) : String(original);
}
