import { createHash } from 'node:crypto';
import { BadUserInput } from '../errors.ts';

/**
 * Image transform parameters of a file URL's query (docs/files.md#image-transforms): parsed,
 * checked and reduced to one canonical form, so `?format=webp&w=400` and `?w=400&format=webp`
 * name one variant. No I/O here.
 *
 * | param | meaning |
 * |---|---|
 * | `w`, `h` | output width/height in px (1–8192; together at most the output pixel cap) |
 * | `fit` | `cover` (default; crops), `contain` (letterboxes), `fill` (stretches), `inside`, `outside` |
 * | `format` | `webp`, `avif`, `png`, `jpeg` (`jpg`); default: the source's format |
 * | `q` | quality 1–100 for webp, avif and jpeg |
 * | `fp` | focal point `x,y` (0–1 each) that a `cover` crop keeps in view |
 */
export type Fit = 'cover' | 'contain' | 'fill' | 'inside' | 'outside';
export type OutputFormat = 'webp' | 'avif' | 'png' | 'jpeg' | 'gif';

export interface TransformSpec {
  w: number | null;
  h: number | null;
  fit: Fit;
  format: OutputFormat;
  q: number | null;
  fp: [number, number] | null;
}

export const MAX_SIDE = 8192;
const FITS: readonly Fit[] = ['cover', 'contain', 'fill', 'inside', 'outside'];
const FORMATS: Record<string, OutputFormat> = { webp: 'webp', avif: 'avif', png: 'png', jpeg: 'jpeg', jpg: 'jpeg' };
const PARAMS = new Set(['w', 'h', 'fit', 'format', 'q', 'fp']);
const SOURCE_FORMATS: Record<string, OutputFormat> = {
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'image/avif': 'avif',
};
export const OUTPUT_TYPES: Record<OutputFormat, string> = {
  webp: 'image/webp',
  avif: 'image/avif',
  png: 'image/png',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
};

/** Whether the query asks for a transform at all (any known parameter present). */
export function wantsTransform(query: URLSearchParams): boolean {
  for (const k of query.keys()) if (PARAMS.has(k)) return true;
  return false;
}

function side(v: string | null, name: string): number | null {
  if (v === null || v === '') return null;
  if (!/^\d{1,6}$/.test(v) || Number(v) < 1)
    throw new BadUserInput(`${name} must be a whole number of pixels from 1 to ${MAX_SIDE}`, { param: name });
  const n = Number(v);
  if (n > MAX_SIDE)
    throw new BadUserInput(`${name}=${n} is over the limit of ${MAX_SIDE} pixels`, { param: name, limit: MAX_SIDE });
  return n;
}

/**
 * The spec of a query against a source image of `source` size and type. Throws BadUserInput on
 * a bad value, a source that is not a transformable image, or an output over `maxOutputPixels`.
 */
export function parseTransform(
  query: URLSearchParams,
  source: { contentType: string; width: number | null; height: number | null },
  maxOutputPixels: number,
): TransformSpec {
  const from = SOURCE_FORMATS[source.contentType];
  if (!from || !source.width || !source.height)
    throw new BadUserInput(`Transforms apply to PNG, JPEG, WebP, GIF and AVIF images, not ${source.contentType}`);
  const w = side(query.get('w'), 'w');
  const h = side(query.get('h'), 'h');
  const fitRaw = query.get('fit');
  if (fitRaw !== null && !FITS.includes(fitRaw as Fit))
    throw new BadUserInput(`fit must be one of ${FITS.join(', ')}`, { param: 'fit' });
  const formatRaw = query.get('format');
  const format = formatRaw === null ? from : FORMATS[formatRaw.toLowerCase()];
  if (!format) throw new BadUserInput('format must be one of webp, avif, png, jpeg', { param: 'format' });
  const qRaw = query.get('q');
  let q: number | null = null;
  if (qRaw !== null) {
    if (!/^\d{1,3}$/.test(qRaw) || Number(qRaw) < 1 || Number(qRaw) > 100)
      throw new BadUserInput('q must be a whole number from 1 to 100', { param: 'q' });
    q = format === 'png' || format === 'gif' ? null : Number(qRaw);
  }
  const fpRaw = query.get('fp');
  let fp: [number, number] | null = null;
  if (fpRaw !== null) {
    const m = /^(0(?:\.\d+)?|1(?:\.0+)?),(0(?:\.\d+)?|1(?:\.0+)?)$/.exec(fpRaw);
    if (!m) throw new BadUserInput('fp must be "x,y" with each from 0 to 1', { param: 'fp' });
    fp = [Number(m[1]), Number(m[2])];
  }
  const fit: Fit = (fitRaw as Fit | null) ?? 'cover';
  // An EXIF orientation may swap the sides: check the larger of both readings.
  const [ow, oh] = outputSize({ w, h, fit }, source.width, source.height);
  const [sw, sh] = outputSize({ w, h, fit }, source.height, source.width);
  if (Math.max(ow * oh, sw * sh) > maxOutputPixels) {
    throw new BadUserInput(`The output would be ${ow}×${oh} pixels; the limit is ${maxOutputPixels}`, {
      limit: maxOutputPixels,
    });
  }
  // A focal point only moves a cover crop of both sides; elsewhere it changes nothing.
  return { w, h, fit, format, q, fp: fit === 'cover' && w !== null && h !== null ? fp : null };
}

/** The output size of a spec on a W×H source (what sharp will produce). */
export function outputSize(spec: Pick<TransformSpec, 'w' | 'h' | 'fit'>, W: number, H: number): [number, number] {
  const { w, h, fit } = spec;
  if (w === null && h === null) return [W, H];
  if (w !== null && h === null) return [w, Math.max(1, Math.round((H * w) / W))];
  if (w === null && h !== null) return [Math.max(1, Math.round((W * h) / H)), h];
  if (fit === 'inside') {
    const s = Math.min(w! / W, h! / H);
    return [Math.max(1, Math.round(W * s)), Math.max(1, Math.round(H * s))];
  }
  if (fit === 'outside') {
    const s = Math.max(w! / W, h! / H);
    return [Math.max(1, Math.round(W * s)), Math.max(1, Math.round(H * s))];
  }
  return [w!, h!];
}

/** The canonical name of a variant: equal specs, equal names (and storage keys). */
export function variantName(spec: TransformSpec): string {
  const canon = `w${spec.w ?? ''}.h${spec.h ?? ''}.${spec.fit}.q${spec.q ?? ''}.fp${spec.fp ? spec.fp.join('_') : ''}`;
  return `v-${createHash('sha256').update(canon).digest('hex').slice(0, 24)}.${spec.format}`;
}

/**
 * The crop box of a cover resize around a focal point: scale the W×H source to cover w×h, then
 * cut w×h centred on the focal point, clamped to the image.
 */
export function focalCrop(
  W: number,
  H: number,
  w: number,
  h: number,
  fp: [number, number],
): { rw: number; rh: number; left: number; top: number } {
  const s = Math.max(w / W, h / H);
  const rw = Math.max(w, Math.round(W * s));
  const rh = Math.max(h, Math.round(H * s));
  const left = Math.min(rw - w, Math.max(0, Math.round(fp[0] * rw - w / 2)));
  const top = Math.min(rh - h, Math.max(0, Math.round(fp[1] * rh - h / 2)));
  return { rw, rh, left, top };
}
