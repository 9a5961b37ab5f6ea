import { resolve } from 'node:path';
import { availableParallelism } from 'node:os';

/** Process roles of CONTRACT §2: which listeners and workers this process runs. */
export type Role = 'all' | 'api' | 'gateway' | 'worker';

export interface Settings {
  databaseUrl: string | undefined;
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
   * Connections of the content read pool (`SVC_READ_POOL`). Reads are single statements that
   * Bun's client pipelines, so about one connection per core is fastest: on 2 cores, 2
   * connections served 11,400 uncached reads/s where 10 served 9,100 (docs/decisions.md).
   */
  readPool: number;
}

function positive(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 1000) throw new Error(`${name} must be a whole number from 1 to 1000, got "${value}"`);
  return n;
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
  const baseUrl = (env.SVC_BASE_URL || `http://${host}:${p}`).replace(/\/$/, '');
  return {
    databaseUrl: env.DATABASE_URL || undefined,
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
    readPool: positive(env.SVC_READ_POOL, Math.max(2, availableParallelism()), 'SVC_READ_POOL'),
  };
}
