import busboy from 'busboy';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeWebStream } from 'node:stream/web';
import { BadUserInput, PayloadTooLarge, PermissionDenied } from '../errors.ts';
import type { RequestPrincipal } from '../auth/principal.ts';
import type { Sql } from '../store/db.ts';
import { SNIFF_BYTES, sniff, typeAllowed } from './sniff.ts';
import type { FileStorage, TempBlob } from './storage.ts';
import { insertFile, type FileRow } from './store.ts';
import { hashLock } from './lifecycle.ts';

/**
 * `POST /api/files/upload`: one multipart body with the field `file` (and optional `alt`,
 * `folder`) streamed to a temp blob while counting and hashing: busboy parses the parts as the
 * socket delivers them, so memory holds one chunk plus the first 64 KB (for sniffing), never the
 * file. Over the limit, the read stops at the limit. Any refusal discards the temp blob.
 */
export interface UploadDeps {
  sql: Sql;
  storage: FileStorage;
  maxBytes: number;
  /** Images with more pixels (width × height from the header) are refused: decompression bombs. */
  maxInputPixels: number;
}

const MAX_TEXT = 1000;

/** A client-given filename reduced to a safe last path segment (no `..`, slashes or controls). */
export function safeFilename(name: string | undefined): string {
  const base = (name ?? '').split(/[\\/]/).pop() ?? '';
  // eslint-disable-next-line no-control-regex
  const clean = base.replace(/[\u0000-\u001f\u007f"<>|:*?]/g, '').replace(/^\.+/, '').trim().slice(0, 200);
  return clean === '' ? 'file' : clean;
}

function folderOf(v: string | undefined): string | null {
  if (v === undefined || v.trim() === '') return null;
  const parts = v.split('/').map((p) => p.trim()).filter(Boolean);
  if (parts.some((p) => p === '.' || p === '..') || v.length > 200) throw new BadUserInput('folder must be a path of names without . or ..');
  return parts.join('/') || null;
}

/** A header naming more pixels than we decode (a small file that inflates to gigabytes). */
export function checkPixels(kind: { width: number | null; height: number | null }, maxInputPixels: number): void {
  if (kind.width !== null && kind.height !== null && kind.width * kind.height > maxInputPixels) {
    throw new BadUserInput(`The image is ${kind.width}×${kind.height} pixels; at most ${maxInputPixels} pixels are accepted`, { limit: maxInputPixels });
  }
}

export async function handleUpload(deps: UploadDeps, principal: RequestPrincipal, request: Request): Promise<FileRow> {
  const ct = request.headers.get('content-type') ?? '';
  if (!/^multipart\/form-data\s*;/i.test(ct) || !request.body) throw new BadUserInput('The body must be multipart/form-data with a field named file');
  const fields: Record<string, string> = {};
  let temp: TempBlob | null = null;
  let filename = '';
  let size = 0;
  let failure: Error | null = null;
  const hash = createHash('sha256');
  const head: Uint8Array[] = [];
  let headBytes = 0;
  let fileDone: Promise<void> = Promise.resolve();
  let bb: busboy.Busboy;
  try {
    bb = busboy({ headers: { 'content-type': ct }, limits: { files: 1, fields: 10, fieldSize: MAX_TEXT, fileSize: deps.maxBytes, parts: 20 } });
  } catch {
    throw new BadUserInput('The body must be multipart/form-data with a boundary');
  }
  const source = Readable.fromWeb(request.body as unknown as NodeWebStream<Uint8Array>);
  const fail = (e: Error) => {
    if (!failure) failure = e;
    source.unpipe(bb);
    source.destroy();
  };
  const finished = new Promise<void>((resolve) => {
    bb.on('field', (name, value) => {
      fields[name] = value;
    });
    bb.on('file', (name, stream, info) => {
      if (name !== 'file') {
        stream.resume();
        return;
      }
      filename = safeFilename(info.filename);
      stream.on('limit', () => fail(new PayloadTooLarge(`The file exceeds ${deps.maxBytes} bytes`, { limit: deps.maxBytes })));
      fileDone = (async () => {
        temp = await deps.storage.begin();
        for await (const chunk of stream as AsyncIterable<Buffer>) {
          if (failure) break;
          size += chunk.byteLength;
          hash.update(chunk);
          if (headBytes < SNIFF_BYTES) {
            head.push(chunk.subarray(0, SNIFF_BYTES - headBytes));
            headBytes += Math.min(chunk.byteLength, SNIFF_BYTES - headBytes);
          }
          await temp.write(chunk);
        }
      })().catch((e) => fail(e instanceof Error ? e : new Error(String(e))));
    });
    bb.on('close', () => resolve());
    bb.on('error', (e) => {
      fail(e instanceof PayloadTooLarge ? e : new BadUserInput('The multipart body is malformed'));
      resolve();
    });
    source.on('error', (e) => {
      // The body-limit stream (src/http/body.ts) fails the read with PayloadTooLarge.
      const cause = (e as { cause?: unknown }).cause;
      fail(e instanceof PayloadTooLarge ? e : cause instanceof PayloadTooLarge ? cause : new BadUserInput('The request body could not be read'));
      resolve();
    });
    source.on('close', () => {
      if (failure) resolve();
    });
    source.pipe(bb);
  });
  try {
    await finished;
    await fileDone;
    if (failure) throw failure;
    if (!temp) throw new BadUserInput('The multipart body has no field named file');
    if (size === 0) throw new BadUserInput('The file is empty');
    const kind = await sniff(Buffer.concat(head));
    if ('invalid' in kind) throw new BadUserInput(kind.invalid);
    checkPixels(kind, deps.maxInputPixels);
    if (!typeAllowed(principal.key.allowedFileTypes, kind.contentType)) {
      throw new PermissionDenied(`This key may not upload ${kind.contentType} files`, { contentType: kind.contentType });
    }
    const sha256 = hash.digest('hex');
    const alt = fields.alt?.trim() ? fields.alt.trim().slice(0, MAX_TEXT) : null;
    const folder = folderOf(fields.folder);
    // Under the hash's lock: a permanent delete of the same bytes cannot remove the blob between
    // this commit and the row that names it (src/files/lifecycle.ts).
    return await deps.sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${hashLock(sha256).toString()}::bigint)`;
      await (temp as TempBlob).commit(sha256);
      return insertFile(tx as unknown as Sql, {
      projectId: principal.key.projectId, sha256, filename, contentType: kind.contentType, size,
      width: kind.width, height: kind.height, alt, folder,
        customerId: principal.customer?.customerId ?? null, keyId: principal.key.keyId,
      });
    }) as FileRow;
  } finally {
    if (temp) await (temp as TempBlob).discard();
  }
}
