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
/** NOTIFY payloads must stay under 8,000 bytes; leave room for the envelope. */
const PAYLOAD_BUDGET = 7_500;

export class EventBus {
  readonly origin = randomUUID();
  readonly #listeners = new Set<Listener>();
  readonly #reconnectListeners = new Set<() => void>();
  #notify: ((channel: string, payload: string) => Promise<unknown>) | undefined;
  #unlisten: (() => Promise<void>) | undefined;
  #watchdog: ReturnType<typeof setInterval> | undefined;
  #lastHeard = Date.now();

  /**
   * Bridges to PostgreSQL; without it the bus is process-local. LISTEN runs on postgres.js;
   * NOTIFY may go through another pool (`notify`): every record write sends one, and Bun's
   * native client sends them at a fraction of postgres.js' CPU cost (docs/decisions.md).
   *
   * A watchdog pings the channel every `watchdogMs`: postgres.js re-runs LISTEN once after its
   * connection drops and gives up silently if the server is still away, so a listener that has
   * heard nothing (not even its own pings) for a few rounds is re-created, and caches start over.
   */
  async attach(sql: Sql, notify?: (channel: string, payload: string) => Promise<unknown>, opts: { watchdogMs?: number } = {}): Promise<void> {
    this.#notify = notify ?? ((channel, payload) => sql`select pg_notify(${channel}, ${payload})`);
    await this.#listen(sql);
    const every = opts.watchdogMs ?? 5_000;
    this.#lastHeard = Date.now();
    this.#watchdog = setInterval(() => void this.#checkListener(sql, every), every);
    this.#watchdog.unref?.();
  }

  async #listen(sql: Sql): Promise<void> {
    let listened = false;
    const sub = await sql.listen(CHANNEL, (payload) => {
      this.#lastHeard = Date.now();
      let msg: { origin: string; events?: BusEvent[] };
      try {
        msg = JSON.parse(payload);
      } catch {
        return;
      }
      if (msg.origin !== this.origin && Array.isArray(msg.events)) for (const e of msg.events) this.#deliver(e);
    }, () => {
      // postgres.js calls this after the first LISTEN and after every reconnect of the listener
      // connection; notifications sent while it was down are lost, so caches must start over.
      if (listened) this.#reconnected();
      listened = true;
    });
    this.#unlisten = () => sub.unlisten();
  }

  async #checkListener(sql: Sql, every: number): Promise<void> {
    if (!this.#notify) return;
    if (Date.now() - this.#lastHeard > every * 3) {
      try {
        await this.#unlisten?.().catch(() => {});
        await this.#listen(sql);
        this.#lastHeard = Date.now();
        this.#reconnected();
      } catch {
        return; // the server is still away; the next round tries again
      }
    }
    await this.#notify(CHANNEL, JSON.stringify({ origin: this.origin, ping: true })).catch(() => {});
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
  publish(event: BusEvent): Promise<void> {
    return this.publishAll([event]);
  }

  /**
   * Several events in order (a committed batch of writes): delivered locally one by one, and
   * sent in as few NOTIFYs as fit PostgreSQL's 8,000-byte payload limit.
   */
  async publishAll(events: readonly BusEvent[]): Promise<void> {
    for (const e of events) this.#deliver(e);
    if (!this.#notify) return;
    let chunk: string[] = [];
    let size = 0;
    const send = async () => {
      if (chunk.length) await this.#notify!(CHANNEL, `{"origin":${JSON.stringify(this.origin)},"events":[${chunk.join(',')}]}`);
      chunk = [];
      size = 0;
    };
    for (const e of events) {
      const text = JSON.stringify(e);
      if (size + text.length > PAYLOAD_BUDGET) await send();
      chunk.push(text);
      size += text.length + 1;
    }
    await send();
  }

  async detach(): Promise<void> {
    if (this.#watchdog) clearInterval(this.#watchdog);
    this.#watchdog = undefined;
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
