import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeWebStream } from 'node:stream/web';
import type { KeyPrincipal } from '../auth/principal.ts';
import { BadUserInput, Conflict, NotFound, PayloadTooLarge, PermissionDenied } from '../errors.ts';
import { hashSecret, newId, newSecret } from '../ids.ts';
import type { Sql } from '../store/db.ts';
import { projectLimits, room, tooLarge, type LimitDefaults } from './limits.ts';
import { SNIFF_BYTES, typeAllowed } from './sniff.ts';
import type { FileStorage } from './storage.ts';
import { projectFile, type FileRow } from './store.ts';
import { finishUpload, folderOf, safeFilename } from './upload.ts';

/**
 * Two-step uploads: `createFileUpload(filename, contentType, size)` answers a signed,
 * single-use, size-bound URL that expires; the client PUTs the bytes there (to svc with local
 * storage, straight to the bucket with S3), then `confirmFileUpload(fileId)` hashes and sniffs
 * what arrived and turns it into the file. The URL's token is stored hashed.
 */
export interface SignedDeps {
  sql: Sql;
  storage: FileStorage;
  limits: LimitDefaults;
  maxInputPixels: number;
  ttlSec: number;
}

export interface UploadTicket {
  fileId: string;
  uploadUrl: string;
  method: 'PUT';
  headers: Record<string, string>;
  expiresAt: string;
}

interface UploadRow {
  id: string;
  project_id: string;
  filename: string;
  declared_type: string;
  declared_size: string;
  alt: string | null;
  folder: string | null;
  customer_id: string | null;
  key_id: string | null;
  token_hash: string;
  expires_at: Date;
  uploaded_at: Date | null;
  confirmed_at: Date | null;
}

export const UPLOADS_PATH = '/api/files/uploads/';

const TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/;

export async function createUpload(
  deps: SignedDeps,
  key: KeyPrincipal,
  customerId: string | null,
  args: { filename: string; contentType: string; size: number; alt?: string | null; folder?: string | null },
  baseUrl: string,
): Promise<UploadTicket> {
  const contentType = args.contentType.trim().toLowerCase();
  if (!TYPE.test(contentType))
    throw new BadUserInput('contentType must be a MIME type such as image/png', { field: 'contentType' });
  if (!Number.isSafeInteger(args.size) || args.size < 1)
    throw new BadUserInput('size must be a positive whole number of bytes', { field: 'size' });
  if (!typeAllowed(key.allowedFileTypes, contentType))
    throw new PermissionDenied(`This key may not upload ${contentType} files`, { contentType });
  const limits = await projectLimits(deps.sql, key.projectId, deps.limits);
  if (args.size > room(limits)) throw tooLarge(limits, args.size);
  const id = newId('file');
  const token = newSecret('ut_');
  const expires = new Date(Date.now() + deps.ttlSec * 1000);
  await deps.sql`
    insert into file_uploads (id, project_id, filename, declared_type, declared_size, alt, folder, customer_id, key_id, token_hash, expires_at)
    values (${id}, ${key.projectId}, ${safeFilename(args.filename)}, ${contentType}, ${args.size}, ${args.alt?.trim().slice(0, 1000) || null},
            ${folderOf(args.folder ?? undefined)}, ${customerId}, ${key.keyId}, ${hashSecret(token)}, ${expires})`;
  const direct = deps.storage.presignStaged(id, contentType, deps.ttlSec);
  return {
    fileId: id,
    uploadUrl: direct ?? `${baseUrl}${UPLOADS_PATH}${id}?token=${token}`,
    method: 'PUT',
    headers: { 'content-type': contentType },
    expiresAt: expires.toISOString(),
  };
}

/**
 * `PUT {uploadUrl}` (local storage): the token is the credential, good once, until it expires.
 * The body is streamed to the staging object and may not exceed the declared size; a failed
 * PUT gives the URL back so the client can try again.
 */
export async function receiveUpload(
  deps: SignedDeps,
  id: string,
  token: string | null,
  request: Request,
): Promise<{ fileId: string; size: number }> {
  if (!/^file_[0-9a-f]{24}$/.test(id) || !token) throw new PermissionDenied('The upload URL is not valid');
  const [row] = await deps.sql<
    UploadRow[]
  >`select * from file_uploads where id = ${id} and token_hash = ${hashSecret(token)}`;
  if (!row) throw new PermissionDenied('The upload URL is not valid');
  if (row.uploaded_at || row.confirmed_at) throw new Conflict('The upload URL was used already');
  if (row.expires_at.getTime() <= Date.now()) throw new PermissionDenied('The upload URL has expired');
  const declared = Number(row.declared_size);
  const length = request.headers.get('content-length');
  if (length !== null && Number(length) > declared)
    throw new PayloadTooLarge(`The body is larger than the ${declared} bytes declared`, { limit: declared });
  // Claim the URL: one PUT at a time, and never one after a successful one.
  const [claimed] =
    await deps.sql`update file_uploads set uploaded_at = now() where id = ${id} and uploaded_at is null and expires_at > now() returning id`;
  if (!claimed) throw new Conflict('The upload URL was used already');
  const temp = await deps.storage.beginStaged(id);
  let size = 0;
  try {
    if (!request.body) throw new BadUserInput('The body is empty');
    for await (const chunk of Readable.fromWeb(
      request.body as unknown as NodeWebStream<Uint8Array>,
    ) as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > declared)
        throw new PayloadTooLarge(`The body is larger than the ${declared} bytes declared`, { limit: declared });
      await temp.write(chunk);
    }
    if (size !== declared) throw new BadUserInput(`The body has ${size} bytes; ${declared} were declared`);
    await temp.commit('');
    return { fileId: id, size };
  } catch (err) {
    await temp.discard();
    await deps.sql`update file_uploads set uploaded_at = null where id = ${id}`;
    throw err;
  }
}

/**
 * `confirmFileUpload(fileId)`: the staged bytes become the file (hashed, sniffed, checked
 * against the key's types, the pixel cap, the declared size and the project's quota). Another
 * project's or another customer's upload is NOT_FOUND. Confirming again answers the same file.
 * A refusal removes the staged bytes and the upload: nothing is left.
 */
export async function confirmUpload(
  deps: SignedDeps,
  key: KeyPrincipal,
  customerId: string | null,
  id: string,
): Promise<FileRow> {
  const [row] = await deps.sql<
    UploadRow[]
  >`select * from file_uploads where id = ${id} and project_id = ${key.projectId}`;
  if (!row || (customerId !== null && row.customer_id !== customerId)) throw new NotFound(`No upload ${id}`);
  if (row.confirmed_at) {
    const file = await projectFile(deps.sql, key.projectId, id);
    if (file) return file;
    throw new NotFound(`No upload ${id}`);
  }
  const staged = await deps.storage.openStaged(id);
  if (!staged) {
    if (row.expires_at.getTime() <= Date.now()) throw new BadUserInput('The upload expired before its bytes arrived');
    throw new BadUserInput('Nothing was uploaded to the upload URL yet');
  }
  const refuse = async (err: unknown): Promise<never> => {
    await deps.storage.removeStaged(id);
    await deps.sql`delete from file_uploads where id = ${id}`;
    throw err;
  };
  const declared = Number(row.declared_size);
  if (staged.size !== declared)
    return refuse(new BadUserInput(`${staged.size} bytes arrived; ${declared} were declared`));
  const limits = await projectLimits(deps.sql, key.projectId, deps.limits);
  if (staged.size > room(limits)) return refuse(tooLarge(limits, staged.size));
  const hash = createHash('sha256');
  const head: Uint8Array[] = [];
  let headBytes = 0;
  for await (const chunk of staged.file.stream() as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    if (headBytes < SNIFF_BYTES) {
      head.push(chunk.subarray(0, SNIFF_BYTES - headBytes));
      headBytes += Math.min(chunk.byteLength, SNIFF_BYTES - headBytes);
    }
  }
  const sha256 = hash.digest('hex');
  try {
    const file = await finishUpload(deps, key, {
      id,
      head: Buffer.concat(head),
      sha256,
      size: staged.size,
      filename: row.filename,
      alt: row.alt,
      folder: row.folder,
      customerId: row.customer_id,
      commit: () => deps.storage.commitStaged(id, sha256),
    });
    await deps.sql`update file_uploads set confirmed_at = now() where id = ${id}`;
    return file;
  } catch (err) {
    return refuse(err);
  }
}

/** Uploads never confirmed, an hour past their expiry: their staged bytes and rows go. */
export async function sweepUploads(sql: Sql, storage: FileStorage): Promise<number> {
  const rows = await sql<{ id: string }[]>`
    delete from file_uploads where id in (
      select id from file_uploads where confirmed_at is null and expires_at < now() - interval '1 hour' limit 500 for update skip locked)
    returning id`;
  for (const r of rows) await storage.removeStaged(r.id);
  // Confirmed uploads keep their row a day (confirming again answers the file), then go.
  await sql`delete from file_uploads where confirmed_at < now() - interval '1 day'`;
  return rows.length;
}
