import postgres from 'postgres';
import { randomBytes } from 'node:crypto';
import { connect, type Sql } from '../../src/store/db.ts';
import { migrate } from '../../src/store/migrate.ts';

/** The server the suite runs against (set by test/preload.ts when not given). */
export function serverUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set (test/preload.ts sets it)');
  return url;
}

/**
 * The suite on a primary and its hot standby (.ci/replicas, test/support/standby-cli.ts):
 * DATABASE_URL names the primary and DATABASE_READ_URL the standby, both servers as given to the
 * suite. test/preload.ts keeps the standby's here, and each service a test starts on a database
 * of the primary reads from the same database on the standby (`readUrlFor`).
 */
export const READ_SERVER_ENV = 'SVC_TEST_READ_SERVER';

/** DATABASE_READ_URL for a service on `databaseUrl`: its database on the standby; undefined without one. */
export function readUrlFor(databaseUrl: string): string | undefined {
  const standby = process.env[READ_SERVER_ENV];
  if (!standby || !process.env.DATABASE_URL) return undefined;
  const db = new URL(databaseUrl);
  // Only databases of the suite's primary have a copy on its standby (a test's own cluster has not).
  if (db.host !== new URL(serverUrl()).host) return undefined;
  const u = new URL(standby);
  u.pathname = db.pathname;
  return u.toString();
}

/** Where the published reads of the services the tests started went (replica mode), over the run. */
export interface ReplicaTally {
  services: number;
  replica: number;
  primary: number;
  fallbacks: number;
}

/** One tally per run: on globalThis, so every test file's copy of this module adds to it. */
export function replicaTally(): ReplicaTally {
  const key = Symbol.for('svc.test.replicaTally');
  const g = globalThis as Record<symbol, unknown>;
  return (g[key] ??= { services: 0, replica: 0, primary: 0, fallbacks: 0 }) as ReplicaTally;
}

/** Databases this run created, dropped once the suite is over (test/preload.ts). */
const created: string[] = [];

/** `fn` on a connection of its own to the suite's server's `postgres` database, closed after. */
async function withAdmin<T>(fn: (admin: postgres.Sql) => Promise<T>, max = 1): Promise<T> {
  const admin = postgres(serverUrl(), { max, onnotice: () => {} });
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

/** A new database on the suite's server (a copy of `template` if given); its URL. */
async function createDatabase(label: string, template?: string): Promise<string> {
  const name = `svc_${label.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  await withAdmin((admin) => admin.unsafe(`create database "${name}"${template ? ` template "${template}"` : ''}`));
  created.push(name);
  const u = new URL(serverUrl());
  u.pathname = `/${name}`;
  return u.toString();
}

/** Creates an empty database on the suite's server and returns its URL; each test file gets its own. */
export function freshDatabase(label = 't'): Promise<string> {
  return createDatabase(label);
}

/**
 * A migrated database to copy (`create database … template`), made once per run: migrating a
 * database took 330–390 ms here and copying one 70–140 ms, for each of the ~200 databases a run
 * makes. Closed to connections once migrated (a copy fails while anyone, autovacuum included, is
 * connected to its template); dropped with the rest at the end. On globalThis: one per run.
 */
function migratedTemplate(): Promise<string> {
  const key = Symbol.for('svc.test.migratedTemplate');
  const g = globalThis as Record<symbol, Promise<string> | undefined>;
  return (g[key] ??= (async () => {
    const url = await freshDatabase('tpl');
    const name = new URL(url).pathname.slice(1);
    const sql = connect(url, { max: 1 });
    try {
      await migrate(sql);
    } finally {
      await sql.end({ timeout: 5 });
    }
    await withAdmin((admin) => admin.unsafe(`alter database "${name}" with allow_connections false`));
    return name;
  })());
}

/**
 * A database already migrated to this checkout's schema (a copy of the run's template): what a
 * service started on it finds as if it had migrated it itself.
 */
export async function freshMigratedDatabase(label = 't'): Promise<string> {
  return createDatabase(label, await migratedTemplate());
}

/** A fresh, migrated database and a connection to it. */
export async function migratedDatabase(label?: string): Promise<{ url: string; sql: Sql }> {
  const url = await freshMigratedDatabase(label);
  const sql = connect(url, { max: 4 });
  // Nothing left to apply: the template is this checkout's schema (checked, never assumed).
  await migrate(sql);
  return { url, sql };
}

/**
 * Drops the databases this run created. On a shared server (DATABASE_URL given) they would
 * otherwise pile up, one per test file per run; `with (force)` ends connections a test left.
 */
export async function dropCreatedDatabases(): Promise<void> {
  if (!created.length) return;
  // Concurrently: each DROP DATABASE waits for a checkpoint (seconds on a busy shared server), and concurrent drops share them.
  const names = created.splice(0);
  await withAdmin(
    (admin) =>
      Promise.all(names.map((n) => admin.unsafe(`drop database if exists "${n}" with (force)`).catch(() => {}))),
    8,
  );
}
