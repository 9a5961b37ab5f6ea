/**
 * The service's HTTP scenarios: one service process, seeded through its public surfaces, each
 * wanted row measured on it, then the rows with a ceiling target in turns with that ceiling; a
 * restart for first-after-restart; a second process with the response cache off for the uncached
 * rows. A scenario that could not run becomes an n/a row with the reason.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runAuthCost, runCustomerAb, runCustomerCost } from './auth-rows.ts';
import { FILTERED_DOC, READ_DOC } from './data.ts';
import { runFiles } from './files-scenario.ts';
import { runLoginLoad } from './login-load.ts';
import { body, measure, naRow, preflight, preflightAnswer } from './measure.ts';
import { runOperations } from './operations-scenario.ts';
import { planFor, SCENARIOS, type Options, type Scenario } from './options.ts';
import { pairWith } from './pairs.ts';
import { runProvision } from './provision-rows.ts';
import type { Row } from './report.ts';
import { gql, rotationKeys, seedArticles, seedListings, seedProject, type Seeded } from './seed.ts';
import { state } from './state.ts';
import { readStatements, startService, type Target } from './targets.ts';
import { pushTrustedRead, runFirstAfterRestart, runRevalidate, TRUSTED_BODY, TRUSTED_SCENARIOS } from './trusted.ts';
import { runImport, runWriteCeiling, runWritePeer, writeNotes } from './write-rows.ts';

/** The rows judged against ceiling-static in turns with it (bench/pairs.ts): [row, body, target]. */
const STATIC_PAIRS: readonly [row: Scenario, body: string, target: number][] = [
  ['read-cached', body(READ_DOC), 0.8],
  ['read-trusted', TRUSTED_BODY, 0.85],
];
/** The same against ceiling-jit, on the process with the response cache off. */
const JIT_PAIRS: readonly [row: Scenario, body: string, target: number][] = [
  ['read-uncached', body(READ_DOC), 0.5],
  ['read-trusted-uncached', TRUSTED_BODY, 0.5],
];

export async function runService(
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
    svc = await startService(state.db!.url, {
      pinnedPort,
      profile:
        o.profile && o.profile !== 'read-uncached' && (SCENARIOS as readonly string[]).includes(o.profile)
          ? o.profile
          : undefined,
    });
    seeded = await seedProject(svc.url, svc.rootToken, state.db!.url);
    state.fleetSeed = seeded;
    state.notes.push(...seeded.notes);
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
          state.rows.push({
            name,
            shape: 'read',
            reference: false,
            result: { ...(await runRevalidate(svc, s.publicKey, plan)), rssMb: undefined },
          });
        } else if (name === 'auth-mixed') {
          const keys = await rotationKeys(svc.url, state.db!.url, s, 1_000);
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
          state.customerToken = reg.data.registerCustomer.accessToken;
          await runCustomerCost(s, state.customerToken!).catch((err) =>
            state.notes.push(
              `auth-customer, in-process: failed: ${(err as Error).message.split('\n')[0]!.slice(0, 160)}`,
            ),
          );
          await measure(name, 'read', false, svc, planFor(o, svc.endpoint, body(READ_DOC), [h]));
        } else if (name === 'auth-cost') {
          state.authCost = await runAuthCost(s);
        } else if (name === 'login-load') {
          const r = await runLoginLoad(
            svc.endpoint,
            s.publicKey,
            planFor(o, svc.endpoint, body(READ_DOC), [pub]),
            async (n, plan) => {
              await measure(n, 'read', false, svc!, plan);
              return state.rows.find((row) => row.name === n);
            },
          );
          state.loginLines = r.lines;
          state.notes.push(...r.notes);
        } else if (name === 'read-filtered') {
          const t0 = Date.now();
          await seedListings(svc.url, s, 240_000);
          state.notes.push(
            `read-filtered: seeded 10,000 listings through GraphQL create + publish in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
          );
          await preflight(svc.endpoint, body(FILTERED_DOC), pub);
          await measure(name, 'filtered', false, svc, planFor(o, svc.endpoint, body(FILTERED_DOC), [pub]));
        } else if (name === 'operations') {
          const r = await runOperations(svc, s, state.db!.url);
          state.rows.push(...r.rows);
          state.notes.push(...r.notes);
        } else if (name === 'provision') {
          await runProvision(o, svc);
        } else if (name === 'files') {
          const r = await runFiles(svc, s, o.quick);
          state.rows.push(...r.rows);
          state.notes.push(...r.notes);
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
    await pairWith(o, 'ceiling-static', svc, pub, STATIC_PAIRS, readBytes);
  } finally {
    await svc.stop();
    if (svc.profile) state.profiles.push(svc.profile);
  }
  if (wanted.includes('first-after-restart')) {
    try {
      state.notes.push(
        (
          await runFirstAfterRestart(
            () => startService(state.db!.url, { env: { SVC_RESPONSE_CACHE: 'off' } }),
            s.publicKey,
          )
        ).note,
      );
    } catch (err) {
      state.notes.push(`first-after-restart: failed: ${(err as Error).message.split('\n')[0]!.slice(0, 160)}`);
    }
  }
  if ((wanted.includes('read-uncached') && !unavailable['read-uncached']) || wanted.includes('read-trusted-uncached')) {
    // A second service process on the same database with the response cache off.
    let un: Target | undefined;
    try {
      un = await startService(state.db!.url, {
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
        state.notes.push(
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
      await pairWith(o, 'ceiling-jit', un, pub, JIT_PAIRS, readBytes);
      if (state.customerToken && wanted.includes('read-uncached')) await runCustomerAb(o, un, s, state.customerToken);
    } catch (err) {
      unavailable['read-uncached'] = (err as Error).message;
    } finally {
      await un?.stop();
      if (un?.profile) state.profiles.push(un.profile);
    }
  }
  for (const name of wanted) {
    if (!unavailable[name]) continue;
    if (name === 'auth-cost') state.authCost = { na: unavailable[name]!.split('\n')[0]!.slice(0, 160) };
    else naRow(name, shapeOf(name), false, unavailable[name]!);
  }
}
