import { Mailbox } from '../actors/mailbox.ts';
import type { Actor } from '../actors/registry.ts';
import type { Sql } from '../store/db.ts';
import type { ModelDef } from './types.ts';
import { NotFound } from '../errors.ts';
import { fleetModels, fleetShapeKey } from './fleet-models.ts';
import { loadTrusted, type TrustedDocument } from '../documents/store.ts';

/** An immutable view of a project: replaced, never mutated, when the project changes. */
export interface ProjectSnapshot {
  id: string;
  tenantId: string;
  name: string;
  fleetGroupId: string | null;
  /** The fleet group version the project is pinned to (null outside a group). */
  fleetSchemaVersion: number | null;
  /**
   * Set for fleet members: projects with the same shape key serve the same GraphQL API, so they
   * share generated schemas and compiled queries (src/graphql/schema-entries.ts). Null: per project.
   */
  shapeKey: string | null;
  settings: Record<string, unknown>;
  defaultLocale: string;
  schemaVersion: number;
  models: readonly ModelDef[];
  /** Pushed operations (src/operations): `execute<Op>` fields are generated from them. */
  operations: readonly OperationDef[];
  /** Pushed hooks: record writes queue their executions in the same transaction. */
  hooks: readonly HookDef[];
  /** Active segments in config order (targeting: content/targeting.ts evaluates their rules). */
  segments: readonly { key: string; rules: unknown }[];
  /** Trusted documents by SHA-256 hex (src/documents; bounded in count and bytes per project). */
  documents: ReadonlyMap<string, TrustedDocument>;
}

export interface OperationDef {
  key: string;
  name: string | null;
  description: string | null;
}

export interface HookDef {
  key: string;
  event: string;
  operationKey: string;
  modelKey: string | null;
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

  /** The snapshot if loaded, without counting as a use (bus handlers looking for members). */
  get current(): ProjectSnapshot | undefined {
    return this.#snapshot;
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
        fleet_schema_version: number | null;
      }[]
    >`select id, tenant_id, name, fleet_group_id, settings, default_locale, schema_version, fleet_schema_version
      from projects where id = ${this.id}`;
    if (!row) {
      this.#snapshot = undefined;
      this.derived.clear();
      return;
    }
    // A fleet member serves its group's published models, shared with the other members.
    const fleet = row.fleet_group_id !== null && row.fleet_schema_version !== null;
    const models: readonly ModelDef[] = fleet
      ? await fleetModels(this.#sql, row.fleet_group_id!, row.fleet_schema_version!)
      : Object.freeze(
          (
            await this.#sql<
              { definition: ModelDef }[]
            >`select definition from models where project_id = ${this.id} order by position, key`
          ).map((m) => m.definition),
        );
    const operations = await this.#sql<OperationDef[]>`
      select key, name, definition->>'description' as description from operations where project_id = ${this.id} order by position, key`;
    const hooks = await this.#sql<{ key: string; event: string; operation_key: string; model_key: string | null }[]>`
      select key, event, operation_key, model_key from hooks where project_id = ${this.id} order by position, key`;
    const segments = await this.#sql<{ key: string; rules: unknown }[]>`
      select key, definition->'rules' as rules from segments where project_id = ${this.id} and is_active order by position, key`;
    const documents = new Map((await loadTrusted(this.#sql, this.id)).map((d) => [d.hash, Object.freeze(d)] as const));
    const before = this.#snapshot;
    const ops = Object.freeze(operations.map((o) => ({ key: o.key, name: o.name, description: o.description })));
    this.#snapshot = Object.freeze({
      id: row.id,
      tenantId: row.tenant_id,
      name: row.name,
      fleetGroupId: row.fleet_group_id,
      fleetSchemaVersion: fleet ? row.fleet_schema_version : null,
      shapeKey: fleet ? fleetShapeKey(row.fleet_group_id!, row.fleet_schema_version!, ops) : null,
      settings: row.settings,
      defaultLocale: row.default_locale,
      schemaVersion: row.schema_version,
      models,
      operations: ops,
      hooks: Object.freeze(
        hooks.map((h) => ({ key: h.key, event: h.event, operationKey: h.operation_key, modelKey: h.model_key })),
      ),
      segments: Object.freeze(segments.map((g) => ({ key: g.key, rules: g.rules }))),
      documents,
    });
    // Generated schemas hold the execute<Op> fields: a changed operation list invalidates them too.
    if (
      before?.schemaVersion !== row.schema_version ||
      JSON.stringify(before.operations) !== JSON.stringify(this.#snapshot.operations)
    )
      this.derived.clear();
  }
}
