import type { FilesSettings } from '../env.ts';
import type { Sql } from '../store/db.ts';
import { ImageTransformer } from './images.ts';
import { LocalDiskStorage, type FileStorage } from './storage.ts';

/**
 * What a process holds for files: the storage backend chosen by the environment (local disk
 * under SVC_DATA_DIR/files, or S3 with SVC_S3_URL), the image transformer with its bounded
 * cache, and the limits. One per process; the API listener and GraphQL share it.
 */
export interface FilesConfig extends FilesSettings {
  maxBytes: number;
  dataDir: string;
}

export class FilesRuntime {
  readonly storage: FileStorage;
  readonly images: ImageTransformer;

  constructor(readonly sql: Sql, readonly config: FilesConfig, storage?: FileStorage) {
    this.storage = storage ?? new LocalDiskStorage(config.dataDir);
    this.images = new ImageTransformer(this.storage, {
      maxInputPixels: config.maxInputPixels,
      concurrency: config.transformConcurrency,
      cacheBytes: config.variantCacheBytes,
    });
  }
}
