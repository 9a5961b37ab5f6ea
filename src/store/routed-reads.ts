import { read } from './coalesce.ts';
import type { ContentSql } from './db.ts';

export type ReplicaState = 'up' | 'lagging' | 'down';

/** What routed reads need of their router (replicas.ts ReadReplicas). */
export interface ReadRouter {
  readonly primary: ContentSql;
  waitFor(lsn: number): Promise<Replica | undefined>;
  failed(replica: Replica, err: unknown): void;
  route(projectId: string): RoutedReads;
}

/**
 * SQLSTATEs that are the replica's trouble, not the statement's: connection (08), conflict with
 * recovery (40001), operator intervention such as a shutdown (57), server resources (53).
 */
const RETRY_ON_PRIMARY = /^(08|40001|57|53)/;

function sqlState(err: unknown): string | undefined {
  const e = err as { errno?: unknown; code?: unknown };
  if (typeof e?.errno === 'string' && /^[0-9A-Z]{5}$/.test(e.errno)) return e.errno;
  if (typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
  return undefined;
}

/**
 * A pool content reads can run on (content/db.ts `run` takes it beside a plain pool): the
 * replica's, falling back to the primary's when the replica fails it (down, shutting down, the
 * read cancelled by replay), so a replica that dies under a read costs the read a second round
 * trip, never an error. A statement's own error is the client's, as on the primary.
 */
export class RoutedReads {
  constructor(
    readonly replica: Replica | undefined,
    private readonly owner: ReadRouter,
    /** Set for a read that must wait for a replica to reach this position first. */
    private readonly waitFor?: number,
  ) {}

  async run<T>(text: string, params: unknown[]): Promise<T[]> {
    let replica = this.replica;
    if (!replica && this.waitFor !== undefined) replica = await this.owner.waitFor(this.waitFor);
    if (!replica) return read<T>(this.owner.primary, text, params);
    try {
      return await read<T>(replica.sql, text, params);
    } catch (err) {
      // The statement's own error (a bad pattern in a filter…) would fail on the primary too.
      const state = sqlState(err);
      if (state && !RETRY_ON_PRIMARY.test(state)) throw err;
      // The replica's: unreachable, shutting down, or the read cancelled by replay.
      if (!state || !state.startsWith('40')) this.owner.failed(replica, err);
      return read<T>(this.owner.primary, text, params);
    }
  }
}

/**
 * Reads of a long-lived context (a subscription's, resolved again for every event): routed
 * afresh for each statement, so each event's reads honour the floor its change raised.
 */
export class LiveReads extends RoutedReads {
  constructor(
    private readonly projectId: string,
    private readonly replicas: ReadRouter,
  ) {
    super(undefined, replicas);
  }

  override run<T>(text: string, params: unknown[]): Promise<T[]> {
    return this.replicas.route(this.projectId).run<T>(text, params);
  }
}

export class Replica {
  state: ReplicaState = 'down';
  replayLsn = 0;
  lagMs = 0;
  lagBytes = 0;
  /** Reads served (counted when chosen) and reads that fell back to the primary after failing here. */
  reads = 0;
  fallbacks = 0;
  lastError: string | undefined;
  polling = false;
  readonly reader: RoutedReads;
  constructor(
    readonly name: string,
    readonly sql: ContentSql,
    owner: ReadRouter,
  ) {
    this.reader = new RoutedReads(this, owner);
  }
}
