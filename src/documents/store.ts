import { createHash } from 'node:crypto';
import type { Sql } from '../store/db.ts';

/**
 * Trusted documents and the automatic-persisted-query (APQ) store of a project, in the
 * `documents` table (sql/050_documents.sql). Content-addressed: a document's id is the SHA-256 of
 * its text, so a stored document never changes, only appears or goes. Everything here is bounded:
 * a document's size, the trusted set's count and bytes, and the APQ store's bytes per project.
 * What GraphQL does with them (validation, compiling ahead, request resolution) is in
 * src/graphql/trusted.ts.
 */
export const DOCUMENT_LIMITS = {
  /** UTF-8 bytes of one document (the request body limit is 1 MB; documents are far smaller). */
  maxDocumentBytes: 100_000,
  /** Trusted documents of one project. */
  maxTrusted: 2_000,
  /** UTF-8 bytes of one project's trusted documents together (snapshots hold them in memory). */
  maxTrustedBytes: 8 * 1024 * 1024,
  /** Default bound of one project's APQ store (project setting `apqMaxBytes`). */
  apqDefaultBytes: 1024 * 1024,
  /** Largest `apqMaxBytes` a project may set. */
  apqMaxBytes: 16 * 1024 * 1024,
} as const;

export const HASH_RE = /^[0-9a-f]{64}$/;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * Whether PostgreSQL can keep the text as given: no NUL (text columns refuse it) and no unpaired
 * surrogate (it would be stored as U+FFFD, no longer the text its hash names).
 */
export function storable(text: string): boolean {
  // isWellFormed is ES2024 (Bun has it; the project's lib is ES2023).
  return !text.includes('\u0000') && (text as unknown as { isWellFormed(): boolean }).isWellFormed();
}

export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

export interface TrustedDocument {
  hash: string;
  body: string;
  valid: boolean;
  problem: string | null;
}

export interface ListedDocument {
  hash: string;
  bytes: number;
  valid: boolean;
  problem: string | null;
  createdAt: string;
}

/** One problem of a manifest entry, in the shape push errors have. */
export interface DocumentProblem {
  path: string;
  message: string;
}

/** The path of a manifest entry in push errors: `documents["<key>"]`, the key cut to 80 characters. */
export function entryPath(key: string): string {
  return `documents[${JSON.stringify(key.slice(0, 80))}]`;
}

/**
 * The entries of a manifest `{ "<sha256 hex>": "<document>" }` (graphql-codegen's client preset,
 * Relay's persisted output) that are well-formed, and a problem for each one that is not: a key
 * that is no SHA-256, a value that is no string, too large, or whose hash is not its key.
 */
export function checkManifest(input: unknown): {
  entries: { hash: string; body: string }[];
  problems: DocumentProblem[];
} {
  const problems: DocumentProblem[] = [];
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return {
      entries: [],
      problems: [{ path: 'documents', message: 'documents must be a JSON object { "<sha256 hex>": "<document>" }' }],
    };
  }
  const keys = Object.keys(input);
  if (keys.length > DOCUMENT_LIMITS.maxTrusted) {
    return {
      entries: [],
      problems: [
        { path: 'documents', message: `a project holds at most ${DOCUMENT_LIMITS.maxTrusted} trusted documents` },
      ],
    };
  }
  const entries: { hash: string; body: string }[] = [];
  for (const key of keys) {
    const value = (input as Record<string, unknown>)[key];
    const hash = key.startsWith('sha256:') ? key.slice(7) : key;
    if (!HASH_RE.test(hash))
      problems.push({
        path: entryPath(key),
        message: 'the key must be the SHA-256 of the document in lowercase hex (64 characters)',
      });
    else if (typeof value !== 'string' || value.length === 0)
      problems.push({ path: entryPath(key), message: 'the value must be the document text' });
    else if (!storable(value))
      problems.push({ path: entryPath(key), message: 'the document holds a NUL character or an unpaired surrogate' });
    else if (utf8Bytes(value) > DOCUMENT_LIMITS.maxDocumentBytes)
      problems.push({
        path: entryPath(key),
        message: `the document exceeds ${DOCUMENT_LIMITS.maxDocumentBytes} bytes`,
      });
    else if (sha256Hex(value) !== hash)
      problems.push({ path: entryPath(key), message: `hash mismatch: the document's SHA-256 is ${sha256Hex(value)}` });
    else entries.push({ hash, body: value });
  }
  return { entries, problems };
}

/** The trusted set of a project (the project snapshot holds it: src/projects/actor.ts). */
export async function loadTrusted(sql: Sql, projectId: string): Promise<TrustedDocument[]> {
  return sql<TrustedDocument[]>`
    select hash, body, valid, problem from documents where project_id = ${projectId} and kind = 'trusted' order by hash
    limit ${DOCUMENT_LIMITS.maxTrusted}`;
}

/** Projects that hold trusted documents, those that pushed last first (start-up compile and warm-up). */
export async function projectsWithTrusted(sql: Sql, limit: number): Promise<string[]> {
  const rows = await sql<{ project_id: string }[]>`
    select project_id from documents where kind = 'trusted' group by project_id order by max(created_at) desc limit ${limit}`;
  return rows.map((r) => r.project_id);
}

export async function listTrusted(sql: Sql, projectId: string): Promise<ListedDocument[]> {
  const rows = await sql<{ hash: string; bytes: number; valid: boolean; problem: string | null; created_at: Date }[]>`
    select hash, bytes, valid, problem, created_at from documents where project_id = ${projectId} and kind = 'trusted' order by created_at, hash`;
  return rows.map((r) => ({
    hash: r.hash,
    bytes: r.bytes,
    valid: r.valid,
    problem: r.problem,
    createdAt: r.created_at.toISOString(),
  }));
}

/**
 * Stores trusted documents (already checked and validated), keeping the set within its count and
 * byte bounds: entries that would pass them are returned as problems and not stored. `replace`
 * drops every other trusted document of the project first.
 */
export async function saveTrusted(
  sql: Sql,
  projectId: string,
  docs: readonly TrustedDocument[],
  replace = false,
): Promise<{ stored: number; problems: DocumentProblem[] }> {
  const problems: DocumentProblem[] = [];
  const stored = await sql.begin(async (txRaw) => {
    const tx = txRaw as unknown as Sql;
    // Serialises pushes to one project (the bounds are checked against what is there).
    await tx`select id from projects where id = ${projectId} for update`;
    if (replace)
      await tx`delete from documents where project_id = ${projectId} and kind = 'trusted' and not (hash = any(${docs.map((d) => d.hash)}))`;
    const [usage] = await tx<{ n: number; bytes: number }[]>`
      select count(*)::int as n, coalesce(sum(bytes), 0)::int as bytes from documents where project_id = ${projectId} and kind = 'trusted'`;
    const present = new Set(
      (
        await tx<
          { hash: string }[]
        >`select hash from documents where project_id = ${projectId} and kind = 'trusted' and hash = any(${docs.map((d) => d.hash)})`
      ).map((r) => r.hash),
    );
    let n = usage!.n;
    let bytes = usage!.bytes;
    let count = 0;
    for (const d of docs) {
      const size = utf8Bytes(d.body);
      if (!present.has(d.hash)) {
        if (n + 1 > DOCUMENT_LIMITS.maxTrusted || bytes + size > DOCUMENT_LIMITS.maxTrustedBytes) {
          problems.push({
            path: entryPath(d.hash),
            message: `the project's trusted documents would exceed ${DOCUMENT_LIMITS.maxTrusted} documents or ${DOCUMENT_LIMITS.maxTrustedBytes} bytes`,
          });
          continue;
        }
        n++;
        bytes += size;
      }
      await tx`insert into documents (project_id, kind, hash, body, bytes, valid, problem)
               values (${projectId}, 'trusted', ${d.hash}, ${d.body}, ${size}, ${d.valid}, ${d.problem})
               on conflict (project_id, kind, hash) do update set valid = excluded.valid, problem = excluded.problem`;
      count++;
    }
    return count;
  });
  return { stored, problems };
}

/** Records the outcome of validating stored documents against a new schema. */
export async function setValidity(
  sql: Sql,
  projectId: string,
  results: readonly { hash: string; valid: boolean; problem: string | null }[],
): Promise<void> {
  for (const r of results) {
    await sql`update documents set valid = ${r.valid}, problem = ${r.problem} where project_id = ${projectId} and kind = 'trusted' and hash = ${r.hash}`;
  }
}

export async function removeTrusted(sql: Sql, projectId: string, hash: string): Promise<boolean> {
  const rows =
    await sql`delete from documents where project_id = ${projectId} and kind = 'trusted' and hash = ${hash} returning hash`;
  return rows.length > 0;
}

/** The text an APQ client registered under `hash`, or null. */
export async function apqGet(sql: Sql, projectId: string, hash: string): Promise<string | null> {
  const [row] = await sql<
    { body: string }[]
  >`select body from documents where project_id = ${projectId} and kind = 'apq' and hash = ${hash}`;
  return row?.body ?? null;
}

/**
 * Registers an APQ document, then evicts the project's oldest registrations until the store is
 * within `maxBytes` again (the new one included: a document larger than the bound is not kept).
 * One statement each; concurrent registrations may overshoot by what they add until the next one.
 */
export async function apqPut(sql: Sql, projectId: string, hash: string, body: string, maxBytes: number): Promise<void> {
  const size = utf8Bytes(body);
  if (size > maxBytes || !storable(body)) return;
  await sql`insert into documents (project_id, kind, hash, body, bytes) values (${projectId}, 'apq', ${hash}, ${body}, ${size})
            on conflict (project_id, kind, hash) do update set used_at = now()`;
  await sql`delete from documents d using (
              select hash from (
                select hash, sum(bytes) over (order by used_at desc, hash) as running
                from documents where project_id = ${projectId} and kind = 'apq') r
              where r.running > ${maxBytes}) old
            where d.project_id = ${projectId} and d.kind = 'apq' and d.hash = old.hash`;
}

/** Bytes the APQ store of a project holds (tests, diagnostics). */
export async function apqBytes(sql: Sql, projectId: string): Promise<number> {
  const [row] = await sql<
    { bytes: number }[]
  >`select coalesce(sum(bytes), 0)::int as bytes from documents where project_id = ${projectId} and kind = 'apq'`;
  return row!.bytes;
}
