import { mkdir, rm } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open, type FileHandle } from 'node:fs/promises';
import { checkDerived, checkSha, checkStaged, type FileStorage, type StoredObject, type TempBlob } from './storage.ts';

/**
 * S3-compatible storage through Bun's built-in client (Bun.S3Client), selected by SVC_S3_URL:
 *
 * - `https://KEY:SECRET@s3.example.com/bucket[/prefix]?region=eu-west-1` — any S3-compatible
 *   endpoint (MinIO, R2, Ceph, …), path-style;
 * - `s3://KEY:SECRET@bucket[/prefix]?region=us-east-1` — AWS S3 itself.
 *
 * Without KEY:SECRET, Bun reads S3_ACCESS_KEY_ID / AWS_ACCESS_KEY_ID and their secrets. Objects:
 * `blobs/ab/<sha256>`, `derived/<sha256>/<name>`, `staged/<file id>` (two-step uploads, PUT
 * straight to the bucket with a presigned URL). A streamed upload is spooled to a local temp
 * file while it is hashed, then sent once under its hash (skipped when the blob exists).
 */
export class S3Storage implements FileStorage {
  readonly kind = 's3' as const;
  readonly #client: Bun.S3Client;
  readonly #prefix: string;
  readonly #spool: string;

  // The service passes `<data dir>/s3-spool` (src/files/runtime.ts): a spool in the shared temp dir outlived
  // every process and test that used it.
  constructor(options: Bun.S3Options, prefix = '', spool = join(tmpdir(), 'svc-s3-spool')) {
    this.#client = new Bun.S3Client(options);
    this.#prefix = prefix ? `${prefix.replace(/^\/+|\/+$/g, '')}/` : '';
    this.#spool = spool;
  }

  static fromUrl(url: string, spool?: string): S3Storage {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new Error('SVC_S3_URL must be a URL such as https://KEY:SECRET@host/bucket or s3://KEY:SECRET@bucket');
    }
    const creds = u.username
      ? { accessKeyId: decodeURIComponent(u.username), secretAccessKey: decodeURIComponent(u.password) }
      : {};
    const region = u.searchParams.get('region') ?? undefined;
    const parts = u.pathname.split('/').filter(Boolean);
    if (u.protocol === 's3:') {
      return new S3Storage({ ...creds, bucket: u.hostname, region }, parts.join('/'), spool);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new Error('SVC_S3_URL must start with https://, http:// or s3://');
    const bucket = parts.shift();
    if (!bucket) throw new Error('SVC_S3_URL must name a bucket: https://KEY:SECRET@host/bucket');
    return new S3Storage(
      { ...creds, bucket, region: region ?? 'us-east-1', endpoint: `${u.protocol}//${u.host}` },
      parts.join('/'),
      spool,
    );
  }

  #blobKey(sha256: string): string {
    checkSha(sha256);
    return `${this.#prefix}blobs/${sha256.slice(0, 2)}/${sha256}`;
  }

  #derivedKey(sha256: string, name = ''): string {
    checkSha(sha256);
    return `${this.#prefix}derived/${sha256}/${name ? checkDerived(name) : ''}`;
  }

  #stagedKey(id: string): string {
    return `${this.#prefix}staged/${checkStaged(id)}`;
  }

  async #openKey(key: string): Promise<StoredObject | null> {
    try {
      const s = await this.#client.stat(key);
      return { file: this.#client.file(key), size: s.size, remote: true };
    } catch (e) {
      if (
        (e as { code?: string }).code === 'NoSuchKey' ||
        /not found|NoSuchKey|404/i.test(String((e as Error).message))
      )
        return null;
      throw e;
    }
  }

  /** A local spool file, sent to `dest(sha)` on commit. */
  async #spooled(dest: (sha256: string) => Promise<void | string>): Promise<TempBlob> {
    await mkdir(this.#spool, { recursive: true });
    const path = join(this.#spool, randomBytes(16).toString('hex'));
    let fh: FileHandle | null = await open(path, 'wx');
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
        const key = await dest(sha256);
        if (typeof key === 'string') await this.#client.write(key, Bun.file(path));
        await rm(path, { force: true });
      },
      discard: async () => {
        await close();
        await rm(path, { force: true });
      },
    };
  }

  begin(): Promise<TempBlob> {
    return this.#spooled(async (sha256) => {
      const key = this.#blobKey(sha256);
      return (await this.#client.exists(key)) ? undefined : key;
    });
  }

  beginStaged(id: string): Promise<TempBlob> {
    const key = this.#stagedKey(id);
    return this.#spooled(async () => key);
  }

  open(sha256: string): Promise<StoredObject | null> {
    return this.#openKey(this.#blobKey(sha256));
  }

  localPath(): null {
    return null;
  }

  async remove(sha256: string): Promise<void> {
    await this.#client.delete(this.#blobKey(sha256));
    const prefix = this.#derivedKey(sha256);
    for (;;) {
      const page = await this.#client.list({ prefix, maxKeys: 1000 });
      const keys = (page.contents ?? []).map((c) => c.key);
      for (const k of keys) await this.#client.delete(k);
      if (!page.isTruncated || keys.length === 0) break;
    }
  }

  async putDerived(sha256: string, name: string, bytes: Uint8Array): Promise<void> {
    await this.#client.write(this.#derivedKey(sha256, name), bytes);
  }

  openDerived(sha256: string, name: string): Promise<StoredObject | null> {
    return this.#openKey(this.#derivedKey(sha256, name));
  }

  openStaged(id: string): Promise<StoredObject | null> {
    return this.#openKey(this.#stagedKey(id));
  }

  async commitStaged(id: string, sha256: string): Promise<void> {
    const from = this.#stagedKey(id);
    const to = this.#blobKey(sha256);
    if (!(await this.#client.exists(to))) await this.#client.write(to, this.#client.file(from));
    await this.#client.delete(from);
  }

  async removeStaged(id: string): Promise<void> {
    await this.#client.delete(this.#stagedKey(id));
  }

  presignStaged(id: string, _contentType: string, expiresInSec: number): string {
    return this.#client.file(this.#stagedKey(id)).presign({ method: 'PUT', expiresIn: expiresInSec });
  }
}
