import type { EventBus } from '../bus/bus.ts';
import type { Sql } from '../store/db.ts';
import { ByteLru } from './images.ts';
import { liveFile, type FileRow } from './store.ts';

/**
 * Live file rows for delivery, cached per process: a file URL GET would otherwise cost a
 * PostgreSQL round trip each (bench/RESULTS.md, `files`). Every change that can turn a URL into
 * a 404 or change what it serves (soft delete, restore, permanent delete, the retention sweep,
 * a media job) publishes `files.changed` on the bus, which reaches every process; an entry is
 * dropped when its event arrives, everything on a bus reconnect (events may have been missed),
 * and an entry older than MAX_AGE_MS is read again in any case. Bounded in bytes (an estimate
 * per row); unknown ids are never cached.
 */
const ROW_BYTES = 600;
const MAX_AGE_MS = 30_000;

export class LiveFiles {
  readonly #rows: ByteLru<{ row: FileRow; at: number; byteLength: number }>;
  readonly #off: (() => void)[];

  constructor(
    readonly sql: Sql,
    bus: EventBus,
    maxBytes = 4 * 1024 * 1024,
  ) {
    this.#rows = new ByteLru(maxBytes);
    this.#off = [
      bus.subscribe((e) => {
        if (e.type === 'custom' && e.topic === 'files.changed') {
          const id = e.data.fileId;
          if (typeof id === 'string') this.#rows.deletePrefix(id);
          else this.#rows.deletePrefix('');
        }
      }),
      bus.onReconnect(() => this.#rows.deletePrefix('')),
    ];
  }

  async get(id: string): Promise<FileRow | null> {
    const hit = this.#rows.get(id);
    if (hit && Date.now() - hit.at < MAX_AGE_MS) return hit.row;
    const row = await liveFile(this.sql, id);
    if (row) this.#rows.set(id, { row, at: Date.now(), byteLength: ROW_BYTES });
    return row;
  }

  close(): void {
    for (const off of this.#off) off();
  }
}
