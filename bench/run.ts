/**
 * `bun bench [scenario|reference ...] [--quick] [--profile <name>]` (issue 6, CONTRACT §7).
 * Starts the service and the references as child processes on one PostgreSQL, seeds the service
 * through its public surfaces, loads each target from a separate process (wrk or bench/load.ts)
 * and prints one table; every run writes bench/results/<UTC timestamp>.json and regenerates
 * bench/RESULTS.md from the newest result of each scenario (bench/results.ts, results-md.ts).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWritePeerTable, openDatabase, seedReferenceTables, type BenchDatabase } from './database.ts';
import { FILTERED_DOC, PG_FILTERED_DOC, PG_READ_DOC, READ_DOC } from './data.ts';
import { runLoad, loadgenName, wrkPath, removeScratch } from './drive.ts';
import { cpuWindow, killAllNow, rssWindow, startChild, stopAll } from './procs.ts';
import { pgCpuWindow } from './pg-cpu.ts';
import type { AuthCost } from './auth-cost.ts';
import type { CustomerCost } from './customer-cost.ts';
import { rowFigures, rowsJson, tableLines, type Row } from './report.ts';
import {
  conditions,
  describeBox,
  evaluate,
  gitState,
  stamp,
  type Conditions,
  type Figure,
  type ResultFile,
} from './results.ts';
import { RESULTS_DIR, writeResultsMarkdown } from './results-md.ts';
import { peerNode } from './peers.ts';
import { parseCompare, runCompare } from './compare.ts';
import { seedArticles, seedListings, seedProject, rotationKeys, gql, type Seeded } from './seed.ts';
import {
  readStatements,
  REFERENCES,
  startReference,
  startService,
  type ReferenceName,
  type Target,
} from './targets.ts';
import { runOperations } from './operations-scenario.ts';
import { runFiles } from './files-scenario.ts';
import { runLoginLoad } from './login-load.ts';
import { cacheEntries, FLEET_READ_DOC, setupFleet } from './provision-scenario.ts';
import type { LoadPlan, LoadResult } from './load.ts';
import { runCli } from '../src/cli/main.ts';
import { FANOUT, runFanout, type FanoutName } from './fanout.ts';
import { collabFigures, collabLines, runCollab } from './collab.ts';
import { runFanout3 } from './fanout-3proc.ts';
import {
  pushTrustedRead,
  runFirstAfterRestart,
  runRevalidate,
  TRUSTED_BODY,
  TRUSTED_SCENARIOS,
  trustedRatios,
} from './trusted.ts';
import { runReadReplica } from './read-replica.ts';
import { interleave, pairRounds, type PairSide } from './interleave.ts';

export const SCENARIOS = [
  'read-cached',
  'read-uncached',
  'read-filtered',
  'write',
  'auth-mixed',
  'auth-customer',
  'auth-cost',
  'login-load',
  'operations',
  'provision',
  'files',
  ...FANOUT,
  'fanout-3proc',
  'collab',
  ...TRUSTED_SCENARIOS,
  'read-replica',
] as const;
type Scenario = (typeof SCENARIOS)[number];
const ALL = [...REFERENCES, ...SCENARIOS] as const;
type Name = (typeof ALL)[number];

const USAGE = `usage: bun bench [${ALL.join('|')} ...] [--quick] [--profile <name>] [--compare <git-ref> [--rounds N]]`;

interface Options {
  names: Name[];
  quick: boolean;
  profile: Name | undefined;
  explicit: boolean;
}

function parse(argv: string[]): Options {
  const names: Name[] = [];
  let quick = false;
  let profile: Name | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--quick') quick = true;
    else if (a === '--profile') {
      const v = argv[++i];
      if (!v || !(ALL as readonly string[]).includes(v)) throw new Error(`--profile needs one of ${ALL.join(', ')}`);
      profile = v as Name;
    } else if (a === '--help' || a === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else if ((ALL as readonly string[]).includes(a)) names.push(a as Name);
    else throw new Error(`unknown scenario or flag "${a}"\n${USAGE}`);
  }
  const explicit = names.length > 0 || profile !== undefined;
  if (profile && !names.includes(profile)) names.push(profile);
  return { names: explicit ? names : [...ALL], quick, profile, explicit };
}

let db: BenchDatabase | undefined;
let exiting = false;
/**
 * Every temporary folder of the run (plan files, response bytes, the services' data folders, the
 * embedded PostgreSQL, the children's own) goes under one folder, removed at the end: the
 * children inherit TMPDIR, and os.tmpdir() reads it on every call.
 */
const RUN_TMP = mkdtempSync(join(tmpdir(), 'svc-bench-run-'));
process.env.TMPDIR = RUN_TMP;

async function cleanup(): Promise<void> {
  await stopAll();
  removeScratch();
  await db?.close();
  db = undefined;
  rmSync(RUN_TMP, { recursive: true, force: true });
}
function onSignal(sig: string): void {
  if (exiting) return;
  exiting = true;
  console.error(`bench: ${sig}, stopping every process it started`);
  void cleanup().finally(() => process.exit(130));
}

const rows: Row[] = [];
const notes: string[] = [];
/** Server CPU per request (ns) of the service rows, from /proc over the whole load run. */
const cpuPerRequest = new Map<string, { ns: number; cores: number }>();
/** Write rows: CPU µs per operation of the service (or the ceiling's client) and of PostgreSQL's backends. */
const writeCpu = new Map<string, { client: number; pg: number }>();
let authCost: AuthCost | { na: string } | undefined;
/** The auth-customer row's access token, reused by the same-process comparison (runCustomerAb). */
let customerToken: string | undefined;
let collab: string[] = [];
/** Figures that are not a row's req/s (collaboration per CPU-second, fan-out CPU per delivery …). */
const extraFigures: Record<string, Figure> = {};
/** The login-under-load section (bench/login-load.ts). */
let loginLines: string[] = [];
const profiles: string[] = [];
/** The fan-out section (bench/fanout.ts): its own table, with the relay reference beside it. */
let fanoutLines: string[] = [];
const isFanout = (n: string): n is FanoutName => (FANOUT as readonly string[]).includes(n);

function planFor(
  o: Options,
  endpoint: string,
  body: string | undefined,
  headerSets: Record<string, string>[],
  mode: LoadPlan['mode'] = 'request',
): LoadPlan {
  const seconds = Number(process.env.BENCH_DURATION || (o.quick ? 3 : 10));
  return {
    url: endpoint,
    mode,
    body,
    headerSets,
    connections: Number(process.env.BENCH_CONNECTIONS || (mode === 'write' || mode === 'peer-write' ? 16 : 32)),
    warmupMs: o.quick ? 1_000 : 2_000,
    durationMs: seconds * 1000,
  };
}

/** One request first: the target must answer this document with data and no errors. */
async function preflight(endpoint: string, body: string, headers: Record<string, string>): Promise<string> {
  return (await preflightAnswer(endpoint, body, headers)).text;
}

/** Headers every server writes itself: left out of those ceiling-static copies. */
const OWN_HEADERS = new Set(['date', 'content-length', 'connection', 'keep-alive', 'transfer-encoding']);

/** preflight(), with the answer's headers (less those every server writes itself). */
async function preflightAnswer(
  endpoint: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ text: string; headers: [string, string][] }> {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (res.status === 404) throw new Error(`POST ${new URL(endpoint).pathname} → 404`);
  if (res.status !== 200 || text.includes('"errors"')) throw new Error(`HTTP ${res.status}: ${text.slice(0, 140)}`);
  return { text, headers: [...res.headers].filter(([k]) => !OWN_HEADERS.has(k.toLowerCase())) };
}

async function measure(
  name: string,
  shape: Row['shape'],
  reference: boolean,
  target: Target,
  plan: LoadPlan,
): Promise<void> {
  process.stderr.write(
    `bench: ${name} (${loadgenName(plan)}, ${plan.connections} connections, ${plan.durationMs / 1000} s) … `,
  );
  const rss = rssWindow(target.child.pid);
  const cpu = cpuWindow(target.child.pid);
  // Writes and uncached reads: PostgreSQL's backends share the two cores with the server and
  // the load generator, so their CPU per request decides the row as much as the server's does.
  const pgToo = shape === 'write' || (!reference && name.includes('uncached'));
  const pg = pgToo && db ? await pgCpuWindow(db.url).catch(() => undefined) : undefined;
  const result = await runLoad(plan);
  const rssMb = rss.end();
  // Warm-up included on both sides: CPU over the whole run ÷ wall time = cores kept busy.
  const used = cpu.end();
  const pgSeconds = await pg?.end();
  if (used && pgSeconds !== undefined && result.rps > 0) {
    const ops = (result.rps * (plan.warmupMs + plan.durationMs)) / 1000;
    if (shape === 'write') writeCpu.set(name, { client: (used.cpuSeconds * 1e6) / ops, pg: (pgSeconds * 1e6) / ops });
    else {
      extraFigures[`${name}/pg-cpu-us-per-request`] = {
        value: (pgSeconds * 1e6) / ops,
        unit: 'µs',
        errors: result.errors,
      };
      notes.push(`${name}: PostgreSQL CPU ${((pgSeconds * 1e6) / ops).toFixed(1)} µs per request`);
    }
  }
  if (used && result.rps > 0) {
    // References too: on a box the load generator shares, server CPU per request is the figure a
    // change to the server moves, and --compare reports it beside req/s.
    if (!reference) cpuPerRequest.set(name, { ns: (used.cores * 1e9) / result.rps, cores: used.cores });
    extraFigures[`${name}/cpu-us-per-request`] = {
      value: (used.cores * 1e6) / result.rps,
      unit: 'µs',
      errors: result.errors,
    };
    notes.push(
      `${name}: server CPU ${((used.cores * 1e6) / result.rps).toFixed(1)} µs per request (${used.cores.toFixed(2)} cores busy)`,
    );
  }
  if (result.errors > 0)
    notes.push(
      `${name}: ${result.errors} failed requests${result.firstError ? ` (first: ${result.firstError.slice(0, 120)})` : ''}`,
    );
  if (result.requests === 0) {
    rows.push({
      name,
      shape,
      reference,
      na: `no successful request${result.firstError ? `: ${result.firstError.slice(0, 80)}` : ''}`,
    });
    process.stderr.write('no requests\n');
    return;
  }
  rows.push({ name, shape, reference, result: { ...result, rssMb } });
  process.stderr.write(`${result.rps.toFixed(0)} req/s\n`);
}

const body = (query: string) => JSON.stringify({ query });
const naRow = (name: string, shape: Row['shape'], reference: boolean, reason: string) =>
  rows.push({ name, shape, reference, na: reason.split('\n')[0]!.slice(0, 160) });

async function runReference(o: Options, name: ReferenceName, readBytes: { file?: string }): Promise<void> {
  const dbUrl = db?.url;
  const shapes: [string, Row['shape'], string][] =
    name === 'postgraphile'
      ? [
          [name, 'read', body(PG_READ_DOC)],
          [`${name}/filtered`, 'filtered', body(PG_FILTERED_DOC)],
        ]
      : name === 'ceiling-static'
        ? [[name, 'read', body(READ_DOC)]]
        : [
            [name, 'read', body(READ_DOC)],
            [`${name}/filtered`, 'filtered', body(FILTERED_DOC)],
          ];
  let target: Target | undefined;
  try {
    if (name === 'ceiling-static' && !readBytes.file) {
      // No service response to copy: serve what ceiling-jit answers to the same document.
      const jit = await startReference('ceiling-jit', {});
      const text = await preflight(jit.endpoint, body(READ_DOC), {});
      await jit.stop();
      readBytes.file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'read.json');
      writeFileSync(readBytes.file, text);
      notes.push('ceiling-static serves the ceiling-jit response bytes (the service read was not available)');
    }
    target = await startReference(name, {
      databaseUrl: dbUrl,
      bodyFile: readBytes.file,
      profile: o.profile === name ? name : undefined,
    });
    for (const [rowName, shape, b] of shapes) {
      try {
        await preflight(target.endpoint, b, {});
        await measure(rowName, shape, true, target, planFor(o, target.endpoint, b, [{}]));
      } catch (err) {
        naRow(rowName, shape, true, (err as Error).message);
      }
    }
  } catch (err) {
    for (const [n, s] of shapes) if (!rows.some((r) => r.name === n)) naRow(n, s, true, (err as Error).message);
  } finally {
    await target?.stop();
    if (target?.profile) profiles.push(target.profile);
  }
}

/** A row of an interleaved pair (bench/interleave.ts): measured like any read row, its req/s returned. */
function readSide(
  o: Options,
  name: string,
  target: Target,
  b: string,
  headers: Record<string, string>,
  reference = false,
): PairSide {
  return {
    name,
    run: async (row) => {
      await measure(row, 'read', reference, target, planFor(o, target.endpoint, b, [headers]));
      return rows.find((r) => r.name === row)?.result?.rps;
    },
  };
}

/**
 * Each of `rows` this run measured on `svc` ([name, body, target]) and the reference `name`
 * (started once for them, beside `svc`) in turns (bench/interleave.ts): the figures their targets
 * are judged on.
 */
async function pairWith(
  o: Options,
  name: ReferenceName,
  svc: Target,
  headers: Record<string, string>,
  candidates: readonly [row: Scenario, body: string, target: number][],
  readBytes: { file?: string },
): Promise<void> {
  const scenarios = candidates
    .filter(([n]) => rows.some((r) => r.name === n && r.result))
    .map(([n, b, target]) => ({ side: readSide(o, n, svc, b, headers), target }));
  if (scenarios.length === 0) return;
  let ref: Target | undefined;
  try {
    ref = await startReference(name, { databaseUrl: db?.url, bodyFile: readBytes.file });
    await preflight(ref.endpoint, body(READ_DOC), {});
    const reference = readSide(o, name, ref, body(READ_DOC), {}, true);
    for (const { side, target } of scenarios) {
      const r = await interleave(side, reference, pairRounds(o.quick), target);
      Object.assign(extraFigures, r.figures);
      notes.push(r.note);
    }
  } catch (err) {
    const names = scenarios.map((x) => x.side.name).join(', ');
    notes.push(`${names} ÷ ${name}, interleaved: failed: ${(err as Error).message.split('\n')[0]!.slice(0, 160)}`);
  } finally {
    await ref?.stop();
  }
}

async function runService(
  o: Options,
  wanted: Scenario[],
  pinnedPort: number | undefined,
  readBytes: { file?: string },
): Promise<void> {
  const shapeOf = (s: Scenario): Row['shape'] =>
    s === 'read-filtered'
      ? 'filtered'
      : s === 'write'
        ? 'write'
        : s === 'operations'
          ? 'operations'
          : s === 'provision'
            ? 'provision'
            : s === 'files'
              ? 'files'
              : 'read';
  const cachedNeeded = wanted.filter(
    (s) => s !== 'read-uncached' && s !== 'read-trusted-uncached' && s !== 'first-after-restart',
  );
  let svc: (Target & { rootToken: string; gatewayUrl: string }) | undefined;
  let seeded: Seeded | undefined;
  const unavailable: Partial<Record<Scenario, string>> = {};
  try {
    svc = await startService(db!.url, {
      pinnedPort,
      profile:
        o.profile && o.profile !== 'read-uncached' && (SCENARIOS as readonly string[]).includes(o.profile)
          ? o.profile
          : undefined,
    });
    seeded = await seedProject(svc.url, svc.rootToken, db!.url);
    fleetSeed = seeded;
    notes.push(...seeded.notes);
    await seedArticles(svc.url, seeded);
    const read = await preflightAnswer(svc.endpoint, body(READ_DOC), { 'x-api-key': seeded.publicKey });
    // Trusted-document rows (bench/trusted.ts): the read document, pushed once.
    if (wanted.some((w) => (TRUSTED_SCENARIOS as readonly string[]).includes(w)))
      await pushTrustedRead(svc.url, seeded);
    readBytes.file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'read.json');
    writeFileSync(readBytes.file, read.text);
    // ceiling-static answers with the same headers too (Cache-Control, Vary, the rate-limit
    // headers of every keyed answer): the same response, not a lighter one.
    writeFileSync(`${readBytes.file}.headers.json`, JSON.stringify(read.headers));
  } catch (err) {
    const reason = (err as Error).message;
    if (!svc || !seeded) throw err;
    for (const s of wanted) unavailable[s] = reason;
  }
  const s = seeded!;
  const pub = { 'x-api-key': s.publicKey };
  try {
    for (const name of cachedNeeded) {
      if (unavailable[name]) continue;
      try {
        if (name === 'read-cached') {
          await measure(name, 'read', false, svc, planFor(o, svc.endpoint, body(READ_DOC), [pub]));
        } else if (name === 'read-trusted') {
          await preflight(svc.endpoint, TRUSTED_BODY, pub);
          await measure(name, 'read', false, svc, planFor(o, svc.endpoint, TRUSTED_BODY, [pub]));
        } else if (name === 'revalidate-304') {
          const plan = planFor(o, svc.endpoint, undefined, [pub]);
          rows.push({
            name,
            shape: 'read',
            reference: false,
            result: { ...(await runRevalidate(svc, s.publicKey, plan)), rssMb: undefined },
          });
        } else if (name === 'auth-mixed') {
          const keys = await rotationKeys(svc.url, db!.url, s, 1_000);
          await preflight(svc.endpoint, body(READ_DOC), { 'x-api-key': keys[keys.length - 1]! });
          await measure(
            name,
            'read',
            false,
            svc,
            planFor(
              o,
              svc.endpoint,
              body(READ_DOC),
              keys.map((k) => ({ 'x-api-key': k })),
            ),
          );
        } else if (name === 'auth-customer') {
          // Key + customer token: the same document, never response-cached (per customer).
          const reg = await gql(
            svc.url,
            s.publicKey,
            'mutation($e: String!) { registerCustomer(email: $e, password: "bench customer pw") { accessToken } }',
            { e: `bench-${Date.now()}@example.com` },
          );
          const h = { ...pub, authorization: `Bearer ${reg.data.registerCustomer.accessToken}` };
          await preflight(svc.endpoint, body(READ_DOC), h);
          customerToken = reg.data.registerCustomer.accessToken;
          await runCustomerCost(s, customerToken!).catch((err) =>
            notes.push(`auth-customer, in-process: failed: ${(err as Error).message.split('\n')[0]!.slice(0, 160)}`),
          );
          await measure(name, 'read', false, svc, planFor(o, svc.endpoint, body(READ_DOC), [h]));
        } else if (name === 'auth-cost') {
          authCost = await runAuthCost(s);
        } else if (name === 'login-load') {
          const r = await runLoginLoad(
            svc.endpoint,
            s.publicKey,
            planFor(o, svc.endpoint, body(READ_DOC), [pub]),
            async (n, plan) => {
              await measure(n, 'read', false, svc!, plan);
              return rows.find((row) => row.name === n);
            },
          );
          loginLines = r.lines;
          notes.push(...r.notes);
        } else if (name === 'read-filtered') {
          const t0 = Date.now();
          await seedListings(svc.url, s, 240_000);
          notes.push(
            `read-filtered: seeded 10,000 listings through GraphQL create + publish in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
          );
          await preflight(svc.endpoint, body(FILTERED_DOC), pub);
          await measure(name, 'filtered', false, svc, planFor(o, svc.endpoint, body(FILTERED_DOC), [pub]));
        } else if (name === 'operations') {
          const r = await runOperations(svc, s, db!.url);
          rows.push(...r.rows);
          notes.push(...r.notes);
        } else if (name === 'provision') {
          await runProvision(o, svc);
        } else if (name === 'files') {
          const r = await runFiles(svc, s, o.quick);
          rows.push(...r.rows);
          notes.push(...r.notes);
        } else if (name === 'write') {
          await gql(svc.url, s.secretKey, 'mutation($d: NoteInput!) { createNote(data: $d) { _id } }', {
            d: { title: 'probe', slug: 'probe', summary: 's', rating: 1, featured: false },
          });
          const sk = [{ 'x-api-key': s.secretKey }];
          await measure(name, 'write', false, svc, planFor(o, svc.endpoint, undefined, sk, 'write'));
          // The reference right after, same connections, same database (issue 11).
          await runWriteCeiling(planFor(o, svc.endpoint, undefined, sk, 'write'));
          await runWritePeer(o);
          await measure('write/create', 'write', false, svc, planFor(o, svc.endpoint, undefined, sk, 'create'));
          await measure('write/batch100', 'write', false, svc, planFor(o, svc.endpoint, undefined, sk, 'batch100'));
          writeNotes();
          await runImport(svc.url, s.secretKey, o.quick);
        }
      } catch (err) {
        unavailable[name] = (err as Error).message;
      }
    }
    // The rows with targets against ceiling-static again, in turns with it.
    await pairWith(
      o,
      'ceiling-static',
      svc,
      pub,
      [
        ['read-cached', body(READ_DOC), 0.8],
        ['read-trusted', TRUSTED_BODY, 0.85],
      ],
      readBytes,
    );
  } finally {
    await svc.stop();
    if (svc.profile) profiles.push(svc.profile);
  }
  if (wanted.includes('first-after-restart')) {
    try {
      notes.push(
        (await runFirstAfterRestart(() => startService(db!.url, { env: { SVC_RESPONSE_CACHE: 'off' } }), s.publicKey))
          .note,
      );
    } catch (err) {
      notes.push(`first-after-restart: failed: ${(err as Error).message.split('\n')[0]!.slice(0, 160)}`);
    }
  }
  if ((wanted.includes('read-uncached') && !unavailable['read-uncached']) || wanted.includes('read-trusted-uncached')) {
    // A second service process on the same database with the response cache off.
    let un: Target | undefined;
    try {
      un = await startService(db!.url, {
        env: { SVC_RESPONSE_CACHE: 'off' },
        profile: o.profile === 'read-uncached' ? o.profile : undefined,
      });
      await preflight(un.endpoint, body(READ_DOC), pub);
      const shared = async (row: string, run: () => Promise<void>) => {
        const before = await readStatements(un!);
        await run();
        const after = await readStatements(un!);
        if (!before || !after || after.statements === before.statements) return;
        const statements = after.statements - before.statements;
        const reads = statements + after.coalesced - before.coalesced;
        notes.push(
          `${row}: ${(reads / statements).toFixed(2)} reads per statement (${reads} reads, ${statements} statements; identical reads waiting for the pool share one, SVC_READ_COALESCE)`,
        );
      };
      if (wanted.includes('read-uncached'))
        await shared('read-uncached', () =>
          measure('read-uncached', 'read', false, un!, planFor(o, un!.endpoint, body(READ_DOC), [pub])),
        );
      if (wanted.includes('read-trusted-uncached')) {
        await preflight(un.endpoint, TRUSTED_BODY, pub);
        await shared('read-trusted-uncached', () =>
          measure('read-trusted-uncached', 'read', false, un!, planFor(o, un!.endpoint, TRUSTED_BODY, [pub])),
        );
      }
      // The rows with targets against ceiling-jit again, in turns with it.
      await pairWith(
        o,
        'ceiling-jit',
        un,
        pub,
        [
          ['read-uncached', body(READ_DOC), 0.5],
          ['read-trusted-uncached', TRUSTED_BODY, 0.5],
        ],
        readBytes,
      );
      if (customerToken && wanted.includes('read-uncached')) await runCustomerAb(o, un, s, customerToken);
    } catch (err) {
      unavailable['read-uncached'] = (err as Error).message;
    } finally {
      await un?.stop();
      if (un?.profile) profiles.push(un.profile);
    }
  }
  for (const name of wanted) {
    if (!unavailable[name]) continue;
    if (name === 'auth-cost') authCost = { na: unavailable[name]!.split('\n')[0]!.slice(0, 160) };
    else naRow(name, shapeOf(name), false, unavailable[name]!);
  }
}

/**
 * auth-customer, same process, interleaved (issue 12): the two rows above run on different
 * processes minutes apart, and on this shared box that alone moved the ratio between 0.95× and
 * 1.38× from one run to the next. A token-bearing read is never response-cached, so the
 * uncached process serves it exactly as the main one does: here key-only and key + token loads
 * alternate on that one process (order flipped every round, so drift in the box's load falls
 * on both sides), and the note gives each round's server-CPU ratio and their median.
 * `BENCH_AB_ROUNDS` (3) sets the rounds. The token is the one the main process minted for the
 * auth-customer row (verifying needs only the public key set; signing needs the vault key,
 * which this process, with its own data folder, does not share).
 */
async function runCustomerAb(o: Options, un: Target, s: Seeded, token: string): Promise<void> {
  const pub = { 'x-api-key': s.publicKey };
  const tok = { ...pub, authorization: `Bearer ${token}` };
  await preflight(un.endpoint, body(READ_DOC), tok);
  const rounds = Math.max(1, Number(process.env.BENCH_AB_ROUNDS || 3));
  const ratios: string[] = [];
  const values: number[] = [];
  for (let r = 1; r <= rounds; r++) {
    const order: [string, Record<string, string>][] = [
      [`read-uncached/ab${r}`, pub],
      [`auth-customer/ab${r}`, tok],
    ];
    if (r % 2 === 0) order.reverse();
    for (const [n, h] of order) await measure(n, 'read', false, un, planFor(o, un.endpoint, body(READ_DOC), [h]));
    const a = cpuPerRequest.get(`auth-customer/ab${r}`);
    const b = cpuPerRequest.get(`read-uncached/ab${r}`);
    if (!a || !b) continue;
    values.push(a.ns / b.ns);
    ratios.push(`${(a.ns / 1000).toFixed(1)}/${(b.ns / 1000).toFixed(1)} µs = ${(a.ns / b.ns).toFixed(3)}×`);
  }
  if (values.length === 0) return;
  values.sort((x, y) => x - y);
  const median = values[Math.floor(values.length / 2)]!;
  notes.push(
    `auth-customer vs read-uncached, same process, interleaved (server CPU per request, token ÷ key only): ${ratios.join('; ')}; median ${median.toFixed(3)}× → the token adds ${((median - 1) * 100).toFixed(1)} % (target: under 5 %)`,
  );
}

/**
 * Scenario `provision` (issue 18): provisioning rate beside bare project creates, then the same
 * key-only read rotating over every provisioned project against one project (the reference),
 * with the shared fleet schema cache's entries from /metrics and the process' RSS.
 */
async function runProvision(o: Options, svc: Target & { rootToken: string }): Promise<void> {
  const s = await seedFleetOwner(svc);
  const fleet = await setupFleet(svc.url, s, () => rssWindow(svc.child.pid));
  rows.push(...fleet.rows);
  notes.push(...fleet.notes);
  const one = [fleet.rotation[0]!];
  await preflight(svc.endpoint, body(FLEET_READ_DOC), one[0]!);
  await measure('provision/read-1', 'read', true, svc, planFor(o, svc.endpoint, body(FLEET_READ_DOC), one));
  const before = await cacheEntries(svc.url);
  await measure(
    `provision/read-${fleet.rotation.length}`,
    'read',
    false,
    svc,
    planFor(o, svc.endpoint, body(FLEET_READ_DOC), fleet.rotation),
  );
  const after = await cacheEntries(svc.url);
  notes.push(await fleetMemory());
  const r1 = rows.find((r) => r.name === 'provision/read-1')?.result;
  const rn = rows.find((r) => r.name === `provision/read-${fleet.rotation.length}`)?.result;
  if (r1 && rn) {
    notes.push(
      `provision/read-${fleet.rotation.length}: key-only read rotating over ${fleet.rotation.length} provisioned projects = ${(rn.rps / r1.rps).toFixed(2)} × the same read on one project (req/s), peak RSS ${rn.rssMb?.toFixed(0) ?? 'n/a'} MB against ${r1.rssMb?.toFixed(0) ?? 'n/a'} MB; ` +
        `GraphQL cache entries after the rotation: ${JSON.stringify(after)} (before it: ${JSON.stringify(before)}) — one shared schema and one compiled document serve every project`,
    );
  }
}

/** bench/fleet-memory.ts in its own process (its heap is measured): heap per project, members against standalone. */
async function fleetMemory(): Promise<string> {
  process.stderr.write(
    'bench: provision/memory (1,000 members against 1,000 standalone projects, bench/fleet-memory.ts) … ',
  );
  const child = startChild(process.execPath, [join(import.meta.dir, 'fleet-memory.ts'), '1000'], {
    label: 'fleet-memory',
    cwd: join(import.meta.dir, '..'),
    env: { DATABASE_URL: db!.url },
  });
  let out = '';
  child.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const timer = setTimeout(() => void child.stop('SIGKILL', 0), 300_000);
  await new Promise<void>((r) => (child.exited() ? r() : child.proc.once('exit', () => r())));
  clearTimeout(timer);
  const m = /MEMJSON (\{.*\})/.exec(out);
  if (!m) {
    process.stderr.write('failed\n');
    return `provision/memory: bench/fleet-memory.ts printed no result: ${child.tail().slice(0, 160)}`;
  }
  const r = JSON.parse(m[1]!) as {
    projects: number;
    memberBytesPerProject: number;
    standaloneBytesPerProject: number;
    memberTotalMb: number;
    standaloneTotalMb: number;
    sharedSchemas: number;
  };
  process.stderr.write(
    `${(r.memberBytesPerProject / 1024).toFixed(1)} KB against ${(r.standaloneBytesPerProject / 1024).toFixed(1)} KB per project\n`,
  );
  return `provision/memory: heap after one read per project (6 models, 40 fields): ${r.projects} fleet members on one version +${r.memberTotalMb.toFixed(1)} MB (${(r.memberBytesPerProject / 1024).toFixed(1)} KB per project, ${r.sharedSchemas} shared schema), ${r.projects} standalone projects with the same models +${r.standaloneTotalMb.toFixed(1)} MB (${(r.standaloneBytesPerProject / 1024).toFixed(1)} KB per project) = ${(r.standaloneBytesPerProject / Math.max(1, r.memberBytesPerProject)).toFixed(1)} × the member cost`;
}

/** The bench tenant's owner key (seedProject made it) is all the fleet part needs. */
async function seedFleetOwner(svc: Target & { rootToken: string }): Promise<Seeded> {
  if (!fleetSeed) throw new Error('the service was not seeded');
  void svc;
  return fleetSeed;
}
let fleetSeed: Seeded | undefined;

/** bench/references/write-ceiling.ts as its own process, with the write scenario's plan. */
async function runWriteCeiling(plan: LoadPlan): Promise<void> {
  process.stderr.write(
    `bench: write-ceiling (bare INSERT commits from Bun.SQL, ${plan.connections} connections, ${plan.durationMs / 1000} s) … `,
  );
  const input = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'write-ceiling.json');
  writeFileSync(
    input,
    JSON.stringify({
      databaseUrl: db!.url,
      connections: plan.connections,
      warmupMs: plan.warmupMs,
      durationMs: plan.durationMs,
    }),
  );
  const child = startChild(process.execPath, [join(import.meta.dir, 'references', 'write-ceiling.ts'), input], {
    label: 'write-ceiling',
    cwd: join(import.meta.dir, '..'),
  });
  const pg = await pgCpuWindow(db!.url).catch(() => undefined);
  let out = '';
  child.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const timer = setTimeout(() => void child.stop('SIGKILL', 0), plan.warmupMs + plan.durationMs + 60_000);
  await new Promise<void>((r) => (child.exited() ? r() : child.proc.once('exit', () => r())));
  clearTimeout(timer);
  const pgSeconds = await pg?.end();
  const m = /LOADJSON (\{.*\})/.exec(out);
  if (!m) {
    naRow('write-ceiling', 'write', true, `printed no result: ${child.tail()}`);
    process.stderr.write('failed\n');
    return;
  }
  const r = JSON.parse(m[1]!) as LoadResult & { cpuSeconds?: number };
  if (r.cpuSeconds !== undefined && pgSeconds !== undefined && r.rps > 0) {
    // The client's whole life (setup, warm-up, run; it reports its own CPU) against operations
    // at the measured rate over warm-up and run.
    const ops = (r.rps * (plan.warmupMs + plan.durationMs)) / 1000;
    writeCpu.set('write-ceiling', { client: (r.cpuSeconds * 1e6) / ops, pg: (pgSeconds * 1e6) / ops });
  }
  rows.push({ name: 'write-ceiling', shape: 'write', reference: true, result: { ...r, rssMb: undefined } });
  process.stderr.write(`${r.rps.toFixed(0)} commits/s\n`);
}

/**
 * The write peer (issue 11): PostGraphile 5 on Node 22 over `bench_ref.note` in the same
 * database, the same load generator and connections — GraphQL mutations over HTTP, each its own
 * commit — beside the service's pairs and creates. PostGraphile writes one row per mutation;
 * the service writes the record, its draft (and published) content and a version row, and
 * announces the change through the outbox, so this is the peer's work, not the same work.
 */
async function runWritePeer(o: Options): Promise<void> {
  let peer: Target | undefined;
  try {
    await createWritePeerTable(db!.url);
    peer = await startReference('postgraphile', { databaseUrl: db!.url });
    await measure('postgraphile/write', 'write', true, peer, planFor(o, peer.endpoint, undefined, [{}], 'peer-write'));
    await measure(
      'postgraphile/create',
      'write',
      true,
      peer,
      planFor(o, peer.endpoint, undefined, [{}], 'peer-create'),
    );
  } catch (err) {
    for (const n of ['postgraphile/write', 'postgraphile/create'])
      if (!rows.some((r) => r.name === n)) naRow(n, 'write', true, (err as Error).message);
  } finally {
    await peer?.stop();
  }
}

/** Records per second of the bulk paths, from the rows just measured. */
function writeNotes(): void {
  const rps = (n: string) => rows.find((r) => r.name === n)?.result?.rps;
  const single = rps('write/create');
  const batch = rps('write/batch100');
  const ceiling = rps('write-ceiling');
  const pairs = rps('write');
  if (pairs && ceiling)
    notes.push(
      `write: ${pairs.toFixed(0)} create+publish pairs/s = ${(pairs / ceiling).toFixed(3)} × write-ceiling (${ceiling.toFixed(0)} bare INSERT commits/s, same connections, same run); targets ≥ 0.4 (at least 0.25)`,
    );
  for (const [peer, mine] of [
    ['postgraphile/write', 'write'],
    ['postgraphile/create', 'write/create'],
  ] as const) {
    const p = rps(peer);
    const m = rps(mine);
    const cp = writeCpu.get(peer);
    const cm = writeCpu.get(mine);
    if (p && m)
      notes.push(
        `${mine}: ${m.toFixed(0)}/s = ${(m / p).toFixed(2)} × ${peer} (${p.toFixed(0)}/s, PostGraphile 5 on Node, same connections, same run)${cp && cm ? `; by CPU ${((cp.client + cp.pg) / (cm.client + cm.pg)).toFixed(2)} ×` : ''}`,
      );
  }
  for (const [name, c] of writeCpu) {
    const per =
      name === 'write' || name === 'postgraphile/write'
        ? 'create+publish pair'
        : name === 'write-ceiling'
          ? 'bare INSERT commit'
          : name === 'write/batch100'
            ? 'batch of 100'
            : 'create';
    const who =
      name === 'write-ceiling'
        ? 'the Bun.SQL client'
        : name.startsWith('postgraphile/')
          ? 'PostGraphile'
          : 'the service';
    notes.push(
      `${name}: CPU per ${per}: ${c.client.toFixed(0)} µs in ${who} + ${c.pg.toFixed(0)} µs in PostgreSQL backends = ${(c.client + c.pg).toFixed(0)} µs`,
    );
  }
  const cw = writeCpu.get('write');
  const cc = writeCpu.get('write-ceiling');
  if (cw && cc)
    notes.push(
      `write: by CPU (what a quiet 2-core box would allow when both are CPU-bound): pairs/s ≈ ${((cc.client + cc.pg) / (cw.client + cw.pg)).toFixed(3)} × write-ceiling`,
    );
  if (single && batch)
    notes.push(
      `write/batch100: ${(batch * 100).toFixed(0)} records/s in batches of 100 against ${single.toFixed(0)} records/s as single creates = ${((batch * 100) / single).toFixed(1)} × (target ≥ 10 ×)`,
    );
}

/** `svc records import` of a generated NDJSON file into the running service (issue 11: ≥ 5,000 records/s for 100,000). */
async function runImport(apiUrl: string, secretKey: string, quick: boolean): Promise<void> {
  const count = Number(process.env.BENCH_IMPORT_RECORDS || (quick ? 20_000 : 100_000));
  const file = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'records.ndjson');
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    lines.push(
      JSON.stringify({
        naturalKey: `imp-${i}`,
        data: {
          title: `Imported ${i}`,
          slug: `imported-${i}`,
          summary: 'imported by the bench',
          rating: i % 100,
          featured: i % 3 === 0,
        },
      }),
    );
  }
  writeFileSync(file, lines.join('\n') + '\n');
  process.stderr.write(`bench: write/import (svc records import of ${count.toLocaleString('en')} records) … `);
  let out = '';
  let err = '';
  const t0 = performance.now();
  const code = await runCli(
    ['records', 'import', '--file', file, '--model', 'note', '--json'],
    { out: (x) => (out += x), err: (x) => (err += x) },
    { SVC_URL: apiUrl, SVC_API_KEY: secretKey },
  );
  const seconds = (performance.now() - t0) / 1000;
  if (code !== 0) {
    notes.push(`write/import: failed: ${err.split('\n')[0]!.slice(0, 160)}`);
    process.stderr.write('failed\n');
    return;
  }
  const r = JSON.parse(out) as { created: number };
  notes.push(
    `write/import: svc records import created ${r.created.toLocaleString('en')} records in ${seconds.toFixed(1)} s = ${Math.round(r.created / seconds).toLocaleString('en')} records/s (batches of 500, target ≥ 5,000/s)`,
  );
  process.stderr.write(`${Math.round(r.created / seconds)} records/s\n`);
}

/** bench/auth-cost.ts in its own child process, on the bench database, beside the service. */
async function runAuthCost(s: Seeded): Promise<AuthCost> {
  process.stderr.write('bench: auth-cost (in-process microbenchmark, own child process) … ');
  const input = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'auth-cost.json');
  writeFileSync(
    input,
    JSON.stringify({ databaseUrl: db!.url, tenantId: s.tenantId, projectId: s.projectId, publicKey: s.publicKey }),
  );
  const child = startChild(process.execPath, [join(import.meta.dir, 'auth-cost.ts'), input], {
    label: 'auth-cost',
    cwd: join(import.meta.dir, '..'),
  });
  let out = '';
  child.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const timer = setTimeout(() => void child.stop('SIGKILL', 0), 120_000);
  await new Promise<void>((r) => (child.exited() ? r() : child.proc.once('exit', () => r())));
  clearTimeout(timer);
  const m = /AUTHJSON (\{.*\})/.exec(out);
  if (!m) throw new Error(`auth-cost printed no result: ${child.tail()}`);
  const r = JSON.parse(m[1]!) as AuthCost;
  process.stderr.write(`${(r.auth1000 / 1000).toFixed(2)} µs/request (1,000 keys)\n`);
  return r;
}

/** bench/customer-cost.ts in its own child process: the token path's CPU, in-process, A/B. */
async function runCustomerCost(s: Seeded, token: string): Promise<void> {
  process.stderr.write('bench: auth-customer, in-process CPU (own child process) … ');
  const input = join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'customer-cost.json');
  writeFileSync(input, JSON.stringify({ databaseUrl: db!.url, publicKey: s.publicKey, token }));
  const child = startChild(process.execPath, [join(import.meta.dir, 'customer-cost.ts'), input], {
    label: 'customer-cost',
    cwd: join(import.meta.dir, '..'),
  });
  let out = '';
  child.proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const timer = setTimeout(() => void child.stop('SIGKILL', 0), 120_000);
  await new Promise<void>((r) => (child.exited() ? r() : child.proc.once('exit', () => r())));
  clearTimeout(timer);
  const m = /CUSTJSON (\{.*\})/.exec(out);
  if (!m) throw new Error(`customer-cost printed no result: ${child.tail()}`);
  const r = JSON.parse(m[1]!) as CustomerCost;
  const us = (ns: number) => (ns / 1000).toFixed(2);
  notes.push(
    `auth-customer, in-process (bench/customer-cost.ts: Gate.authenticate + execute of the uncached read, 16 in flight, CPU time, ${r.rounds} alternating rounds): ` +
      `key only ${us(r.keyOnly)} µs, key + token ${us(r.withToken)} µs per request; the token adds ${us(r.extra)} µs = ${((100 * r.extra) / r.keyOnly).toFixed(1)} % (median of per-round differences, quartiles ${us(r.extraQ1)} to ${us(r.extraQ3)} µs; target: under 5 %)`,
  );
  process.stderr.write(`token adds ${us(r.extra)} µs of ${us(r.keyOnly)}\n`);
}

/**
 * auth-customer against read-uncached: a token-bearing read is never response-cached, so its
 * key-only twin is the uncached read; the difference in server CPU per request is what token
 * verification and principal resolution add (issue 12 target: under 5 %).
 */
function customerCostLines(us: (ns: number) => string): string[] {
  const tok = cpuPerRequest.get('auth-customer');
  const plain = cpuPerRequest.get('read-uncached');
  if (!tok) return [];
  const line = `| auth-customer (key + token): server CPU per HTTP request (${tok.cores.toFixed(2)} cores busy) | ${us(tok.ns)} | | |`;
  if (!plain) return [line];
  const extra = ((100 * (tok.ns - plain.ns)) / plain.ns).toFixed(1);
  return [
    line,
    `| read-uncached (key only, the same uncached path): server CPU per HTTP request | ${us(plain.ns)} | | |`,
    `| → the token adds ${extra} % to an uncached read's server CPU (target: under 5 %) | | | |`,
  ];
}

/** The auth-cost section: ns per request and its share of a cached read's cost. */
function authCostLines(): string[] {
  if (!authCost) return [];
  if ('na' in authCost) return ['## Auth cost', '', `n/a (${authCost.na})`, ''];
  const a = authCost;
  const http = cpuPerRequest.get('read-cached');
  const mixed = cpuPerRequest.get('auth-mixed');
  const pct = (x: number, of: number) => `${((100 * x) / of).toFixed(1)} %`;
  const us = (ns: number) => (ns / 1000).toFixed(2);
  const lines = [
    '## Auth cost',
    '',
    'In-process (bench/auth-cost.ts, warmed keys, median of 7 rounds): `Gate.admit` (authenticate + rate limit)',
    'per request, against the cost of a cached read measured in the same run. Issue 5 target: under 5 %.',
    '',
    '| measure | µs/request | % of cached read (server CPU per HTTP request) | % of in-process execute (GraphQL core) (cache hit) |',
    '|---|---:|---:|---:|',
  ];
  const row = (label: string, ns: number) =>
    lines.push(
      `| ${label} | ${us(ns)} | ${http ? pct(ns, http.ns) : 'n/a (read-cached not in this run)'} | ${pct(ns, a.read)} |`,
    );
  row('auth, 1 key', a.auth1);
  row('auth, 1,000 keys in rotation', a.auth1000);
  row('… of which Gate.authenticate', a.authenticate1000);
  row('… of which Gate.charge', a.rate1000);
  lines.push(
    `| cached read: execute (GraphQL core) (response cache hit) | ${us(a.read)} | ${http ? pct(a.read, http.ns) : ''} | |`,
  );
  if (http)
    lines.push(
      `| cached read: server CPU per HTTP request (read-cached, ${http.cores.toFixed(2)} cores busy) | ${us(http.ns)} | | |`,
    );
  if (mixed)
    lines.push(
      `| auth-mixed: server CPU per HTTP request (${mixed.cores.toFixed(2)} cores busy) | ${us(mixed.ns)} | ${http ? pct(mixed.ns, http.ns) : ''} | |`,
    );
  lines.push(...customerCostLines(us));
  lines.push('', `key queries made by the key cache while timing: ${a.keyQueries}`, '');
  return lines;
}

async function main(): Promise<number> {
  let o: Options;
  try {
    const cmp = parseCompare(process.argv.slice(2));
    if (cmp) {
      parse(cmp.args); // the same checks as a plain run, before building anything
      clearTimeout(deadline); // each run it starts has its own
      try {
        return await runCompare(cmp);
      } finally {
        rmSync(RUN_TMP, { recursive: true, force: true });
      }
    }
    o = parse(process.argv.slice(2));
  } catch (err) {
    console.error(`bench: ${(err as Error).message}`);
    return 2;
  }
  const pinned = process.env.BENCH_PORT ? Number(process.env.BENCH_PORT) : undefined;
  if (pinned !== undefined && (!Number.isInteger(pinned) || pinned <= 0 || pinned > 65535)) {
    console.error(`bench: BENCH_PORT must be a port number, got "${process.env.BENCH_PORT}"`);
    return 2;
  }
  const scenarios = o.names.filter((n): n is Scenario => (SCENARIOS as readonly string[]).includes(n));
  const refs = REFERENCES.filter((r) => o.names.includes(r));
  const dbRefs = refs.filter((r) => r === 'postgraphile' || r.startsWith('yoga-'));
  // read-replica runs on a primary and standby of its own (bench/read-replica.ts).
  const needDb = scenarios.some((n) => n !== 'read-replica') || dbRefs.length > 0;
  before = await conditions();
  peerNodeUsed =
    refs.some((r) => r === 'postgraphile' || r.startsWith('yoga-')) ||
    scenarios.includes('write') ||
    scenarios.includes('collab');
  try {
    if (needDb) {
      db = await openDatabase();
      if (dbRefs.length) await seedReferenceTables(db.url);
    }
    const readBytes: { file?: string } = {};
    // fan-out and collab run their own services and references (bench/fanout.ts, bench/collab.ts).
    const http = scenarios.filter(
      (n) => !isFanout(n) && n !== 'collab' && n !== 'fanout-3proc' && n !== 'read-replica',
    );
    const fanout = scenarios.filter(isFanout);
    if (http.length) await runService(o, http, pinned, readBytes);
    if (fanout.length) {
      const r = await runFanout(db!.url, fanout, o.quick);
      fanoutLines = r.lines;
      notes.push(...r.notes);
      for (const f of r.results) {
        const mode = f.name === 'fanout-sse' ? 'sse' : 'ws';
        if (f.svc?.cpuUsPerDelivery !== undefined)
          extraFigures[`${f.name}/cpu-us-per-delivery`] = {
            value: f.svc.cpuUsPerDelivery,
            unit: 'µs',
            errors: f.svc.failed + Math.max(0, f.svc.expected - f.svc.deliveries),
          };
        if (f.relay?.cpuUsPerDelivery !== undefined)
          extraFigures[`relay-${mode}/cpu-us-per-delivery`] = {
            value: f.relay.cpuUsPerDelivery,
            unit: 'µs',
            errors: f.relay.failed + Math.max(0, f.relay.expected - f.relay.deliveries),
          };
      }
    }
    if (scenarios.includes('fanout-3proc')) fanoutLines = [...fanoutLines, ...(await runFanout3(db!.url, o.quick))];
    if (scenarios.includes('collab')) {
      const c = await runCollab(db!.url, o.quick, o.profile === 'collab' ? 'collab' : undefined);
      if (c.profile) profiles.push(c.profile);
      collab = collabLines(c);
      Object.assign(extraFigures, collabFigures(c));
    }
    if (scenarios.includes('read-replica')) {
      const r = await runReadReplica(o);
      rows.push(...r.rows);
      notes.push(...r.notes);
      Object.assign(extraFigures, r.figures);
    }
    for (const r of refs) await runReference(o, r, readBytes);
  } catch (err) {
    console.error(`bench: ${(err as Error).message.split('\n')[0]}`);
    await cleanup();
    return 1;
  }
  const order = (r: Row) => {
    const base = r.name.split('/')[0]!;
    const i = (ALL as readonly string[]).indexOf(base);
    return (r.reference ? 0 : 100) + i * 2 + (r.name.includes('/') ? 1 : 0);
  };
  rows.sort((a, b) => order(a) - order(b));
  notes.push(...trustedRatios(rows));
  const table = [
    ...tableLines(rows.filter((r) => r.name !== 'auth-cost')),
    '',
    ...authCostLines(),
    ...loginLines,
    ...fanoutLines,
    ...collab,
  ];
  console.log(table.join('\n'));
  for (const n of notes) console.error(`note: ${n}`);
  for (const p of profiles)
    console.error(
      existsSync(p) ? `bench: CPU profile written to ${p}` : `bench: CPU profile expected at ${p} was not written`,
    );
  const wrk = wrkPath();
  const loadgen = `${wrk ? 'wrk (reads), bun bench/load.ts (write)' : 'bun bench/load.ts'}; ${process.env.BENCH_CONNECTIONS || 32} connections`;
  const after = await conditions();
  const file = writeResult({
    rows,
    before: before!,
    after,
    quick: o.quick,
    machine: describeBox({
      postgres: db?.version ?? 'not used',
      database: db?.label ?? 'not used',
      loadgen,
      peerNode: peerNodeUsed ? peerNode() : undefined,
    }),
    sections: [...authCostLines(), ...loginLines, ...fanoutLines, ...collab],
  });
  console.error(`bench: results written to ${file}`);
  console.error(`bench: ${writeResultsMarkdown()} regenerated from ${RESULTS_DIR}`);
  await cleanup();
  return 0;
}

/** Whether a Node peer ran (then the result names the Node 22 they ran on). */
let peerNodeUsed = false;
let before: Conditions | undefined;
const started = new Date();

/** The exact command, with the BENCH_* variables that shaped the run. */
function commandLine(): string {
  const env = Object.entries(process.env)
    .filter(([k]) => k.startsWith('BENCH_') && k !== 'BENCH_RESULTS_DIR' && k !== 'BENCH_RESULTS_MD')
    .map(([k, v]) => `${k}=${v}`);
  const args = process.argv.slice(2).join(' ');
  const cmd =
    process.env.npm_lifecycle_event === 'bench'
      ? `npm run bench${args ? ` -- ${args}` : ''}`
      : `bun bench/run.ts${args ? ` ${args}` : ''}`;
  return [...env, cmd].join(' ');
}

/** bench/results/<UTC timestamp>.json: this run as data (bench/results.ts). */
function writeResult(r: {
  rows: Row[];
  before: Conditions;
  after: Conditions;
  quick: boolean;
  machine: ResultFile['machine'];
  sections: string[];
}): string {
  const figures = { ...rowFigures(r.rows), ...extraFigures };
  const warm = r.rows.map((x) => x.result?.warmupMs).filter((x): x is number => x !== undefined);
  const plan = planFor({ names: [], quick: r.quick, profile: undefined, explicit: false }, '', undefined, [{}]);
  const finished = new Date();
  const data: ResultFile = {
    version: 1,
    started: started.toISOString(),
    finished: finished.toISOString(),
    seconds: (finished.getTime() - started.getTime()) / 1000,
    command: commandLine(),
    quick: r.quick,
    ...gitState(),
    machine: r.machine,
    conditions: {
      before: r.before,
      after: r.after,
      warmupMs: plan.warmupMs,
      durationMs: plan.durationMs,
      steadyWarmup: warm.length
        ? `until steady (3 × 500 ms windows within 10 %), at least ${plan.warmupMs / 1000} s: ${Math.min(...warm) / 1000}–${Math.max(...warm) / 1000} s${wrkPath() ? '; wrk rows: fixed' : ''}`
        : `${plan.warmupMs / 1000} s`,
    },
    rows: rowsJson(r.rows),
    figures,
    scenarios: evaluate(figures),
    notes,
    sections: r.sections,
  };
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `${stamp(started)}.json`);
  writeFileSync(file, JSON.stringify(data, null, 2) + '\n');
  return file;
}

process.on('SIGINT', () => onSignal('SIGINT'));
process.on('SIGTERM', () => onSignal('SIGTERM'));
process.on('exit', killAllNow);
process.on('exit', () => rmSync(RUN_TMP, { recursive: true, force: true }));
const deadline = setTimeout(
  () => {
    console.error(`bench: gave up after ${process.env.BENCH_TIMEOUT || 1800} s`);
    void cleanup().finally(() => process.exit(1));
  },
  Number(process.env.BENCH_TIMEOUT || 1800) * 1000,
);
deadline.unref();
const code = await main();
process.exit(code);
