import type { Sql } from '../store/db.ts';
import type { FileStorage } from './storage.ts';
import { liveFile } from './store.ts';

/**
 * GET of a file URL. The URL names the file id, whose bytes never change, so it is cached for a
 * year as immutable; the ETag is the SHA-256. Conditional requests answer 304; one `Range`
 * answers 206 (several ranges get the whole file, which RFC 9110 allows). A soft-deleted or
 * unknown file answers 404 with no hint which. Served with `nosniff` and a sandbox CSP so an
 * uploaded HTML or SVG cannot run script on this origin.
 */
export async function deliverFile(sql: Sql, storage: FileStorage, id: string, request: Request): Promise<Response> {
  const row = /^file_[0-9a-f]{24}$/.test(id) ? await liveFile(sql, id) : null;
  const blob = row ? await storage.open(row.sha256) : null;
  if (!row || !blob) return Response.json({ error: 'NOT_FOUND', message: 'File not found' }, { status: 404 });
  const etag = `"${row.sha256}"`;
  const headers: Record<string, string> = {
    etag,
    'last-modified': row.created_at.toUTCString(),
    'cache-control': 'public, max-age=31536000, immutable',
    'accept-ranges': 'bytes',
    'content-type': row.content_type,
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    'content-disposition': `${row.content_type.startsWith('image/') || row.content_type.startsWith('video/') ? 'inline' : 'attachment'}; filename*=UTF-8''${encodeURIComponent(row.filename)}`,
  };
  const inm = request.headers.get('if-none-match');
  const ims = request.headers.get('if-modified-since');
  if (inm !== null ? inm.split(',').some((t) => t.trim() === etag || t.trim() === '*' || t.trim() === `W/${etag}`) : ims !== null && Date.parse(ims) >= Math.floor(row.created_at.getTime() / 1000) * 1000) {
    return new Response(null, { status: 304, headers });
  }
  const size = blob.size;
  const range = request.headers.get('range');
  const ifRange = request.headers.get('if-range');
  if (range !== null && (ifRange === null || ifRange === etag)) {
    const r = parseRange(range, size);
    if (r === 'unsatisfiable') return new Response(null, { status: 416, headers: { ...headers, 'content-range': `bytes */${size}` } });
    if (r) {
      const [start, end] = r;
      return new Response(request.method === 'HEAD' ? null : blob.file.slice(start, end + 1), {
        status: 206,
        headers: { ...headers, 'content-range': `bytes ${start}-${end}/${size}`, 'content-length': String(end - start + 1) },
      });
    }
  }
  return new Response(request.method === 'HEAD' ? null : blob.file, { status: 200, headers: { ...headers, 'content-length': String(size) } });
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
