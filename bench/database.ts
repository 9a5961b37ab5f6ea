import postgres from 'postgres';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbedded, type EmbeddedServer } from '../src/store/embedded.ts';
import { articleRow, listingRow, FILTERED_RECORDS, READ_RECORDS, REFERENCE_DDL, WRITE_PEER_DDL } from './data.ts';

/**
 * The PostgreSQL every target of a run shares. With DATABASE_URL: a fresh database
 * `svc_bench_<hex>` on that server, dropped at the end. Without: the embedded PostgreSQL the
 * product ships, started by the harness in a temporary folder (not by the service, so the
 * references can use the same server), stopped at the end.
 */
export interface BenchDatabase {
  url: string;
  label: string;
  version: string;
  close(): Promise<void>;
}

function safe(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

export async function openDatabase(): Promise<BenchDatabase> {
  let embedded: EmbeddedServer | undefined;
  let dir: string | undefined;
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    dir = mkdtempSync(join(tmpdir(), 'svc-bench-pg-'));
    try {
      embedded = await startEmbedded(dir);
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`embedded PostgreSQL did not start: ${(err as Error).message.split('\n')[0]}`);
    }
    serverUrl = embedded.url;
  }
  const name = `svc_bench_${randomBytes(4).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, connect_timeout: 5, onnotice: () => {} });
  let version: string;
  try {
    await admin.unsafe(`create database "${name}"`);
    const [row] = await admin<{ v: string }[]>`select current_setting('server_version') as v`;
    version = row!.v.split(' ')[0]!;
  } catch (err) {
    await admin.end({ timeout: 1 }).catch(() => {});
    await embedded?.stop();
    throw new Error(`cannot reach PostgreSQL at ${safe(serverUrl)}: ${(err as Error).message}`);
  }
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    label: embedded ? 'embedded' : 'DATABASE_URL',
    version,
    async close() {
      try {
        await admin.unsafe(`drop database if exists "${name}" with (force)`);
      } catch {
        // best effort: the database server may already be gone
      }
      await admin.end({ timeout: 1 }).catch(() => {});
      await embedded?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The write peer's empty table (bench/data.ts WRITE_PEER_DDL). */
export async function createWritePeerTable(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(WRITE_PEER_DDL);
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/** The plain tables the peers read, filled with the same rows the service gets. */
export async function seedReferenceTables(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(REFERENCE_DDL);
    const a = Array.from({ length: READ_RECORDS }, (_, i) => articleRow(i + 1));
    await sql`insert into bench_ref.article ${sql(a)}`;
    const e = Array.from({ length: FILTERED_RECORDS }, (_, i) => listingRow(i + 1));
    for (let i = 0; i < e.length; i += 2_000) await sql`insert into bench_ref.listing ${sql(e.slice(i, i + 2_000))}`;
    await sql`analyze bench_ref.article`;
    await sql`analyze bench_ref.listing`;
  } finally {
    await sql.end({ timeout: 1 });
  }
}
