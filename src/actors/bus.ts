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
  #sql: Sql | undefined;
  #unlisten: (() => Promise<void>) | undefined;

  /** Bridges to PostgreSQL; without it the bus is process-local. */
  async attach(sql: Sql): Promise<void> {
    this.#sql = sql;
    const sub = await sql.listen(CHANNEL, (payload) => {
      let msg: { origin: string; event: BusEvent };
      try {
        msg = JSON.parse(payload);
      } catch {
        return;
      }
      if (msg.origin !== this.origin) this.#deliver(msg.event);
    });
    this.#unlisten = () => sub.unlisten();
  }

  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Delivers locally now and to other processes after the NOTIFY. */
  async publish(event: BusEvent): Promise<void> {
    this.#deliver(event);
    if (this.#sql) {
      await this.#sql`select pg_notify(${CHANNEL}, ${JSON.stringify({ origin: this.origin, event })})`;
    }
  }

  async detach(): Promise<void> {
    await this.#unlisten?.();
    this.#unlisten = undefined;
    this.#sql = undefined;
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
