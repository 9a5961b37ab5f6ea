import { Mailbox } from '../actors/mailbox.ts';
import { ActorRegistry, type Actor } from '../actors/registry.ts';
import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import { Conflict } from '../errors.ts';
import {
  announce,
  applyOutcome,
  failOrRetry,
  view,
  type ExecutionRow,
  type ExecutionView,
  type Outcome,
} from './store.ts';
import { call, record, type AbortReason, type Answer, type CallDeps } from './call.ts';

/**
 * A live execution in this process, as an actor on the runtime every project, room and channel
 * runs on (src/actors/): one mailbox, so what happens to one execution here — its call being
 * claimed, the call's answer, a callback's progress or completion, a cancel, the deadline, a
 * shutdown — is handled one message at a time, in arrival order. The durable row stays the
 * truth across processes: every write is one conditional statement (a call's under this
 * worker's lease and attempt, a callback's only while the row is not finished), so an actor
 * holds no state another process needs, and a second actor for the same execution in another
 * process (the worker calling it, the API process taking its callback) cannot undo the first.
 *
 * The call itself runs beside the mailbox (it may take up to the execution's timeout): the
 * `claimed` message starts it, its answer comes back as an `answered` message.
 */
export type ExecutionMessage =
  /** This worker claimed the row (attempt `row.attempts`): call the endpoint. */
  | { kind: 'claimed'; row: ExecutionRow; deps: CallDeps; ended: () => void }
  /** The call of `row`'s attempt came back. */
  | { kind: 'answered'; row: ExecutionRow; deps: CallDeps; answer: Answer; controller: AbortController }
  /** A verified callback (progress, completion, failure) for the row as read. */
  | { kind: 'callback'; row: ExecutionRow; outcome: Outcome }
  /** Stop the call in flight, if any (cancelled or finished elsewhere, the deadline: that call only). */
  | { kind: 'stop'; reason: AbortReason; controller?: AbortController };

/** What an actor writes with besides a call's own deps (callbacks may arrive in any process). */
export interface CallbackDeps {
  sql: Sql;
  bus: EventBus;
  retryBaseMs: number;
}

interface InFlight {
  controller: AbortController;
  timer: ReturnType<typeof setTimeout>;
  ended: () => void;
}

export class ExecutionActor implements Actor {
  readonly id: string;
  readonly #deps: CallbackDeps;
  readonly #mailbox: Mailbox<ExecutionMessage, ExecutionView | void>;
  #call: InFlight | null = null;

  constructor(id: string, deps: CallbackDeps) {
    this.id = id;
    this.#deps = deps;
    this.#mailbox = new Mailbox((m) => this.#handle(m));
  }

  ask(message: ExecutionMessage): Promise<ExecutionView | void> {
    return this.#mailbox.ask(message);
  }

  tell(message: ExecutionMessage): void {
    this.#mailbox.tell(message, (err) => console.error(`operations: execution ${this.id}:`, (err as Error).message));
  }

  /** Whether a call of this execution is in flight here. */
  get calling(): boolean {
    return this.#call !== null;
  }

  canUnload(): boolean {
    return this.#call === null && this.#mailbox.pending === 0;
  }

  idleSince(): number {
    return this.#mailbox.idleSince;
  }

  async stop(): Promise<void> {
    this.#abort('shutdown');
    await this.#mailbox.close();
  }

  async #handle(m: ExecutionMessage): Promise<ExecutionView | void> {
    switch (m.kind) {
      case 'claimed': {
        // Claimed again while an earlier attempt's call still runs here (a callback sent a hook
        // back to pending): that call is stale; its answers could not apply anyway (they name
        // its attempt).
        this.#abort('superseded');
        const controller = new AbortController();
        const timer = setTimeout(() => this.tell({ kind: 'stop', reason: 'timeout', controller }), m.row.timeout_ms);
        this.#call = { controller, timer, ended: m.ended };
        void call(m.deps, m.row, controller.signal).then((answer) => {
          // A superseded or shut-down call has nothing to write (and its actor may be gone).
          if (this.#call?.controller === controller)
            this.tell({ kind: 'answered', row: m.row, deps: m.deps, answer, controller });
        });
        return;
      }
      case 'answered':
        try {
          await record(m.deps, m.row, m.answer);
        } finally {
          if (this.#call?.controller === m.controller) this.#end();
        }
        return;
      case 'callback':
        return writeCallback(this.#deps, m.row, m.outcome);
      case 'stop':
        if (m.controller && m.controller !== this.#call?.controller) return;
        this.#call?.controller.abort(m.reason);
        return;
    }
  }

  #abort(reason: AbortReason): void {
    if (!this.#call) return;
    this.#call.controller.abort(reason);
    this.#end();
  }

  #end(): void {
    const c = this.#call!;
    this.#call = null;
    clearTimeout(c.timer);
    c.ended();
  }
}

/** The live executions of a process, by id. */
export class Executions {
  readonly #registry: ActorRegistry<ExecutionActor>;

  constructor(deps: CallbackDeps, opts: { idleMs: number }) {
    this.#registry = new ActorRegistry((id) => new ExecutionActor(id, deps), { idleMs: opts.idleMs });
  }

  /** Sends to the execution's actor (spawned when it has none here) and waits for its reply. */
  async ask(id: string, message: Extract<ExecutionMessage, { kind: 'callback' }>): Promise<ExecutionView> {
    return (await (await this.#registry.get(id)).ask(message)) as ExecutionView;
  }

  async tell(id: string, message: ExecutionMessage): Promise<void> {
    (await this.#registry.get(id)).tell(message);
  }

  /** Tells the execution's actor only when it is live here (a bus event about any execution). */
  tellIfLive(id: string, message: ExecutionMessage): void {
    this.#registry.peek(id)?.tell(message);
  }

  /** Every live actor (shutdown stops their calls). */
  live(): ExecutionActor[] {
    return [...this.#registry.keys()].flatMap((k) => this.#registry.peek(k) ?? []);
  }

  get size(): number {
    return this.#registry.size;
  }

  stop(): Promise<void> {
    return this.#registry.stopAll();
  }
}

/** The callback's write (the actor's `callback` message): one conditional statement, then the event. */
export async function writeCallback(deps: CallbackDeps, row: ExecutionRow, outcome: Outcome): Promise<ExecutionView> {
  // A hook's endpoint reporting failure is retried like a failed call (back-off, dead letter).
  const moved =
    outcome.status === 'failed' && row.trigger === 'hook'
      ? await failOrRetry(deps.sql, row.id, null, 'failed', outcome.error, deps.retryBaseMs)
      : await applyOutcome(deps.sql, row.id, null, outcome);
  if (!moved) throw new Conflict(`Execution ${row.id} already finished`);
  await announce(deps.bus, [moved]);
  return view(moved);
}
