/**
 * What `bun bench` was asked for: the scenario and reference names, the flags, and the load plan
 * every row's run gets from them (bench/run.ts parses, the other parts plan).
 */
import type { LoadPlan } from './load.ts';
import { FANOUT, type FanoutName } from './fanout.ts';
import { REFERENCES } from './targets.ts';
import { TRUSTED_SCENARIOS } from './trusted.ts';

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
export type Scenario = (typeof SCENARIOS)[number];
export const ALL = [...REFERENCES, ...SCENARIOS] as const;
export type Name = (typeof ALL)[number];
export const isFanout = (n: string): n is FanoutName => (FANOUT as readonly string[]).includes(n);

const USAGE = `usage: bun bench [${ALL.join('|')} ...] [--quick] [--profile <name>] [--compare <git-ref> [--rounds N]]`;

export interface Options {
  names: Name[];
  quick: boolean;
  profile: Name | undefined;
  explicit: boolean;
}

export function parse(argv: string[]): Options {
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

export function planFor(
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
