import { randomUUID } from 'node:crypto';
import type { Sql } from '../store/db.ts';

/**
 * The event bus. Events are delivered to local subscribers at once and, through PostgreSQL
 * LISTEN/NOTIFY, to every other process on the same database, so several processes behave
 * as one service (CONTRACT §2). A process ignores the echo of its own notifications.
 */
export type BusEvent =
  | { type: 'schema.changed'; projectId: string; version: number }
  | { type: 'project.changed'; projectId: string }
  | {
      type: 'record.changed';
      projectId: string;
      action: 'created' | 'updated' | 'published' | 'unpublished' | 'deleted';
      recordId: string;
      modelKey: string;
      userId: string | null;
    }
  | { type: 'key.changed'; keyId: string; keyHash: string | null }
  | { type: 'custom'; topic: string; projectId: string; data: Record<string, unknown> };

type Listener = (event: BusEvent) => void;

const CHANNEL = 'svc_bus';

export class EventBus {
  readonly origin = randomUUID();
  readonly #listeners = new Set<Listener>();
  readonly #reconnectListeners = new Set<() => void>();
  #notify: ((channel: string, payload: string) => Promise<unknown>) | undefined;
  #unlisten: (() => Promise<void>) | undefined;

  /**
   * Bridges to PostgreSQL; without it the bus is process-local. LISTEN runs on postgres.js;
   * NOTIFY may go through another pool (`notify`): every record write sends one, and Bun's
   * native client sends them at a fraction of postgres.js' CPU cost (docs/decisions.md).
   */
  async attach(sql: Sql, notify?: (channel: string, payload: string) => Promise<unknown>): Promise<void> {
    this.#notify = notify ?? ((channel, payload) => sql`select pg_notify(${channel}, ${payload})`);
    let listened = false;
    const sub = await sql.listen(CHANNEL, (payload) => {
      let msg: { origin: string; event: BusEvent };
      try {
        msg = JSON.parse(payload);
      } catch {
        return;
      }
      if (msg.origin !== this.origin) this.#deliver(msg.event);
    }, () => {
      // postgres.js calls this after the first LISTEN and after every reconnect of the listener
      // connection; notifications sent while it was down are lost, so caches must start over.
      if (listened) this.#reconnected();
      listened = true;
    });
    this.#unlisten = () => sub.unlisten();
  }

  /** Called whenever the LISTEN connection comes back after a drop (events may have been missed). */
  onReconnect(listener: () => void): () => void {
    this.#reconnectListeners.add(listener);
    return () => this.#reconnectListeners.delete(listener);
  }

  #reconnected(): void {
    for (const l of this.#reconnectListeners) {
      try {
        l();
      } catch (err) {
        console.error('bus reconnect listener failed:', err instanceof Error ? err.message : err);
      }
    }
  }

  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Delivers locally now and to other processes after the NOTIFY. */
  async publish(event: BusEvent): Promise<void> {
    this.#deliver(event);
    if (this.#notify) await this.#notify(CHANNEL, JSON.stringify({ origin: this.origin, event }));
  }

  async detach(): Promise<void> {
    await this.#unlisten?.();
    this.#unlisten = undefined;
    this.#notify = undefined;
  }

  #deliver(event: BusEvent): void {
    for (const l of this.#listeners) {
      try {
        l(event);
      } catch (err) {
        console.error('bus listener failed:', err instanceof Error ? err.message : err);
      }
    }
  }
}
