import type { Sql } from './store/db.ts';
import type { EventBus } from './bus/bus.ts';
import type { ActorRegistry } from './actors/registry.ts';
import type { ProjectActor } from './projects/actor.ts';
import type { Gate } from './auth/gate.ts';
import { graphqlCacheStats } from './graphql/lru.ts';
import type { MetricsRegistry } from './metrics/registry.ts';
import { poolConnections } from './store/pools.ts';
import type { ReadReplicas } from './store/replicas.ts';
import { coalescerOf, type ReadCoalescer } from './store/coalesce.ts';
import type { ContentSql } from './store/db.ts';

/**
 * The series of the parts the Service owns (service.ts): GraphQL caches, the response cache, the
 * gate, the bus, project actors, database pools and read replicas. Capabilities register theirs
 * (channels, rooms, executions) on the same registry.
 */

/** The series the core owns; capabilities add theirs (channels, rooms, executions) next to them. */
export function registerCoreMetrics(
  m: MetricsRegistry,
  parts: {
    sql: Sql;
    bus: EventBus;
    projects: ActorRegistry<ProjectActor>;
    gate: Gate;
    cacheStats: { hits: number; misses: number };
  },
): void {
  const { sql, bus, projects, gate, cacheStats } = parts;
  // The GraphQL caches (documents, responses) share one byte budget per process (graphql/lru.ts).
  const kinds = () => Object.entries(graphqlCacheStats().kinds);
  m.gauge(
    'svc_graphql_cache_entries',
    'Entries of the GraphQL caches by kind.',
    () => kinds().map(([k, v]) => [[k], v.entries] as const),
    ['kind'],
  );
  m.gauge(
    'svc_graphql_cache_bytes',
    'Estimated bytes of the GraphQL caches by kind.',
    () => kinds().map(([k, v]) => [[k], v.bytes] as const),
    ['kind'],
  );
  m.gauge(
    'svc_graphql_cache_budget_bytes',
    'The byte budget all GraphQL caches share (SVC_GRAPHQL_CACHE_MB).',
    () => graphqlCacheStats().budgetBytes,
  );
  m.counterFrom(
    'svc_graphql_cache_evictions_total',
    'Entries evicted to stay within the byte budget.',
    () => graphqlCacheStats().evictions,
  );
  m.counterFrom(
    'svc_response_cache_hits_total',
    'Response-cache lookups answered from the cache.',
    () => cacheStats.hits,
  );
  m.counterFrom('svc_response_cache_misses_total', 'Response-cache lookups that executed.', () => cacheStats.misses);
  m.gauge(
    'svc_response_cache_hit_ratio',
    'Hits over lookups since start.',
    () => cacheStats.hits / Math.max(1, cacheStats.hits + cacheStats.misses),
  );
  m.gauge('svc_key_cache_entries', 'API keys cached by the gate.', () => gate.keys.size);
  m.counterFrom('svc_rate_limit_refusals_total', 'Requests refused by the per-key rate limit.', () => gate.refusals);
  m.gauge('svc_bus_lag_seconds', 'Last NOTIFY to LISTEN delay of the event bus.', () => bus.lagMs / 1000);
  m.actors.add(() => Object.entries(projects.counts()).map(([state, n]) => [['project', state], n] as const));
  m.gauge(
    'svc_db_connections',
    'Connections of this process by pool and state: in_use (in a statement or transaction), idle, lock_wait (in_use, blocked on a lock).',
    async () =>
      (await poolConnections(sql)).flatMap((p) => [
        [[p.pool, 'in_use'], p.inUse] as const,
        [[p.pool, 'idle'], p.idle] as const,
        [[p.pool, 'lock_wait'], p.waiting] as const,
      ]),
    ['pool', 'state'],
  );
}

/** Each replica's state and lag, and where published reads went. */
export function registerReplicaMetrics(m: MetricsRegistry, replicas: ReadReplicas): void {
  const each = <T>(f: (r: ReturnType<ReadReplicas['status']>[number]) => T) =>
    replicas.status().map((r) => [[r.name], f(r)] as const);
  m.gauge(
    'svc_replica_lag_seconds',
    'How long ago the primary first wrote WAL this replica has not replayed (0: caught up).',
    () => each((r) => r.lagMs / 1000),
    ['replica'],
  );
  m.gauge(
    'svc_replica_lag_bytes',
    "WAL bytes between the primary's position and this replica's replay position at the last poll.",
    () => each((r) => r.lagBytes),
    ['replica'],
  );
  m.gauge(
    'svc_replica_state',
    'Replica state: 1 for the state it is in (up: in rotation; lagging: past SVC_REPLICA_MAX_LAG_MS; down: unreachable).',
    () =>
      replicas
        .status()
        .flatMap((r) =>
          (['up', 'lagging', 'down'] as const).map((st) => [[r.name, st], r.state === st ? 1 : 0] as const),
        ),
    ['replica', 'state'],
  );
  m.gauge('svc_replica_reads', 'Published reads sent to this replica since start.', () => each((r) => r.reads), [
    'replica',
  ]);
  m.gauge(
    'svc_replica_fallbacks',
    'Reads that failed on this replica and were answered by the primary.',
    () => each((r) => r.fallbacks),
    ['replica'],
  );
  m.counterFrom(
    'svc_replica_primary_reads_total',
    "Published reads the primary answered because no replica had seen their project's latest change (or none was up).",
    () => replicas.primaryReads,
  );
}

/**
 * Read coalescing by pool (store/coalesce.ts): statements sent, reads that shared a statement
 * with an earlier identical one (reads asked: the two summed), and reads waiting now. Nothing
 * when it is off.
 */
export function registerReadMetrics(m: MetricsRegistry, pools: readonly (readonly [string, ContentSql])[]): void {
  const each = (f: (c: ReadCoalescer) => number) =>
    pools.flatMap(([name, pool]) => {
      const c = coalescerOf(pool);
      return c ? [[[name], f(c)] as const] : [];
    });
  m.counterFrom('svc_read_statements_total', 'Read statements sent, by pool.', () => each((c) => c.stats.statements), [
    'pool',
  ]);
  m.counterFrom(
    'svc_read_coalesced_total',
    'Reads answered by a statement shared with an identical read that arrived first, by pool.',
    () => each((c) => c.stats.coalesced),
    ['pool'],
  );
  m.gauge('svc_read_waiting', 'Reads waiting for their statement to start, by pool.', () => each((c) => c.waiting), [
    'pool',
  ]);
}
