import busboy from 'busboy';
import { createHash } from 'node:crypto';
import { BadUserInput, PayloadTooLarge, PermissionDenied } from '../errors.ts';
import type { RequestPrincipal } from '../auth/principal.ts';
import type { Sql } from '../store/db.ts';
import { SNIFF_BYTES, sniff, typeAllowed } from './sniff.ts';
import { projectLimits, room, tooLarge, type LimitDefaults } from './limits.ts';
import type { FileStorage, TempBlob } from './storage.ts';
import { insertFile, type FileRow } from './store.ts';
import { hashLock, removeUnnamedBlob } from './lifecycle.ts';
import { queueMediaJob } from './media.ts';

/**
 * `POST /api/files/upload`: one multipart body with the field `file` (and optional `alt`,
 * `folder`) streamed to a temp blob while counting and hashing: busboy parses the parts as the
 * socket delivers them, so memory holds one chunk plus the first 64 KB (for sniffing), never the
 * file. Over the limit, the read stops at the limit. Any refusal discards the temp blob.
 */
export interface UploadDeps {
  sql: Sql;
  storage: FileStorage;
  /** Process defaults; a project's settings may lower the file limit and set its quota. */
  limits: LimitDefaults;
  /** Images with more pixels (width × height from the header) are refused: decompression bombs. */
  maxInputPixels: number;
}

const MAX_TEXT = 1000;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this strips from file names
const UNSAFE_IN_NAMES = /[\u0000-\u001f\u007f"<>|:*?]/g;

/** A client-given filename reduced to a safe last path segment (no `..`, slashes or controls). */
export function safeFilename(name: string | undefined): string {
  const base = (name ?? '').split(/[\\/]/).pop() ?? '';
  let clean = base.replace(UNSAFE_IN_NAMES, '').replace(/^\.+/, '').trim().slice(0, 200);
  // The cut must not split a surrogate pair (a lone half is not UTF-8).
  if (/[\ud800-\udbff]$/.test(clean)) clean = clean.slice(0, -1).trim();
  return clean === '' ? 'file' : clean;
}

export function folderOf(v: string | undefined): string | null {
  if (v === undefined || v.trim() === '') return null;
  const parts = v
    .split('/')
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.some((p) => p === '.' || p === '..') || v.length > 200)
    throw new BadUserInput('folder must be a path of names without . or ..');
  return parts.join('/') || null;
}

/** A header naming more pixels than we decode (a small file that inflates to gigabytes). */
export function checkPixels(kind: { width: number | null; height: number | null }, maxInputPixels: number): void {
  if (kind.width !== null && kind.height !== null && kind.width * kind.height > maxInputPixels) {
    throw new BadUserInput(
      `The image is ${kind.width}×${kind.height} pixels; at most ${maxInputPixels} pixels are accepted`,
      { limit: maxInputPixels },
    );
  }
}

/**
 * A form field's text, refused when PostgreSQL could not store it (NUL; the 500 of issue 27
 * item 10) or it cannot be UTF-8 (unpaired surrogates, only from callers other than busboy).
 */
export function checkFormText(name: string, v: string | null | undefined): void {
  if (typeof v !== 'string') return;
  if (v.includes('\0')) throw new BadUserInput(`${name}: NUL characters are not allowed`, { field: name });
  if (!(v as unknown as { isWellFormed(): boolean }).isWellFormed())
    throw new BadUserInput(`${name}: unpaired UTF-16 surrogates are not allowed`, { field: name });
}

function textField(v: string | undefined): string | null {
  return v?.trim() ? v.trim().slice(0, MAX_TEXT) : null;
}

/** What both upload paths know once the bytes are stored aside (a temp or a staged object). */
export interface Received {
  head: Uint8Array;
  sha256: string;
  size: number;
  filename: string;
  alt: string | null;
  folder: string | null;
  customerId: string | null;
  /** The id the file gets (two-step uploads chose it up front). */
  id?: string;
  /** Moves the bytes under their hash; runs under the hash's lock. */
  commit(): Promise<void>;
}

/**
 * The checks every upload passes after its bytes arrived, then the row: the sniffed type (and
 * the key's allowedFileTypes), the pixel cap, and the blob committed under the hash's lock (a
 * permanent delete of the same bytes cannot remove it between this commit and the row).
 */
export async function finishUpload(
  deps: Pick<UploadDeps, 'sql' | 'limits' | 'storage'> & { maxInputPixels: number },
  key: RequestPrincipal['key'],
  r: Received,
): Promise<FileRow> {
  // Before the bytes are committed: what the row will hold must be storable.
  checkFormText('alt', r.alt);
  checkFormText('folder', r.folder);
  checkFormText('filename', r.filename);
  if (r.size === 0) throw new BadUserInput('The file is empty');
  const kind = await sniff(r.head);
  if ('invalid' in kind) throw new BadUserInput(kind.invalid);
  checkPixels(kind, deps.maxInputPixels);
  if (!typeAllowed(key.allowedFileTypes, kind.contentType)) {
    throw new PermissionDenied(`This key may not upload ${kind.contentType} files`, { contentType: kind.contentType });
  }
  let committed = false;
  try {
    return (await deps.sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${hashLock(r.sha256).toString()}::bigint)`;
      await r.commit();
      committed = true;
      const row = await insertFile(tx as unknown as Sql, {
        id: r.id,
        projectId: key.projectId,
        sha256: r.sha256,
        filename: r.filename,
        contentType: kind.contentType,
        size: r.size,
        width: kind.width,
        height: kind.height,
        alt: r.alt,
        folder: r.folder,
        customerId: r.customerId,
        keyId: key.keyId,
      });
      // Videos get a poster and HLS renditions from a media job (src/files/media.ts).
      if (kind.contentType.startsWith('video/')) await queueMediaJob(tx as unknown as Sql, row.id, key.projectId);
      return row;
    })) as FileRow;
  } catch (err) {
    // The bytes were committed but no row names them: removed, unless another row does.
    if (committed)
      await removeUnnamedBlob(deps.sql, deps.storage, r.sha256).catch((e) =>
        console.error('files: removing an unnamed blob failed:', e instanceof Error ? e.message : e),
      );
    throw err;
  }
}

export async function handleUpload(deps: UploadDeps, principal: RequestPrincipal, request: Request): Promise<FileRow> {
  const ct = request.headers.get('content-type') ?? '';
  if (!/^multipart\/form-data\s*;/i.test(ct) || !request.body)
    throw new BadUserInput('The body must be multipart/form-data with a field named file');
  const limits = await projectLimits(deps.sql, principal.key.projectId, deps.limits);
  const maxBytes = room(limits);
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (maxBytes === 0 || declared > maxBytes + 64 * 1024) throw tooLarge(limits, maxBytes === 0 ? 1 : declared);
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
    // defParamCharset: multipart parameters (the file name) are UTF-8 (RFC 7578 §4.2; busboy
    // reads them as Latin-1 unless told); `filename*` carries its own charset (RFC 8187).
    bb = busboy({
      headers: { 'content-type': ct },
      defParamCharset: 'utf8',
      highWaterMark: 256 * 1024,
      fileHwm: 256 * 1024,
      limits: { files: 1, fields: 10, fieldSize: MAX_TEXT, fileSize: maxBytes, parts: 20 },
    });
  } catch {
    throw new BadUserInput('The body must be multipart/form-data with a boundary');
  }
  // The body is fed to busboy by hand, waiting for 'drain' (backpressure): 2.6× faster than
  // piping Readable.fromWeb into it under Bun (4.65 → 1.78 ms per 200 KB body, docs/decisions.md).
  const reader = request.body.getReader();
  let fileStream: { destroy(): void } | null = null;
  let drained: (() => void) | null = null;
  let finish: () => void = () => {};
  const fail = (e: Error) => {
    if (!failure) failure = e;
    void reader.cancel().catch(() => {});
    fileStream?.destroy();
    drained?.();
    finish();
  };
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
    // Fields are checked as they arrive: sent before the file (as FormData does when they were
    // appended first), a bad one fails the upload before any byte is stored.
    bb.on('field', (name, value) => {
      if (failure) return;
      try {
        if (name === 'alt' || name === 'folder') checkFormText(name, value);
        if (name === 'folder') folderOf(value);
      } catch (e) {
        return fail(e as Error);
      }
      fields[name] = value;
    });
    bb.on('file', (name, stream, info) => {
      if (name !== 'file' || failure) {
        stream.resume();
        return;
      }
      fileStream = stream;
      filename = safeFilename(info.filename);
      stream.on('limit', () => fail(tooLarge(limits, null)));
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
    bb.on('error', (e) => fail(e instanceof PayloadTooLarge ? e : new BadUserInput('The multipart body is malformed')));
  });
  const pump = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (failure) return;
        if (done) break;
        if (!bb.write(value))
          await new Promise<void>((r) => {
            drained = r;
            bb.once('drain', r);
          });
        drained = null;
        if (failure) return;
      }
      bb.end();
    } catch (e) {
      // The body-limit stream (src/http/body.ts) fails the read with PayloadTooLarge.
      const cause = (e as { cause?: unknown }).cause;
      fail(
        e instanceof PayloadTooLarge
          ? e
          : cause instanceof PayloadTooLarge
            ? cause
            : new BadUserInput('The request body could not be read'),
      );
    }
  })();
  try {
    await finished;
    await pump;
    await fileDone;
    if (failure) throw failure;
    if (!temp) throw new BadUserInput('The multipart body has no field named file');
    if (size === 0) throw new BadUserInput('The file is empty');
    const sha256 = hash.digest('hex');
    const t = temp as TempBlob;
    return await finishUpload(deps, principal.key, {
      head: Buffer.concat(head),
      sha256,
      size,
      filename,
      alt: textField(fields.alt),
      folder: folderOf(fields.folder),
      customerId: principal.customer?.customerId ?? null,
      commit: () => t.commit(sha256),
    });
  } finally {
    if (temp) await (temp as TempBlob).discard();
  }
}
