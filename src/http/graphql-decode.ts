import { BadUserInput, PayloadTooLarge } from '../errors.ts';
import type { GraphqlRequest } from '../graphql/execute.ts';
import { LIMITS } from '../graphql/limits.ts';

/**
 * Decoding a GraphQL request over HTTP (GraphQL over HTTP; docs/graphql.md, docs/documents.md):
 * a POST body (one operation or a batch) or the URL parameters of a GET, into the core's
 * GraphqlRequest. Every malformed field is a BadUserInput with its own message; an oversized
 * body or query string a PayloadTooLarge.
 */

function parseVariables(raw: unknown): Record<string, unknown> | null {
  if (raw === undefined || raw === null || raw === '') return null;
  let v = raw;
  if (typeof raw === 'string') {
    try {
      v = JSON.parse(raw);
    } catch {
      throw new BadUserInput('"variables" must be a JSON object');
    }
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new BadUserInput('"variables" must be a JSON object');
  return v as Record<string, unknown>;
}

const DOCUMENT_ID = /^sha256:([0-9a-fA-F]{64})$/;
const SHA256_HEX = /^[0-9a-fA-F]{64}$/;

/**
 * The document a request names instead of (or beside) its text: `documentId: "sha256:<hex>"`,
 * or Apollo's `extensions.persistedQuery { version: 1, sha256Hash }` (docs/documents.md).
 */
function namedDocument(documentId: unknown, extensions: unknown): { documentId: string | null; persisted: boolean } {
  let id: string | null = null;
  if (documentId !== undefined && documentId !== null) {
    const m = typeof documentId === 'string' ? DOCUMENT_ID.exec(documentId) : null;
    if (!m)
      throw new BadUserInput(
        '"documentId" must be "sha256:" followed by the document\'s SHA-256 in hex (64 characters)',
      );
    id = m[1]!.toLowerCase();
  }
  if (extensions === undefined || extensions === null) return { documentId: id, persisted: false };
  if (typeof extensions !== 'object' || Array.isArray(extensions))
    throw new BadUserInput('"extensions" must be a JSON object');
  const pq = (extensions as Record<string, unknown>).persistedQuery;
  if (pq === undefined || pq === null) return { documentId: id, persisted: false };
  if (typeof pq !== 'object' || Array.isArray(pq))
    throw new BadUserInput('"extensions.persistedQuery" must be an object { version: 1, sha256Hash }');
  const { version, sha256Hash } = pq as Record<string, unknown>;
  if (version !== 1) throw new BadUserInput('Unsupported persisted query version: only version 1 is served');
  if (typeof sha256Hash !== 'string' || !SHA256_HEX.test(sha256Hash))
    throw new BadUserInput('"extensions.persistedQuery.sha256Hash" must be a SHA-256 in hex (64 characters)');
  const hash = sha256Hash.toLowerCase();
  if (id !== null && id !== hash)
    throw new BadUserInput('"documentId" and "extensions.persistedQuery.sha256Hash" name different documents');
  return { documentId: hash, persisted: true };
}

function toRequest(body: unknown): GraphqlRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BadUserInput('The request body must be a JSON object with "query"');
  const b = body as Record<string, unknown>;
  const named = namedDocument(b.documentId, b.extensions);
  if (b.query !== undefined && b.query !== null && typeof b.query !== 'string')
    throw new BadUserInput('"query" must be a string');
  if (typeof b.query !== 'string' && named.documentId === null)
    throw new BadUserInput('The request body needs a "query" string or a "documentId"');
  if (b.operationName !== undefined && b.operationName !== null && typeof b.operationName !== 'string')
    throw new BadUserInput('"operationName" must be a string');
  return {
    query: (b.query as string | undefined) ?? '',
    variables: parseVariables(b.variables),
    operationName: (b.operationName as string | undefined) ?? null,
    ...named,
  };
}

/**
 * What a POST says about its body, checked before a byte of it is read. GraphQL over HTTP: a
 * POST says what its body is; only JSON is read (a form or text/plain post, which a browser
 * sends cross-site without asking, is refused unread).
 */
export function checkPost(headers: Headers): void {
  const header = headers.get('content-type');
  // The usual header, exactly: no split, trim and lowercase (~0.2 µs a request).
  if (header !== 'application/json') {
    const type = header?.split(';')[0]?.trim().toLowerCase();
    if (!type) throw new BadUserInput('POST /graphql needs a Content-Type: application/json header');
    if (type !== 'application/json')
      throw new BadUserInput(`POST /graphql takes application/json, not ${type.slice(0, 100)}`);
  }
  const length = headers.get('content-length');
  if (length !== null && Number(length) > LIMITS.maxBodyBytes)
    throw new PayloadTooLarge(`The request body exceeds ${LIMITS.maxBodyBytes} bytes`);
}

const ID_PREFIX = '{"documentId":"sha256:';
const ID_BODY_LENGTH = ID_PREFIX.length + 64 + 2;

/**
 * `{"documentId":"sha256:<64 hex digits>"}` exactly, as persisted-document clients send it: the
 * request without JSON.parse, toRequest and its regular expressions (~0.6 µs of a cached read's
 * ~1 µs of decoding). Hex digits need no JSON escape, so the text is that object and nothing
 * else; any other body (spaces, more fields, escapes) returns null and is parsed in full.
 */
function trustedIdOnly(text: string): GraphqlRequest | null {
  if (
    text.length !== ID_BODY_LENGTH ||
    text.charCodeAt(ID_BODY_LENGTH - 1) !== 125 ||
    text.charCodeAt(ID_BODY_LENGTH - 2) !== 34 ||
    !text.startsWith(ID_PREFIX)
  )
    return null;
  const hex = text.slice(ID_PREFIX.length, ID_PREFIX.length + 64);
  if (!SHA256_HEX.test(hex)) return null;
  return { query: '', variables: null, operationName: null, documentId: hex.toLowerCase(), persisted: false };
}

/** One operation, or a batch: a JSON array of operations answered by an array of results. */
export function decodePost(text: string): GraphqlRequest | GraphqlRequest[] {
  if (text.length > LIMITS.maxBodyBytes)
    throw new PayloadTooLarge(`The request body exceeds ${LIMITS.maxBodyBytes} bytes`);
  const byId = trustedIdOnly(text);
  if (byId) return byId;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BadUserInput('The request body is not valid JSON');
  }
  if (!Array.isArray(body)) return toRequest(body);
  if (body.length === 0 || body.length > LIMITS.maxHttpBatch)
    throw new BadUserInput(`A batch holds 1 to ${LIMITS.maxHttpBatch} operations`);
  return body.map(toRequest);
}

export function readGet(request: Request): GraphqlRequest {
  const url = new URL(request.url);
  if (url.search.length > LIMITS.maxBodyBytes)
    throw new PayloadTooLarge(`The query string exceeds ${LIMITS.maxBodyBytes} characters`);
  const p = url.searchParams;
  let extensions: unknown = null;
  const ext = p.get('extensions');
  if (ext) {
    try {
      extensions = JSON.parse(ext);
    } catch {
      throw new BadUserInput('"extensions" must be a JSON object');
    }
  }
  const named = namedDocument(p.get('documentId'), extensions);
  const query = p.get('query') ?? '';
  if (!query && named.documentId === null)
    throw new BadUserInput('GET /graphql needs a "query" or "documentId" URL parameter');
  return { query, variables: parseVariables(p.get('variables')), operationName: p.get('operationName'), ...named };
}
