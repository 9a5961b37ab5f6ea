/**
 * Interleaved pairs (bench/interleave.ts) as the run does them: the service rows with a target
 * against a ceiling, measured again in turns with a reference process started for them.
 */
import { READ_DOC } from './data.ts';
import { interleave, pairRounds, type PairSide } from './interleave.ts';
import { body, measure, preflight } from './measure.ts';
import { planFor, type Options, type Scenario } from './options.ts';
import { state } from './state.ts';
import { startReference, type ReferenceName, type Target } from './targets.ts';

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
      return state.rows.find((r) => r.name === row)?.result?.rps;
    },
  };
}

/**
 * Each of `rows` this run measured on `svc` ([name, body, target]) and the reference `name`
 * (started once for them, beside `svc`) in turns (bench/interleave.ts): the figures their targets
 * are judged on.
 */
export async function pairWith(
  o: Options,
  name: ReferenceName,
  svc: Target,
  headers: Record<string, string>,
  candidates: readonly [row: Scenario, body: string, target: number][],
  readBytes: { file?: string },
): Promise<void> {
  const scenarios = candidates
    .filter(([n]) => state.rows.some((r) => r.name === n && r.result))
    .map(([n, b, target]) => ({ side: readSide(o, n, svc, b, headers), target }));
  if (scenarios.length === 0) return;
  let ref: Target | undefined;
  try {
    ref = await startReference(name, { databaseUrl: state.db?.url, bodyFile: readBytes.file });
    await preflight(ref.endpoint, body(READ_DOC), {});
    const reference = readSide(o, name, ref, body(READ_DOC), {}, true);
    for (const { side, target } of scenarios) {
      const r = await interleave(side, reference, pairRounds(o.quick), target);
      Object.assign(state.extraFigures, r.figures);
      state.notes.push(r.note);
    }
  } catch (err) {
    const names = scenarios.map((x) => x.side.name).join(', ');
    state.notes.push(
      `${names} ÷ ${name}, interleaved: failed: ${(err as Error).message.split('\n')[0]!.slice(0, 160)}`,
    );
  } finally {
    await ref?.stop();
  }
}
