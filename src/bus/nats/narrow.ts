import { type JetStreamClient, type Msg, type NatsConnection, type Subscription } from 'nats';
import { decodeWire, outboxIdOf, projectToken, type Wire } from './wire.ts';
import { readBack } from './readback.ts';

/**
 * How a gateway hears the NATS bus: plain NATS subscriptions to the deployment-wide subjects
 * and to each watched project's (`<prefix>.<project>.>`), so the server routes it only what its
 * clients need instead of every project's events. Plain subscriptions lose what is published
 * while this connection is away; after a reconnect (or a slow-consumer drop) the gap is read
 * back from the JetStream stream, from a little before the drop, while live messages wait, and
 * everything already heard is skipped by its outbox id — so a process that stays up hears every
 * event of its projects once, in order.
 */
const SEEN = 50_000;
/** Read back from this long before the drop (clock and in-flight margin). */
const MARGIN_MS = 2_000;

export class NarrowListener {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #stream: string;
  readonly #prefix: string;
  readonly #hear: (wire: Wire, msgId: string | undefined) => void;
  readonly #subs = new Map<string, Subscription>();
  /** Outbox ids heard recently, oldest first (Set keeps insertion order). */
  readonly #seen = new Set<number>();
  #held: Msg[] | undefined;
  #recovering: Promise<void> | undefined;

  constructor(
    nc: NatsConnection,
    js: JetStreamClient,
    stream: string,
    prefix: string,
    hear: (wire: Wire, msgId: string | undefined) => void,
  ) {
    this.#nc = nc;
    this.#js = js;
    this.#stream = stream;
    this.#prefix = prefix;
    this.#hear = hear;
  }

  async start(): Promise<void> {
    this.#subscribe(`${this.#prefix}._.>`);
    await this.#nc.flush();
  }

  async watch(projectId: string): Promise<void> {
    this.#subscribe(`${this.#prefix}.${projectToken(projectId)}.>`);
    // Once the server has the subscription, whatever is published next reaches us.
    await this.#nc.flush();
  }

  unwatch(projectId: string): void {
    const subject = `${this.#prefix}.${projectToken(projectId)}.>`;
    this.#subs.get(subject)?.unsubscribe();
    this.#subs.delete(subject);
  }

  /** Messages may have been missed since `since` (ms): read them back from the stream. */
  gap(since: number): void {
    if (this.#recovering) return;
    this.#held ??= [];
    this.#recovering = this.#recover(since)
      .catch((err) =>
        console.error('bus: could not read back missed events:', err instanceof Error ? err.message : err),
      )
      .finally(() => {
        const held = this.#held ?? [];
        this.#held = undefined;
        this.#recovering = undefined;
        for (const m of held) this.#take(m);
      });
  }

  stop(): void {
    for (const s of this.#subs.values()) s.unsubscribe();
    this.#subs.clear();
  }

  #subscribe(subject: string): void {
    if (this.#subs.has(subject)) return;
    this.#subs.set(
      subject,
      this.#nc.subscribe(subject, {
        callback: (err, m) => {
          if (err) return;
          if (this.#held) this.#held.push(m);
          else this.#take(m);
        },
      }),
    );
  }

  /** Whether a subject is one we subscribe to: `<prefix>.<token>.…` with `<token>.>` held (one lookup, not a scan). */
  #wanted(subject: string): boolean {
    const rest = subject.slice(this.#prefix.length + 1);
    const dot = rest.indexOf('.');
    return dot > 0 && this.#subs.has(`${this.#prefix}.${rest.slice(0, dot)}.>`);
  }

  #take(m: { subject: string; data: Uint8Array; headers?: { get(k: string): string } }): void {
    const msgId = m.headers?.get('Nats-Msg-Id');
    const id = outboxIdOf(msgId);
    if (id !== undefined) {
      if (this.#seen.has(id)) return;
      this.#seen.add(id);
      if (this.#seen.size > SEEN) this.#seen.delete(this.#seen.values().next().value!);
    }
    const wire = decodeWire(m.data);
    if (wire) this.#hear(wire, msgId);
  }

  async #recover(since: number): Promise<void> {
    await readBack(this.#js, this.#stream, `${this.#prefix}.>`, since - MARGIN_MS, (m) => {
      if (this.#wanted(m.subject)) this.#take(m);
    });
  }
}
