import { join } from 'node:path';
import type { FilesSettings, Role } from '../env.ts';
import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import { ImageTransformer } from './images.ts';
import { LocalDiskStorage, type FileStorage } from './storage.ts';
import type { LimitDefaults } from './limits.ts';
import { sweepUploads, type SignedDeps } from './signed.ts';
import { sweepDeleted } from './lifecycle.ts';
import { claimJob, ffmpegAvailable, processJob } from './media.ts';
import { S3Storage } from './s3.ts';
import { LiveFiles } from './live.ts';

/**
 * What a process holds for files: the storage backend chosen by the environment (local disk
 * under SVC_DATA_DIR/files, or S3 with SVC_S3_URL), the image transformer with its bounded
 * cache, and the limits. One per process; the API listener and GraphQL share it. Processes
 * with role `all` or `worker` also run the media jobs (one at a time) and the sweeps
 * (retention of soft deletes, expired two-step uploads).
 */
export interface FilesConfig extends FilesSettings {
  maxBytes: number;
  dataDir: string;
  role: Role;
}

const SWEEP_MS = 10 * 60_000;

export class FilesRuntime {
  readonly storage: FileStorage;
  readonly images: ImageTransformer;
  readonly limitDefaults: LimitDefaults;
  readonly signedDeps: SignedDeps;
  readonly live: LiveFiles;
  #timers: ReturnType<typeof setTimeout>[] = [];
  #stopped = false;
  #working: Promise<unknown> = Promise.resolve();
  #ffmpeg: Promise<boolean> | null = null;

  constructor(
    readonly sql: Sql,
    readonly bus: EventBus,
    readonly config: FilesConfig,
    storage?: FileStorage,
  ) {
    this.storage =
      storage ??
      (config.s3Url
        ? S3Storage.fromUrl(config.s3Url, join(config.dataDir, 's3-spool'))
        : new LocalDiskStorage(config.dataDir));
    this.images = new ImageTransformer(this.storage, {
      maxInputPixels: config.maxInputPixels,
      concurrency: config.transformConcurrency,
      cacheBytes: config.variantCacheBytes,
    });
    this.limitDefaults = {
      maxBytes: config.maxBytes,
      quotaBytes: config.quotaBytes,
      retentionDays: config.retentionDays,
    };
    this.signedDeps = {
      sql,
      storage: this.storage,
      limits: this.limitDefaults,
      maxInputPixels: config.maxInputPixels,
      ttlSec: config.uploadUrlTtlSec,
    };
    this.live = new LiveFiles(sql, bus);
  }

  start(): void {
    if (this.config.role !== 'all' && this.config.role !== 'worker') return;
    this.#loop(() => this.#jobs(), this.config.jobPollMs);
    this.#loop(() => this.sweep(), SWEEP_MS, 5_000);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.live.close();
    for (const t of this.#timers) clearTimeout(t);
    await this.#working.catch(() => {});
  }

  /** Runs the retention and upload sweeps once (tests call it; workers every 10 minutes). */
  async sweep(): Promise<{ files: number; uploads: number }> {
    const files = await sweepDeleted(this.sql, this.storage, this.config.retentionDays, (f) =>
      this.bus.publish({ type: 'custom', topic: 'files.changed', projectId: f.project_id, data: { fileId: f.id } }),
    );
    const uploads = await sweepUploads(this.sql, this.storage);
    return { files, uploads };
  }

  #loop(fn: () => Promise<unknown>, everyMs: number, firstMs = everyMs): void {
    const tick = () => {
      if (this.#stopped) return;
      this.#working = fn()
        .catch(() => {})
        .finally(() => {
          if (!this.#stopped) this.#timers.push(setTimeout(tick, everyMs));
        });
    };
    this.#timers.push(setTimeout(tick, firstMs));
    if (this.#timers.length > 16) this.#timers = this.#timers.slice(-4);
  }

  async #jobs(): Promise<void> {
    for (let job = await claimJob(this.sql); job && !this.#stopped; job = await claimJob(this.sql)) {
      // Looked for once, when the first job arrives.
      this.#ffmpeg ??= ffmpegAvailable(this.config.ffmpeg);
      const available = await this.#ffmpeg;
      const changed = await processJob(
        { sql: this.sql, storage: this.storage, ffmpeg: this.config.ffmpeg, available },
        job,
      );
      if (changed)
        await this.bus.publish({
          type: 'custom',
          topic: 'files.changed',
          projectId: job.project_id,
          data: { fileId: job.file_id },
        });
    }
  }
}
