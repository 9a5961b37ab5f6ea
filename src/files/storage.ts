import { mkdir, open, readdir, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/**
 * Where file bytes live. Blobs are named by their SHA-256 (hex), so identical bytes are stored
 * once; an upload first goes to a temp object that is either committed under its hash or
 * discarded, leaving nothing behind on a refusal. Names never come from the client, so no
 * path from a request can reach outside the storage root. Derived objects (transformed
 * variants, video posters, HLS renditions) live beside their blob and go with it.
 */
export interface TempBlob {
  write(chunk: Uint8Array): Promise<void>;
  /** Moves the bytes under their hash (keeps the existing copy when the blob is already there). */
  commit(sha256: string): Promise<void>;
  /** Removes the temp bytes; safe to call twice or after commit. */
  discard(): Promise<void>;
}

/** Stored bytes as a Blob (sliceable for Range; Bun.file or an S3 file). */
export interface StoredObject {
  file: Blob;
  size: number;
  /** An object in a bucket: answered as a stream (Bun answers a bare S3 file with a redirect). */
  remote?: boolean;
}

export interface FileStorage {
  readonly kind: 'local' | 's3';
  begin(): Promise<TempBlob>;
  open(sha256: string): Promise<StoredObject | null>;
  /** Removes a blob and everything derived from it. */
  remove(sha256: string): Promise<void>;
  putDerived(sha256: string, name: string, bytes: Uint8Array): Promise<void>;
  openDerived(sha256: string, name: string): Promise<StoredObject | null>;
  /** A path on this machine holding the blob, for sharp and ffmpeg to read directly; null on S3. */
  localPath(sha256: string): string | null;
  /** Two-step uploads: where the bytes of upload `id` are staged before confirmation. */
  openStaged(id: string): Promise<StoredObject | null>;
  /** Moves the staged bytes of `id` under their hash (after the confirm step hashed them). */
  commitStaged(id: string, sha256: string): Promise<void>;
  removeStaged(id: string): Promise<void>;
  /** A direct upload URL (S3 presigned PUT), or null when uploads go through svc. */
  presignStaged(id: string, contentType: string, expiresInSec: number): string | null;
  /** Local only: a temp blob that commits to the staging name of `id`. */
  beginStaged(id: string): Promise<TempBlob>;
}

const HEX64 = /^[0-9a-f]{64}$/;
const DERIVED = /^[a-z0-9][a-z0-9._-]{0,120}$/;
const STAGED_ID = /^file_[0-9a-f]{24}$/;

export function checkSha(sha256: string): string {
  if (!HEX64.test(sha256)) throw new Error('not a SHA-256');
  return sha256;
}

export function checkDerived(name: string): string {
  if (!DERIVED.test(name) || name.includes('..')) throw new Error('not a derived object name');
  return name;
}

export function checkStaged(id: string): string {
  if (!STAGED_ID.test(id)) throw new Error('not a file id');
  return id;
}

/**
 * Local disk under `SVC_DATA_DIR/files`: blobs at `ab/cd/<sha256>`, derived objects under
 * `derived/ab/<sha256>/<name>`, staged two-step uploads under `staged/<file id>`, temps under `tmp/`.
 */
export class LocalDiskStorage implements FileStorage {
  readonly kind = 'local' as const;
  readonly root: string;
  constructor(dataDir: string) {
    this.root = join(dataDir, 'files');
  }

  pathOf(sha256: string): string {
    checkSha(sha256);
    return join(this.root, sha256.slice(0, 2), sha256.slice(2, 4), sha256);
  }

  #derivedDir(sha256: string): string {
    checkSha(sha256);
    return join(this.root, 'derived', sha256.slice(0, 2), sha256);
  }

  #stagedPath(id: string): string {
    return join(this.root, 'staged', checkStaged(id));
  }

  async #temp(dest: () => string): Promise<TempBlob & { path: string }> {
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
      path,
      write: async (chunk) => {
        if (!fh) throw new Error('temp blob closed');
        await fh.write(chunk);
      },
      commit: async (sha256) => {
        await close();
        const to = sha256 === '' ? dest() : this.pathOf(sha256);
        await mkdir(join(to, '..'), { recursive: true });
        // rename replaces atomically; the bytes are equal when the blob exists already.
        await rename(path, to);
        done = true;
      },
      discard: async () => {
        await close();
        if (!done) await rm(path, { force: true });
        done = true;
      },
    };
  }

  begin(): Promise<TempBlob> {
    return this.#temp(() => {
      throw new Error('a blob commits under its hash');
    });
  }

  async beginStaged(id: string): Promise<TempBlob> {
    const dest = this.#stagedPath(id);
    const t = await this.#temp(() => dest);
    return { write: t.write, discard: t.discard, commit: () => t.commit('') };
  }

  async #openPath(p: string): Promise<StoredObject | null> {
    const s = await stat(p).catch(() => null);
    if (!s || !s.isFile()) return null;
    return { file: Bun.file(p), size: s.size };
  }

  open(sha256: string): Promise<StoredObject | null> {
    return this.#openPath(this.pathOf(sha256));
  }

  localPath(sha256: string): string {
    return this.pathOf(sha256);
  }

  async remove(sha256: string): Promise<void> {
    await rm(this.pathOf(sha256), { force: true });
    await rm(this.#derivedDir(sha256), { recursive: true, force: true });
  }

  async putDerived(sha256: string, name: string, bytes: Uint8Array): Promise<void> {
    const dir = this.#derivedDir(sha256);
    await mkdir(dir, { recursive: true });
    // Written aside then renamed: a reader in another process never sees half an object.
    const tmp = join(dir, `.${randomBytes(8).toString('hex')}`);
    await writeFile(tmp, bytes);
    await rename(tmp, join(dir, checkDerived(name)));
  }

  openDerived(sha256: string, name: string): Promise<StoredObject | null> {
    return this.#openPath(join(this.#derivedDir(sha256), checkDerived(name)));
  }

  /** Names of the derived objects of a blob (tests, the media worker). */
  async listDerived(sha256: string): Promise<string[]> {
    return (await readdir(this.#derivedDir(sha256)).catch(() => [] as string[])).filter((n) => !n.startsWith('.'));
  }

  openStaged(id: string): Promise<StoredObject | null> {
    return this.#openPath(this.#stagedPath(id));
  }

  async commitStaged(id: string, sha256: string): Promise<void> {
    const to = this.pathOf(sha256);
    await mkdir(join(to, '..'), { recursive: true });
    await rename(this.#stagedPath(id), to);
  }

  async removeStaged(id: string): Promise<void> {
    await rm(this.#stagedPath(id), { force: true });
  }

  presignStaged(): null {
    return null;
  }
}
