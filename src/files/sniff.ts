import { fileTypeFromBuffer } from 'file-type';

/**
 * What the bytes are, never what the client says: `file-type` reads the magic numbers of the
 * first bytes. Images must also carry a readable header with their dimensions (read here from
 * the header bytes, without decoding pixels), so a PNG signature on an HTML payload is refused.
 */
export const SNIFF_BYTES = 64 * 1024;

export interface Sniffed {
  contentType: string;
  ext: string | null;
  width: number | null;
  height: number | null;
}

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

export async function sniff(head: Uint8Array): Promise<Sniffed | { invalid: string }> {
  const t = await fileTypeFromBuffer(head);
  const claimed = imageMagic(head);
  // An image signature that does not parse as that image (a PNG header on an HTML payload).
  if (claimed && t?.mime !== claimed) return { invalid: `The ${claimed} header is not a valid image header` };
  if (!t) return { contentType: 'application/octet-stream', ext: null, width: null, height: null };
  if (!IMAGE_TYPES.has(t.mime)) return { contentType: t.mime, ext: t.ext, width: null, height: null };
  const dims = dimensions(t.mime, head);
  if (!dims) return { invalid: `The ${t.mime} header is not a valid image header` };
  return { contentType: t.mime, ext: t.ext, width: dims[0], height: dims[1] };
}

function imageMagic(b: Uint8Array): string | null {
  const starts = (...m: number[]) => m.every((x, i) => b[i] === x);
  if (starts(0x89, 0x50, 0x4e, 0x47)) return 'image/png';
  if (starts(0xff, 0xd8, 0xff)) return 'image/jpeg';
  if (starts(0x47, 0x49, 0x46, 0x38)) return 'image/gif';
  if (starts(0x52, 0x49, 0x46, 0x46) && String.fromCharCode(...b.subarray(8, 12)) === 'WEBP') return 'image/webp';
  return null;
}

function dimensions(mime: string, b: Uint8Array): [number, number] | null {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const ascii = (at: number, n: number) => String.fromCharCode(...b.subarray(at, at + n));
  const ok = (w: number, h: number): [number, number] | null => (w > 0 && h > 0 ? [w, h] : null);
  if (mime === 'image/png') {
    if (b.length < 24 || ascii(12, 4) !== 'IHDR') return null;
    return ok(v.getUint32(16), v.getUint32(20));
  }
  if (mime === 'image/gif') {
    if (b.length < 10) return null;
    return ok(v.getUint16(6, true), v.getUint16(8, true));
  }
  if (mime === 'image/webp') {
    if (b.length < 30) return null;
    const chunk = ascii(12, 4);
    if (chunk === 'VP8X') return ok(1 + (v.getUint32(24, true) & 0xffffff), 1 + (v.getUint32(27, true) & 0xffffff));
    if (chunk === 'VP8 ') return ok(v.getUint16(26, true) & 0x3fff, v.getUint16(28, true) & 0x3fff);
    if (chunk === 'VP8L') {
      const bits = v.getUint32(21, true);
      return ok(1 + (bits & 0x3fff), 1 + ((bits >> 14) & 0x3fff));
    }
    return null;
  }
  // JPEG: walk the segments to the first start-of-frame (SOF0..SOF15 but DHT, JPG, DAC).
  let i = 2;
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return null;
    const marker = b[i + 1]!;
    if (marker === 0xff) {
      i++;
      continue;
    }
    const len = v.getUint16(i + 2);
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return ok(v.getUint16(i + 7), v.getUint16(i + 5));
    }
    if (len < 2) return null;
    i += 2 + len;
  }
  return null;
}

/** `image/*` patterns of a key's allowedFileTypes; null allows every type. */
export function typeAllowed(allowed: readonly string[] | null, contentType: string): boolean {
  if (!allowed || allowed.length === 0) return true;
  return allowed.some(
    (p) => p === '*/*' || p === contentType || (p.endsWith('/*') && contentType.startsWith(p.slice(0, -1))),
  );
}
