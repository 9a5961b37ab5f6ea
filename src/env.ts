import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { availableParallelism } from 'node:os';

/** Process roles of CONTRACT §2: which listeners and workers this process runs. */
export type Role = 'all' | 'api' | 'gateway' | 'worker';

export interface Settings {
  databaseUrl: string | undefined;
  /** Streaming replicas for published content reads (`DATABASE_READ_URL`, docs/scaling.md); unset, none. */
  replicas: ReplicaSettings | undefined;
  dataDir: string;
  host: string;
  port: number;
  realtimePort: number;
  baseUrl: string;
  realtimeUrl: string;
  authUrl: string;
  role: Role;
  rootToken: string | undefined;
  production: boolean;
  /** `SVC_RESPONSE_CACHE=off` serves every read from PostgreSQL (benchmarks, debugging). */
  responseCache: boolean;
  /**
   * Start-up warm-up (`SVC_WARMUP_MS`, default 500; 0 off): how long a process that serves the API
   * may spend reading its pushed trusted documents through its own GraphQL handler before its
   * port opens (http/warmup.ts).
   */
  warmupMs: number;
  /**
   * Connections of the content read pool (`SVC_READ_POOL`). Reads are single statements that
   * Bun's client pipelines, so about one connection per core is fastest: on 2 cores, 2
   * connections served 11,400 uncached reads/s where 10 served 9,100 (docs/decisions.md).
   */
  readPool: number;
  /**
   * `SVC_READ_COALESCE` (`on`, the default, or `off`): identical reads waiting for the read pool
   * share one statement that starts after all of them arrived (store/coalesce.ts).
   */
  readCoalesce: boolean;
  /** How often due scheduled publishes and releases are looked for (`SVC_SCHEDULED_ACTIONS_TICK_MS`, ms; default 250: within a second of `at`). */
  scheduledActionsTickMs: number;
  /** Realtime caps (docs/realtime.md): connections per identity, channels per connection. */
  realtimeConnectionsPerIdentity: number;
  realtimeSubscriptionsPerConnection: number;
  /** SSE heartbeat interval in ms (spec "Limits": 30 s); lower only for tests. */
  sseHeartbeatMs: number;
  /** Operations, hooks and schedules: SVC_OPERATIONS_* (src/operations/runtime.ts). */
  operations: OperationsSettings;
  /** `SVC_LOG`: one line per request, `text` (readable, the default), `json`, or `off`. */
  log: LogMode;
  /** `SVC_METRICS_TOKEN`: when set, GET /metrics needs `Authorization: Bearer <token>`. */
  metricsToken: string | undefined;
  /** `SVC_BUS_URL`: `nats://host:port` puts the event bus on NATS JetStream; unset, PostgreSQL. */
  busUrl: string | undefined;
  /** `SVC_FILES_MAX_BYTES`: the largest upload, refused while streaming (docs/files.md; 50 MB). */
  filesMaxBytes: number;
  /** Files and media beyond the upload limit: SVC_FILES_*, SVC_S3_URL (docs/files.md). */
  files: FilesSettings;
  /** `SVC_STUDIO=off` turns the Studio (/studio, member sign-in) off (docs/studio.md). */
  studio: boolean;
  /**
   * `SVC_BILLING_STRIPE_SECRET`: the signing secret(s) (`whsec_…`, comma-separated while one is
   * being rolled) of POST /v1/webhooks/stripe; empty: the receiver answers 404 (docs/billing.md).
   */
  billingStripeSecrets: string[];
  /** `SVC_APPS_CA_FILE`: extra CA certificates (PEM text) trusted when fetching app manifests. */
  appsCa: string | undefined;
  /** `SVC_VECTOR_STORE`: `auto` (pgvector when available), or `array` to force the real[] store. */
  vectorStore: 'auto' | 'array';
}

/** Read replicas (src/store/replicas.ts, docs/scaling.md). */
export interface ReplicaSettings {
  /** DATABASE_READ_URL: comma-separated PostgreSQL URLs of hot standbys of DATABASE_URL. */
  urls: string[];
  /** SVC_REPLICA_MAX_LAG_MS: a replica further behind leaves rotation (5000). */
  maxLagMs: number;
  /** SVC_REPLICA_POLL_MS: how often each replica's replay position is polled (100). */
  pollMs: number;
  /** SVC_REPLICA_WAIT_MS: how long a read that must see a write waits for a replica before the primary (250; 0: never waits). */
  waitMs: number;
}

function readReplicaSettings(env: Record<string, string | undefined>): ReplicaSettings | undefined {
  const raw = env.DATABASE_READ_URL?.trim();
  if (!raw) return undefined;
  const urls = raw
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  if (urls.length > 16) throw new Error('DATABASE_READ_URL names at most 16 replicas');
  for (const u of urls) {
    let ok = false;
    try {
      ok = /^postgres(ql)?:$/.test(new URL(u).protocol);
    } catch {}
    if (!ok) throw new Error('DATABASE_READ_URL must be comma-separated postgres:// URLs');
  }
  return {
    urls,
    maxLagMs: int(env.SVC_REPLICA_MAX_LAG_MS, 5000, 'SVC_REPLICA_MAX_LAG_MS', 10, 3_600_000),
    pollMs: int(env.SVC_REPLICA_POLL_MS, 100, 'SVC_REPLICA_POLL_MS', 10, 60_000),
    waitMs: int(env.SVC_REPLICA_WAIT_MS, 250, 'SVC_REPLICA_WAIT_MS', 0, 60_000),
  };
}

/** Files and media (src/files, docs/files.md). */
export interface FilesSettings {
  /** SVC_FILES_QUOTA_BYTES: the stored bytes of one project, soft-deleted files included (10 GB). */
  quotaBytes: number;
  /** SVC_FILES_RETENTION_DAYS: soft-deleted files are deleted for good after this many days (30). */
  retentionDays: number;
  /** SVC_FILES_MAX_INPUT_PIXELS: the largest image accepted or decoded (width × height; 50 MP). */
  maxInputPixels: number;
  /** SVC_FILES_MAX_OUTPUT_PIXELS: the largest transformed image (16 MP); each side at most 8192. */
  maxOutputPixels: number;
  /** SVC_FILES_TRANSFORM_CONCURRENCY: images transformed at once per process (default: cores). */
  transformConcurrency: number;
  /** SVC_FILES_VARIANT_CACHE_BYTES: transformed images kept in memory per process (64 MB). */
  variantCacheBytes: number;
  /** SVC_FILES_UPLOAD_URL_TTL: seconds a signed upload URL stays valid (900). */
  uploadUrlTtlSec: number;
  /** SVC_S3_URL: `s3://key:secret@host:port/bucket?region=…` selects S3-compatible storage. */
  s3Url: string | undefined;
  /** SVC_FFMPEG: the ffmpeg binary for video posters and HLS (default: `ffmpeg` on PATH; `off`). */
  ffmpeg: string;
  /** SVC_FILES_JOB_POLL_MS: how often a worker looks for media jobs (1 s). */
  jobPollMs: number;
}

function readFilesSettings(env: Record<string, string | undefined>): FilesSettings {
  return {
    quotaBytes: byteCount(env.SVC_FILES_QUOTA_BYTES, 10 * 1024 ** 3, 'SVC_FILES_QUOTA_BYTES'),
    retentionDays: int(env.SVC_FILES_RETENTION_DAYS, 30, 'SVC_FILES_RETENTION_DAYS', 0, 36_500),
    maxInputPixels: byteCount(env.SVC_FILES_MAX_INPUT_PIXELS, 50_000_000, 'SVC_FILES_MAX_INPUT_PIXELS'),
    maxOutputPixels: byteCount(env.SVC_FILES_MAX_OUTPUT_PIXELS, 16_777_216, 'SVC_FILES_MAX_OUTPUT_PIXELS'),
    transformConcurrency: int(
      env.SVC_FILES_TRANSFORM_CONCURRENCY,
      Math.max(1, availableParallelism()),
      'SVC_FILES_TRANSFORM_CONCURRENCY',
      1,
      64,
    ),
    variantCacheBytes: byteCount(env.SVC_FILES_VARIANT_CACHE_BYTES, 64 * 1024 * 1024, 'SVC_FILES_VARIANT_CACHE_BYTES'),
    uploadUrlTtlSec: int(env.SVC_FILES_UPLOAD_URL_TTL, 900, 'SVC_FILES_UPLOAD_URL_TTL', 10, 7 * 86_400),
    s3Url: env.SVC_S3_URL || undefined,
    ffmpeg: env.SVC_FFMPEG || 'ffmpeg',
    jobPollMs: int(env.SVC_FILES_JOB_POLL_MS, 1000, 'SVC_FILES_JOB_POLL_MS', 10, 600_000),
  };
}

export type LogMode = 'text' | 'json' | 'off';
const LOG_MODES: readonly LogMode[] = ['text', 'json', 'off'];

function positive(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000)
    throw new Error(`${name} must be a whole number from 1 to 1000, got "${value}"`);
  return n;
}

function byteCount(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Error(`${name} must be a positive whole number of bytes, got "${value}"`);
  return n;
}

function count(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 10_000_000)
    throw new Error(`${name} must be a positive whole number, got "${value}"`);
  return n;
}

function onOff(value: string | undefined, fallback: boolean, name: string): boolean {
  if (value === undefined || value === '') return fallback;
  if (value === 'on') return true;
  if (value === 'off') return false;
  throw new Error(`${name} must be on or off, got "${value}"`);
}

function readCaFile(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`SVC_APPS_CA_FILE cannot be read: ${(err as Error).message}`);
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----'))
    throw new Error(`SVC_APPS_CA_FILE (${file}) holds no PEM certificate`);
  return text;
}

function vectorStore(value: string | undefined): 'auto' | 'array' {
  if (value === undefined || value === '' || value === 'auto') return 'auto';
  if (value === 'array') return 'array';
  throw new Error(`SVC_VECTOR_STORE must be auto or array, got "${value}"`);
}

const ROLES: readonly Role[] = ['all', 'api', 'gateway', 'worker'];

function port(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${name} must be a port number, got "${value}"`);
  return n;
}

/** Reads CONTRACT §2 variables; throws one readable line on a bad value. */
export function readSettings(env: Record<string, string | undefined> = process.env): Settings {
  const host = env.HOST || '127.0.0.1';
  const p = port(env.PORT, 4000, 'PORT');
  const rp = port(env.REALTIME_PORT, 4001, 'REALTIME_PORT');
  const role = (env.SVC_ROLE || 'all') as Role;
  if (!ROLES.includes(role)) throw new Error(`SVC_ROLE must be one of ${ROLES.join(', ')}, got "${role}"`);
  const log = (env.SVC_LOG || 'text') as LogMode;
  if (!LOG_MODES.includes(log)) throw new Error(`SVC_LOG must be one of ${LOG_MODES.join(', ')}, got "${log}"`);
  const baseUrl = (env.SVC_BASE_URL || `http://${host}:${p}`).replace(/\/$/, '');
  return {
    databaseUrl: env.DATABASE_URL || undefined,
    replicas: readReplicaSettings(env),
    dataDir: resolve(env.SVC_DATA_DIR || './.svc'),
    host,
    port: p,
    realtimePort: rp,
    baseUrl,
    realtimeUrl: (env.SVC_REALTIME_URL || `ws://${host}:${rp}`).replace(/\/$/, ''),
    authUrl: (env.SVC_AUTH_URL || `${baseUrl}/auth`).replace(/\/$/, ''),
    role,
    rootToken: env.SVC_ROOT_TOKEN || undefined,
    production: env.SVC_ENV === 'production',
    responseCache: env.SVC_RESPONSE_CACHE !== 'off',
    warmupMs: int(env.SVC_WARMUP_MS, 500, 'SVC_WARMUP_MS', 0, 10_000),
    readPool: positive(env.SVC_READ_POOL, Math.max(2, availableParallelism()), 'SVC_READ_POOL'),
    readCoalesce: onOff(env.SVC_READ_COALESCE, true, 'SVC_READ_COALESCE'),
    scheduledActionsTickMs: int(env.SVC_SCHEDULED_ACTIONS_TICK_MS, 250, 'SVC_SCHEDULED_ACTIONS_TICK_MS', 10, 60_000),
    realtimeConnectionsPerIdentity: count(
      env.SVC_REALTIME_CONNECTIONS_PER_IDENTITY,
      1000,
      'SVC_REALTIME_CONNECTIONS_PER_IDENTITY',
    ),
    realtimeSubscriptionsPerConnection: count(
      env.SVC_REALTIME_SUBSCRIPTIONS_PER_CONNECTION,
      100,
      'SVC_REALTIME_SUBSCRIPTIONS_PER_CONNECTION',
    ),
    sseHeartbeatMs: count(env.SVC_SSE_HEARTBEAT_MS, 30_000, 'SVC_SSE_HEARTBEAT_MS'),
    operations: readOperationsSettings(env, env.SVC_ENV === 'production'),
    log,
    metricsToken: env.SVC_METRICS_TOKEN || undefined,
    busUrl: busUrl(env.SVC_BUS_URL),
    filesMaxBytes: byteCount(env.SVC_FILES_MAX_BYTES, 50 * 1024 * 1024, 'SVC_FILES_MAX_BYTES'),
    files: readFilesSettings(env),
    studio: onOff(env.SVC_STUDIO, true, 'SVC_STUDIO'),
    billingStripeSecrets: (env.SVC_BILLING_STRIPE_SECRET ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    vectorStore: vectorStore(env.SVC_VECTOR_STORE),
    appsCa: env.SVC_APPS_CA_FILE ? readCaFile(env.SVC_APPS_CA_FILE) : undefined,
  };
}

/** What a process runs of operations (src/operations/runtime.ts). */
export interface OperationsSettings {
  /** SVC_OPERATIONS_ALLOW_PRIVATE=1 lets production call private addresses. */
  publicOnly: boolean;
  /** SVC_OPERATIONS_CONCURRENCY: calls in flight per project across processes (default 32; bench/RESULTS.md). */
  projectConcurrency: number;
  /** SVC_OPERATIONS_CAPACITY: calls in flight per process (default 64). */
  capacity: number;
  /** SVC_OPERATIONS_LEASE_MS: how long a claim survives its process (default 15 s). */
  leaseMs: number;
  /**
   * SVC_OPERATIONS_LEASE_ATTEMPTS: claims of an execution whose worker keeps dying mid-call
   * before it ends `failed` (reason worker_lost) instead of being claimed again (default 3).
   */
  leaseAttempts: number;
  /** SVC_OPERATIONS_POLL_MS: claim and time-out sweep interval without wake-ups (default 1 s). */
  pollMs: number;
  /** SVC_OPERATIONS_RETRY_MS: first hook retry back-off, doubling per attempt (default 1 s). */
  retryBaseMs: number;
  /** SVC_SCHEDULER_TICK_MS: how often due schedule occurrences are looked for (default 5 s). */
  scheduleTickMs: number;
}

function int(value: string | undefined, fallback: number, name: string, min: number, max: number): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`${name} must be a whole number from ${min} to ${max}, got "${value}"`);
  return n;
}

export function readOperationsSettings(
  env: Record<string, string | undefined>,
  production: boolean,
): OperationsSettings {
  return {
    publicOnly: production && env.SVC_OPERATIONS_ALLOW_PRIVATE !== '1',
    projectConcurrency: int(env.SVC_OPERATIONS_CONCURRENCY, 32, 'SVC_OPERATIONS_CONCURRENCY', 1, 1000),
    capacity: int(env.SVC_OPERATIONS_CAPACITY, 64, 'SVC_OPERATIONS_CAPACITY', 1, 10_000),
    leaseMs: int(env.SVC_OPERATIONS_LEASE_MS, 15_000, 'SVC_OPERATIONS_LEASE_MS', 100, 3_600_000),
    leaseAttempts: int(env.SVC_OPERATIONS_LEASE_ATTEMPTS, 3, 'SVC_OPERATIONS_LEASE_ATTEMPTS', 1, 100),
    pollMs: int(env.SVC_OPERATIONS_POLL_MS, 1000, 'SVC_OPERATIONS_POLL_MS', 10, 60_000),
    retryBaseMs: int(env.SVC_OPERATIONS_RETRY_MS, 1000, 'SVC_OPERATIONS_RETRY_MS', 1, 3_600_000),
    scheduleTickMs: int(env.SVC_SCHEDULER_TICK_MS, 5000, 'SVC_SCHEDULER_TICK_MS', 10, 60_000),
  };
}

function busUrl(v: string | undefined): string | undefined {
  if (!v) return undefined;
  if (!/^(nats|tls):\/\/[^\s]+$/.test(v))
    throw new Error(`SVC_BUS_URL must be a nats:// URL (or unset for the PostgreSQL bus), got "${v}"`);
  return v;
}
