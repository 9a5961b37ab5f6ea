import { Mailbox } from './mailbox.ts';
import type { Actor } from './registry.ts';
import type { Sql } from '../store/db.ts';
import type { ModelDef } from '../models/types.ts';
import { NotFound } from '../errors.ts';

/** An immutable view of a project: replaced, never mutated, when the project changes. */
export interface ProjectSnapshot {
  id: string;
  tenantId: string;
  name: string;
  fleetGroupId: string | null;
  settings: Record<string, unknown>;
  defaultLocale: string;
  schemaVersion: number;
  models: readonly ModelDef[];
}

type ProjectMessage = { type: 'reload' } | { type: 'run'; work: (p: ProjectActor) => unknown };

/**
 * Owns a project's in-memory state: its snapshot (models, schema version) and caches derived
 * from it (generated schemas, compiled queries) in `derived`, which is emptied whenever the
 * schema version moves. Reloads go through the mailbox so they never interleave.
 */
export class ProjectActor implements Actor {
  readonly id: string;
  readonly #sql: Sql;
  readonly #mailbox: Mailbox<ProjectMessage, unknown>;
  #snapshot: ProjectSnapshot | undefined;
  #lastUse = Date.now();
  /** Per-schema-version caches owned by later layers (schemas per key restriction, etc.). */
  readonly derived = new Map<string, unknown>();

  constructor(id: string, sql: Sql) {
    this.id = id;
    this.#sql = sql;
    this.#mailbox = new Mailbox((m) => this.#handle(m));
  }

  static async spawn(id: string, sql: Sql): Promise<ProjectActor> {
    const actor = new ProjectActor(id, sql);
    await actor.reload();
    // An unknown id must not leave an empty actor in the registry (a failed spawn is not kept).
    if (!actor.#snapshot) throw new NotFound('Project not found');
    return actor;
  }

  /** The current snapshot; throws NotFound once the project is gone. */
  get snapshot(): ProjectSnapshot {
    this.#lastUse = Date.now();
    if (!this.#snapshot) throw new NotFound('Project not found');
    return this.#snapshot;
  }

  reload(): Promise<void> {
    return this.#mailbox.ask({ type: 'reload' }) as Promise<void>;
  }

  /** Runs work serialised with every other message of this project (a per-project mutex). */
  run<T>(work: (p: ProjectActor) => T | Promise<T>): Promise<T> {
    return this.#mailbox.ask({ type: 'run', work }) as Promise<T>;
  }

  /** Called from the bus: another process (or this one) changed the project. */
  onChanged(version?: number): void {
    if (version !== undefined && this.#snapshot && this.#snapshot.schemaVersion >= version) return;
    this.#mailbox.tell({ type: 'reload' });
  }

  canUnload(): boolean {
    return this.#mailbox.pending === 0;
  }

  idleSince(): number {
    return Math.max(this.#lastUse, this.#mailbox.idleSince);
  }

  async stop(): Promise<void> {
    await this.#mailbox.close();
    this.derived.clear();
  }

  async #handle(m: ProjectMessage): Promise<unknown> {
    if (m.type === 'run') return m.work(this);
    await this.#load();
    return undefined;
  }

  async #load(): Promise<void> {
    const [row] = await this.#sql<
      {
        id: string;
        tenant_id: string;
        name: string;
        fleet_group_id: string | null;
        settings: Record<string, unknown>;
        default_locale: string;
        schema_version: number;
      }[]
    >`select id, tenant_id, name, fleet_group_id, settings, default_locale, schema_version
      from projects where id = ${this.id}`;
    if (!row) {
      this.#snapshot = undefined;
      this.derived.clear();
      return;
    }
    const models = await this.#sql<{ definition: ModelDef }[]>`
      select definition from models where project_id = ${this.id} order by position, key`;
    const before = this.#snapshot?.schemaVersion;
    this.#snapshot = Object.freeze({
      id: row.id,
      tenantId: row.tenant_id,
      name: row.name,
      fleetGroupId: row.fleet_group_id,
      settings: row.settings,
      defaultLocale: row.default_locale,
      schemaVersion: row.schema_version,
      models: Object.freeze(models.map((m) => m.definition)),
    });
    if (before !== row.schema_version) this.derived.clear();
  }
}
