/**
 * Interleaved pairs: a scenario and its reference measured in turns, `rounds` times each, both
 * processes up the whole time, the order flipped every round (A B, B A, A B…). A row and its
 * reference measured once each, a minute apart, differ by the box's drift: on the 2-core VMs we
 * run on, `ceiling-static` alone moved between 17.0k and 27.0k req/s from one run to the next
 * (bench/NOTES.md, issue 31). In turns, a drift falls on both sides alike.
 *
 * The figures: `<scenario>/interleaved`, the mean of the scenario's rounds, and
 * `<reference>/interleaved:<scenario>`, the mean of the reference's rounds beside it; their ratio
 * is the comparison (bench/comparisons.ts) an issue's target is judged on. The note lists every
 * round's ratio.
 */
import type { Figure } from './results.ts';

export interface PairSide {
  /** The row's name (a scenario or a reference). */
  name: string;
  /** Measures one round under `row` and returns its req/s (undefined: no successful request). */
  run(row: string): Promise<number | undefined>;
}

export interface Interleaved {
  figures: Record<string, Figure>;
  note: string;
}

/** `BENCH_PAIR_ROUNDS` rounds (default 3; 2 with --quick). */
export function pairRounds(quick: boolean): number {
  return Math.max(1, Number(process.env.BENCH_PAIR_ROUNDS || (quick ? 2 : 3)));
}

export async function interleave(
  scenario: PairSide,
  reference: PairSide,
  rounds: number,
  target?: number,
): Promise<Interleaved> {
  const a: number[] = [];
  const b: number[] = [];
  for (let r = 1; r <= rounds; r++) {
    const order = r % 2 === 1 ? [scenario, reference] : [reference, scenario];
    const got = new Map<PairSide, number | undefined>();
    for (const side of order) got.set(side, await side.run(`${side.name}/i${r}:${scenario.name}`));
    const x = got.get(scenario);
    const y = got.get(reference);
    // A round either side failed is left out of both means.
    if (x === undefined || y === undefined || y <= 0) continue;
    a.push(x);
    b.push(y);
  }
  const mean = (xs: number[]) => xs.reduce((s, v) => s + v, 0) / xs.length;
  const label = `${scenario.name} ÷ ${reference.name}, interleaved`;
  if (a.length === 0) return { figures: {}, note: `${label}: no round measured both` };
  const ratio = mean(a) / mean(b);
  const each = a.map((x, i) => (x / b[i]!).toFixed(2)).join(', ');
  return {
    figures: {
      [`${scenario.name}/interleaved`]: { value: mean(a), unit: 'req/s' },
      [`${reference.name}/interleaved:${scenario.name}`]: { value: mean(b), unit: 'req/s' },
    },
    note: `${label} (${a.length} rounds, order flipped each round): ${each}; of the means ${ratio.toFixed(2)}×${target ? ` (target ≥ ${target}×)` : ''}`,
  };
}
