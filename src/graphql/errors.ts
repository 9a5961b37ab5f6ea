import { GraphQLError } from 'graphql';
import { describeInternal, InternalError, ScopeDenied, SvcError, type SvcErrorCode } from '../errors.ts';

/**
 * The GraphQL error boundary (spec "Errors", CONTRACT §5): every error leaves as
 * `{ message, extensions: { code } }`, except scope denials (message only, callers branch on
 * it). Anything unexpected is logged here and masked as INTERNAL_SERVER_ERROR, so no stack,
 * SQL or driver message reaches a client.
 */
export interface WireError {
  message: string;
  path?: readonly (string | number)[];
  locations?: readonly { line: number; column: number }[];
  extensions?: { code: string; [k: string]: unknown };
}

/** Strips "Did you mean …?" hints in production (CONTRACT §2: no field suggestions). */
function hideSuggestions(message: string, production: boolean): string {
  return production ? message.replace(/ Did you mean .+\?$/, '') : message;
}

export function maskError(err: GraphQLError | Error, production: boolean): WireError {
  const gql = err instanceof GraphQLError ? err : undefined;
  const original: Error | undefined = gql ? (gql.originalError ?? undefined) : err;
  const where = gql ? { ...(gql.path ? { path: gql.path } : {}) } : {};
  if (original instanceof ScopeDenied) return { message: original.message, ...where };
  if (original instanceof InternalError) {
    // Converted by toSvcError on the way here: log the fault it stands for, once, here.
    console.error('graphql internal error:', describeInternal(original));
    return { message: 'Internal server error', ...where, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
  }
  if (original instanceof SvcError) {
    const field = original.details?.field;
    return {
      message: original.message,
      ...where,
      extensions: { code: original.code, ...(typeof field === 'string' ? { field } : {}) },
    };
  }
  if (original && !(original instanceof GraphQLError)) {
    // Value coercion inside scalars (for example a bad DateTime) is the client's input.
    if (original instanceof TypeError && gql && /cannot represent|must be/.test(original.message) && !gql.path) {
      return { message: gql.message, extensions: { code: 'BAD_USER_INPUT' } };
    }
    console.error('graphql internal error:', original.stack ?? original.message);
    return { message: 'Internal server error', ...where, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
  }
  const code = (gql?.extensions?.code as string | undefined) ?? classify(err.message);
  const out: WireError = { message: hideSuggestions(err.message, production), extensions: { code } };
  if (gql?.locations) out.locations = gql.locations;
  if (gql?.path) out.path = gql.path;
  return out;
}

/** The masked errors of a result, for a transport to send. */
export function maskErrors(errors: readonly GraphQLError[], production: boolean): WireError[] {
  return errors.map((e) => maskError(e, production));
}

/** Codes for errors graphql-js/graphql-jit raise without one. */
function classify(message: string): SvcErrorCode {
  if (/^Variable "\$[^"]+" (got invalid value|of required type|of non-null type)/.test(message))
    return 'BAD_USER_INPUT';
  if (
    /^(Expected value of type|Enum "[^"]+" cannot represent|Int cannot|Float cannot|String cannot|Boolean cannot|ID cannot|Field "[^"]+" of required type)/.test(
      message,
    )
  )
    return 'BAD_USER_INPUT';
  if (/^Syntax Error/.test(message)) return 'GRAPHQL_PARSE_FAILED';
  return 'GRAPHQL_VALIDATION_FAILED';
}
