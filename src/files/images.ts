import sharp from 'sharp';
import { BadUserInput, RateLimited } from '../errors.ts';
import type { FileStorage, StoredObject } from './storage.ts';
import { focalCrop, OUTPUT_TYPES, variantName, type TransformSpec } from './transform.ts';

/**
 * Image variants: generated once with sharp (libvips), stored beside their blob (so every
 * process and every restart reuses them) and kept in a per-process memory cache bounded in
 * bytes. sharp decodes and encodes on libuv's thread pool, never on the event loop; at most
 * `concurrency` images are in work at once per process (libvips itself one thread per image),
 * a bounded queue waits behind them, and past it a request is answered 429 with Retry-After.
 * Concurrent requests for one variant share one generation.
 */
sharp.cache(false);
sharp.concurrency(1);

export interface ImageLimits {
  maxInputPixels: number;
  concurrency: number;
  cacheBytes: number;
}

export interface Variant {
  bytes: Uint8Array;
  contentType: string;
  name: string;
}

/** A byte-bounded LRU (Map order is insertion order; a hit re-inserts). */
export class ByteLru<V extends { byteLength: number }> {
  readonly #map = new Map<string, V>();
  #bytes = 0;
  constructor(readonly maxBytes: number) {}

  get(key: string): V | undefined {
    const v = this.#map.get(key);
    if (v !== undefined) {
      this.#map.delete(key);
      this.#map.set(key, v);
    }
    return v;
  }

  set(key: string, v: V): void {
    if (v.byteLength > this.maxBytes / 4) return; // one entry never takes a quarter of the budget
    const old = this.#map.get(key);
    if (old) this.#bytes -= old.byteLength;
    this.#map.delete(key);
    this.#map.set(key, v);
    this.#bytes += v.byteLength;
    for (const [k, e] of this.#map) {
      if (this.#bytes <= this.maxBytes) break;
      this.#map.delete(k);
      this.#bytes -= e.byteLength;
    }
  }

  deletePrefix(prefix: string): void {
    for (const [k, e] of this.#map) {
      if (k.startsWith(prefix)) {
        this.#map.delete(k);
        this.#bytes -= e.byteLength;
      }
    }
  }

  get bytes(): number {
    return this.#bytes;
  }
}

const QUEUE_PER_SLOT = 32;

export class ImageTransformer {
  readonly #cache: ByteLru<Uint8Array>;
  readonly #inflight = new Map<string, Promise<Variant>>();
  readonly #waiting: (() => void)[] = [];
  #running = 0;
  generated = 0;

  constructor(
    readonly storage: FileStorage,
    readonly limits: ImageLimits,
  ) {
    this.#cache = new ByteLru(limits.cacheBytes);
  }

  /** The variant of blob `sha256` for `spec`: memory, then storage, then generated once. */
  async variant(sha256: string, spec: TransformSpec): Promise<Variant> {
    const name = variantName(spec);
    const key = `${sha256}/${name}`;
    const contentType = OUTPUT_TYPES[spec.format];
    const hit = this.#cache.get(key);
    if (hit) return { bytes: hit, contentType, name };
    const running = this.#inflight.get(key);
    if (running) return running;
    const p = (async () => {
      const stored = await this.storage.openDerived(sha256, name);
      const bytes = stored ? new Uint8Array(await stored.file.arrayBuffer()) : await this.#generate(sha256, spec, name);
      this.#cache.set(key, bytes);
      return { bytes, contentType, name };
    })();
    this.#inflight.set(key, p);
    try {
      return await p;
    } finally {
      this.#inflight.delete(key);
    }
  }

  /** Drops the cached variants of a blob (its file was deleted for good). */
  forget(sha256: string): void {
    this.#cache.deletePrefix(`${sha256}/`);
  }

  get cachedBytes(): number {
    return this.#cache.bytes;
  }

  async #slot(): Promise<() => void> {
    if (this.#running >= this.limits.concurrency) {
      if (this.#waiting.length >= this.limits.concurrency * QUEUE_PER_SLOT) {
        throw new RateLimited('Too many image transforms in progress; retry shortly', {}, { 'retry-after': '1' });
      }
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    } else this.#running++;
    return () => {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    };
  }

  async #generate(sha256: string, spec: TransformSpec, name: string): Promise<Uint8Array> {
    const release = await this.#slot();
    try {
      const input = await sourceOf(this.storage, sha256);
      const bytes = await render(input, spec, this.limits.maxInputPixels);
      this.generated++;
      await this.storage.putDerived(sha256, name, bytes);
      return bytes;
    } finally {
      release();
    }
  }
}

/** sharp reads a local blob by path on its own threads; an S3 blob is fetched first. */
async function sourceOf(storage: FileStorage, sha256: string): Promise<string | Uint8Array> {
  const path = storage.localPath(sha256);
  if (path) return path;
  const obj: StoredObject | null = await storage.open(sha256);
  if (!obj) throw new BadUserInput('The file has no stored bytes');
  return new Uint8Array(await obj.file.arrayBuffer());
}

/** One transform. Decoding refuses images over `maxInputPixels` (decompression bombs) as 400. */
export async function render(
  input: string | Uint8Array,
  spec: TransformSpec,
  maxInputPixels: number,
): Promise<Uint8Array> {
  const opts = { limitInputPixels: maxInputPixels, autoOrient: true, failOn: 'error' as const };
  try {
    let img = sharp(input, opts);
    if (spec.fp && spec.w !== null && spec.h !== null) {
      const meta = await sharp(input, opts).metadata();
      const W = meta.autoOrient?.width ?? meta.width ?? spec.w;
      const H = meta.autoOrient?.height ?? meta.height ?? spec.h;
      const c = focalCrop(W, H, spec.w, spec.h, spec.fp);
      img = img
        .resize(c.rw, c.rh, { fit: 'fill' })
        .extract({ left: c.left, top: c.top, width: spec.w, height: spec.h });
    } else if (spec.w !== null || spec.h !== null) {
      img = img.resize(spec.w, spec.h, { fit: spec.fit });
    }
    const q = spec.q ?? undefined;
    switch (spec.format) {
      case 'webp':
        img = img.webp({ quality: q ?? 80 });
        break;
      case 'avif':
        img = img.avif({ quality: q ?? 50, effort: 2 });
        break;
      case 'jpeg':
        img = img.jpeg({ quality: q ?? 80, mozjpeg: true });
        break;
      case 'png':
        img = img.png();
        break;
      case 'gif':
        img = img.gif();
        break;
    }
    return new Uint8Array(await img.toBuffer());
  } catch (e) {
    const msg = e instanceof Error ? e.message : '';
    if (/pixel limit/i.test(msg))
      throw new BadUserInput(`The image has more than ${maxInputPixels} pixels and is not decoded`, {
        limit: maxInputPixels,
      });
    throw new BadUserInput('The image could not be decoded');
  }
}
