import type { FilesRuntime } from '../files/runtime.ts';
import type { Settings } from '../env.ts';
import type { ContentSql, Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import type { ActorRegistry } from '../actors/registry.ts';
import type { CustomerPrincipal, KeyPrincipal } from '../auth/principal.ts';
import type { ProjectActor, ProjectSnapshot } from '../projects/actor.ts';
import type { ModelDef } from '../projects/types.ts';
import type { RecordLoader } from './loader.ts';
import type { WriteCommitter } from '../content/tx.ts';
import type { RowAccess } from '../content/types.ts';
import type { Targeting } from '../content/targeting.ts';
import type { VectorStore } from '../search/store.ts';
import type { ReadReplicas } from '../store/replicas.ts';
import type { Reader } from '../content/db.ts';
import type { AuditFrom } from '../editorial/audit.ts';

/**
 * What GraphQL needs from the process (the Service has all of it; tests and the bench may pass
 * their own): the project actors, the content pools and the bus that announces writes.
 */
export interface GraphqlDeps {
  settings: Pick<Settings, 'production' | 'responseCache'>;
  projects: ActorRegistry<ProjectActor>;
  sql: Sql;
  /** The pool behind `writes` and the bus's NOTIFY (store/db.ts). */
  contentSql: ContentSql;
  /** Record-write transactions: one message, one commit, events with it (src/content/tx.ts). */
  writes: WriteCommitter;
  /** Content reads on the primary: drafts, previews, releases, and every read when no replicas are set. */
  readSql: ContentSql;
  /** Streaming replicas for published reads (`DATABASE_READ_URL`, store/replicas.ts); absent without. */
  replicas?: ReadReplicas;
  bus: EventBus;
  /** Collaboration rooms (`saveCollabDraft`); absent where no rooms run. */
  collab?: { saveDraft(projectId: string, roomName: string, userId: string | null): Promise<boolean> };
  /** Files and media (src/files): storage and limits; absent where no files are served. */
  files?: FilesRuntime;
  /** Where embeddings live (src/search/store.ts): pgvector when the server has it; default `array`. */
  vectorStore?: VectorStore;
  /** Response-cache lookups, counted for GET /metrics (the Service passes its counters). */
  cacheStats?: { hits: number; misses: number };
}

/** What every resolver of one request sees. Built per request; cheap. */
export interface GqlContext {
  /** The process parts resolvers use (named `svc` because that is what it is in a server). */
  svc: GraphqlDeps;
  principal: KeyPrincipal;
  snapshot: ProjectSnapshot;
  /** Models this key may see, by key. */
  models: ReadonlyMap<string, ModelDef>;
  loader: RecordLoader;
  /** Where this request's published reads run: a replica that has seen the project's latest change, else the primary. */
  published: Reader;
  /** Set by resolvers that honoured `preview: true`: the response must not be stored anywhere. */
  noStore: boolean;
  /** The customer of a verified access token sent with the key (src/identity/tokens.ts), else null. */
  customer: CustomerPrincipal | null;
  /**
   * The client's address, for per-IP login throttling (absent on non-HTTP transports). Asked
   * only by the resolvers that need it: Bun's `server.requestIP` for every request was ~1.4 % of
   * the service's samples in the write bench (docs/decisions.md, "Writes, session 5: service CPU per mutation").
   */
  clientIp?: () => string | null;
  /** Where the request came from, for the audit log (src/editorial/audit.ts); asked by writes only. */
  auditFrom?: () => AuditFrom;
  /** Set by writes that put their audit entry in their own transaction (graphql/audit.ts). */
  audited?: boolean;
  /** Model `access.read` restrictions of this reader (undefined: none apply). */
  rows: RowAccess | undefined;
  /** The request's targeting context, resolved on the first read that needs it (graphql/targeting.ts). */
  targeting?: Targeting | Promise<Targeting>;
  /** Releases a read of this request previews, checked once each (graphql/resolvers.ts). */
  releases?: Map<string, Promise<string>>;
}

/** Names generated from model and field keys (CONTRACT §4). */
export function typeName(key: string): string {
  const clean = key.replace(/[^A-Za-z0-9_]/g, '_');
  return clean.charAt(0).toUpperCase() + clean.slice(1);
}

export function pluralField(key: string): string {
  return `${key}s`;
}

export const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;
