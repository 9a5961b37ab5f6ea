import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import type { OperationsSettings, Role } from '../env.ts';
import { SigningSecrets } from './signing.ts';
import { Dispatcher } from './dispatcher.ts';
import { Scheduler } from './scheduler.ts';
import { Executions } from './execution-actor.ts';

/** Read with the other settings in src/env.ts. */
export type { OperationsSettings };

/** How long an execution's actor stays after its last message (the row is the truth; this only saves a spawn). */
const EXECUTION_IDLE_MS = 10_000;

/**
 * What a process runs of operations: the signing secrets (every process: API processes check
 * callbacks), and in processes with role `all` or `worker` the dispatcher and the scheduler.
 */
export class OperationsRuntime {
  readonly secrets: SigningSecrets;
  /** This process's live executions (actors): calls here, callbacks received here. */
  readonly executions: Executions;
  readonly dispatcher: Dispatcher | null;
  readonly scheduler: Scheduler | null;
  /** First hook retry back-off (callbacks reporting a failed hook retry it too). */
  readonly retryBaseMs: number;
  readonly #settings: OperationsSettings;
  readonly #unsubscribe: () => void;

  constructor(deps: {
    sql: Sql;
    bus: EventBus;
    dataDir: string;
    baseUrl: string;
    role: Role;
    settings: OperationsSettings;
  }) {
    const { sql, bus, settings } = deps;
    this.#settings = settings;
    this.retryBaseMs = settings.retryBaseMs;
    this.secrets = new SigningSecrets(sql, deps.dataDir);
    // An actor lives while its call is in flight, then as long as callbacks keep coming.
    this.executions = new Executions({ sql, bus, retryBaseMs: settings.retryBaseMs }, { idleMs: EXECUTION_IDLE_MS });
    const works = deps.role === 'all' || deps.role === 'worker';
    this.dispatcher = works
      ? new Dispatcher(
          {
            sql,
            bus,
            secrets: this.secrets,
            policy: { publicOnly: settings.publicOnly },
            baseUrl: deps.baseUrl,
            retryBaseMs: settings.retryBaseMs,
          },
          this.executions,
          {
            leaseMs: settings.leaseMs,
            leaseAttempts: settings.leaseAttempts,
            pollMs: settings.pollMs,
            projectConcurrency: settings.projectConcurrency,
            capacity: settings.capacity,
          },
        )
      : null;
    this.scheduler = works ? new Scheduler(sql, bus) : null;
    // A rotation in any process: drop the cached secrets of that project.
    this.#unsubscribe = bus.subscribe((e) => {
      if (e.type === 'custom' && e.topic === 'operations.signing-secret') this.secrets.forget(e.projectId);
    });
  }

  setBaseUrl(url: string): void {
    this.dispatcher?.setBaseUrl(url);
  }

  start(): void {
    this.dispatcher?.start();
    this.scheduler?.start(this.#settings.scheduleTickMs);
  }

  async stop(): Promise<void> {
    this.#unsubscribe();
    await Promise.all([this.dispatcher?.stop(), this.scheduler?.stop()]);
    await this.executions.stop();
  }
}
