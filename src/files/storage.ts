import { mkdir, open, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/**
 * Where file bytes live. Blobs are named by their SHA-256 (hex), so identical bytes are stored
 * once; an upload first goes to a temp object that is either committed under its hash or
 * discarded, leaving nothing behind on a refusal. Names never come from the client, so no
 * path from a request can reach outside the storage root.
 */
export interface TempBlob {
  write(chunk: Uint8Array): Promise<void>;
  /** Moves the bytes under their hash (keeps the existing copy when the blob is already there). */
  commit(sha256: string): Promise<void>;
  /** Removes the temp bytes; safe to call twice or after commit. */
  discard(): Promise<void>;
}

export interface FileStorage {
  begin(): Promise<TempBlob>;
  /** The stored bytes of a hash as a Bun file (sliceable for Range), or null. */
  open(sha256: string): Promise<{ file: Blob; size: number } | null>;
  remove(sha256: string): Promise<void>;
}

const HEX64 = /^[0-9a-f]{64}$/;

/** Local disk under `SVC_DATA_DIR/files`: blobs at `ab/cd/<sha256>`, temps under `tmp/`. */
export class LocalDiskStorage implements FileStorage {
  readonly root: string;
  constructor(dataDir: string) {
    this.root = join(dataDir, 'files');
  }

  pathOf(sha256: string): string {
    if (!HEX64.test(sha256)) throw new Error('not a SHA-256');
    return join(this.root, sha256.slice(0, 2), sha256.slice(2, 4), sha256);
  }

  async begin(): Promise<TempBlob> {
    const dir = join(this.root, 'tmp');
    await mkdir(dir, { recursive: true });
    const path = join(dir, randomBytes(16).toString('hex'));
    let fh: FileHandle | null = await open(path, 'wx');
    let done = false;
    const close = async () => {
      const h = fh;
      fh = null;
      if (h) await h.close().catch(() => {});
    };
    return {
      write: async (chunk) => {
        if (!fh) throw new Error('temp blob closed');
        await fh.write(chunk);
      },
      commit: async (sha256) => {
        await close();
        const dest = this.pathOf(sha256);
        await mkdir(join(dest, '..'), { recursive: true });
        // rename replaces atomically; the bytes are equal when the blob exists already.
        await rename(path, dest);
        done = true;
      },
      discard: async () => {
        await close();
        if (!done) await rm(path, { force: true });
        done = true;
      },
    };
  }

  async open(sha256: string): Promise<{ file: Blob; size: number } | null> {
    const p = this.pathOf(sha256);
    const s = await stat(p).catch(() => null);
    if (!s || !s.isFile()) return null;
    return { file: Bun.file(p), size: s.size };
  }

  async remove(sha256: string): Promise<void> {
    await rm(this.pathOf(sha256), { force: true });
  }
}
