import type { Sql } from '../store/db.ts';
import type { FileStorage, StoredObject } from './storage.ts';
import type { FileRow } from './store.ts';
import type { ImageTransformer } from './images.ts';
import { parseTransform, wantsTransform } from './transform.ts';
import { derivedType } from './media.ts';

/**
 * GET of a file URL. The URL names the file id, whose bytes never change, so it is cached for a
 * year as immutable; the ETag is the SHA-256. Conditional requests answer 304; one `Range`
 * answers 206 (several ranges get the whole file, which RFC 9110 allows). A soft-deleted or
 * unknown file answers 404 with no hint which. Served with `nosniff` and a sandbox CSP so an
 * uploaded HTML or SVG cannot run script on this origin. Transform parameters in the query
 * (src/files/transform.ts) answer a generated variant, immutable as well (its URL names it).
 */
export interface DeliverDeps {
  sql: Sql;
  /** Live rows by id (cached per process, src/files/live.ts). */
  lookup: (id: string) => Promise<FileRow | null>;
  storage: FileStorage;
  images: ImageTransformer;
  maxOutputPixels: number;
}

const notFound = () => Response.json({ error: 'NOT_FOUND', message: 'File not found' }, { status: 404 });

export async function deliverFile(deps: DeliverDeps, id: string, request: Request): Promise<Response> {
  const row = /^file_[0-9a-f]{24}$/.test(id) ? await deps.lookup(id) : null;
  if (!row) return notFound();
  const q = request.url.indexOf('?');
  const query = q < 0 ? null : new URLSearchParams(request.url.slice(q + 1));
  if (query && wantsTransform(query)) {
    const spec = parseTransform(
      query,
      { contentType: row.content_type, width: row.width, height: row.height },
      deps.maxOutputPixels,
    );
    const v = await deps.images.variant(row.sha256, spec);
    const blob = new Blob([v.bytes as Uint8Array<ArrayBuffer>]);
    return serve(
      request,
      row,
      { file: blob, size: blob.size },
      `"${row.sha256}-${v.name.replace(/\.\w+$/, '')}"`,
      v.contentType,
    );
  }
  const blob = await deps.storage.open(row.sha256);
  if (!blob) return notFound();
  return serve(request, row, blob, `"${row.sha256}"`, row.content_type);
}

/**
 * `GET /api/files/<id>/~/<name>`: a derived object of a live file (a video's poster, HLS
 * playlists and segments); made once by the media job and never changed, so immutable too.
 */
export async function deliverDerived(deps: DeliverDeps, id: string, name: string, request: Request): Promise<Response> {
  const type = derivedType(name);
  const row =
    type && /^file_[0-9a-f]{24}$/.test(id) && /^[a-z0-9][a-z0-9._-]{0,120}$/.test(name) ? await deps.lookup(id) : null;
  if (!row || !type || !row.media) return notFound();
  const obj = await deps.storage.openDerived(row.sha256, name);
  if (!obj) return notFound();
  return serve(request, { created_at: row.created_at, filename: name }, obj, `"${row.sha256}-${name}"`, type);
}

/** Bytes with the immutable caching, validators and Range of a file URL. */
export function serve(
  request: Request,
  row: Pick<FileRow, 'created_at' | 'filename'>,
  blob: StoredObject,
  etag: string,
  contentType: string,
): Response {
  const body = (b: Blob) => (request.method === 'HEAD' ? null : blob.remote ? b.stream() : b);
  const headers: Record<string, string> = {
    etag,
    'last-modified': row.created_at.toUTCString(),
    'cache-control': 'public, max-age=31536000, immutable',
    'accept-ranges': 'bytes',
    'content-type': contentType,
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    'content-disposition': `${contentType.startsWith('image/') || contentType.startsWith('video/') ? 'inline' : 'attachment'}; filename*=UTF-8''${encodeURIComponent(row.filename)}`,
  };
  const inm = request.headers.get('if-none-match');
  const ims = request.headers.get('if-modified-since');
  if (
    inm !== null
      ? inm.split(',').some((t) => t.trim() === etag || t.trim() === '*' || t.trim() === `W/${etag}`)
      : ims !== null && Date.parse(ims) >= Math.floor(row.created_at.getTime() / 1000) * 1000
  ) {
    return new Response(null, { status: 304, headers });
  }
  const size = blob.size;
  const range = request.headers.get('range');
  const ifRange = request.headers.get('if-range');
  if (range !== null && (ifRange === null || ifRange === etag)) {
    const r = parseRange(range, size);
    if (r === 'unsatisfiable')
      return new Response(null, { status: 416, headers: { ...headers, 'content-range': `bytes */${size}` } });
    if (r) {
      const [start, end] = r;
      return new Response(body(blob.file.slice(start, end + 1)), {
        status: 206,
        headers: {
          ...headers,
          'content-range': `bytes ${start}-${end}/${size}`,
          'content-length': String(end - start + 1),
        },
      });
    }
  }
  return new Response(body(blob.file), { status: 200, headers: { ...headers, 'content-length': String(size) } });
}

/** One `bytes=` range → inclusive [start, end]; null to ignore the header (serve it all). */
export function parseRange(value: string, size: number): [number, number] | 'unsatisfiable' | null {
  const m = /^bytes=(\d*)-(\d*)$/.exec(value.trim());
  if (!m) return null;
  const [, a, b] = m;
  if (a === '' && b === '') return null;
  if (a === '') {
    const n = Number(b);
    if (n === 0) return 'unsatisfiable';
    return [Math.max(0, size - n), size - 1];
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (start >= size) return 'unsatisfiable';
  if (end < start) return null;
  return [start, end];
}
