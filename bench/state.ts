/**
 * What one `bun bench` run collects as its parts run: the rows, the figures that are not rows,
 * the notes and the sections under the table. One object, filled by the parts (bench/measure.ts,
 * service-rows.ts …) and read by bench/run.ts when it prints and writes the result; the database
 * is here too, since every part measures against it and the run closes it at the end.
 */
import type { AuthCost } from './auth-cost.ts';
import type { BenchDatabase } from './database.ts';
import type { Row } from './report.ts';
import type { Figure } from './results.ts';
import type { Seeded } from './seed.ts';

export interface BenchState {
  db: BenchDatabase | undefined;
  rows: Row[];
  notes: string[];
  /** Server CPU per request (ns) of the service rows, from /proc over the whole load run. */
  cpuPerRequest: Map<string, { ns: number; cores: number }>;
  /** Write rows: CPU µs per operation of the service (or the ceiling's client) and of PostgreSQL's backends. */
  writeCpu: Map<string, { client: number; pg: number }>;
  authCost: AuthCost | { na: string } | undefined;
  /** The auth-customer row's access token, reused by the same-process comparison (runCustomerAb). */
  customerToken: string | undefined;
  collab: string[];
  /** Figures that are not a row's req/s (collaboration per CPU-second, fan-out CPU per delivery …). */
  extraFigures: Record<string, Figure>;
  /** The login-under-load section (bench/login-load.ts). */
  loginLines: string[];
  profiles: string[];
  /** The fan-out section (bench/fanout.ts): its own table, with the relay reference beside it. */
  fanoutLines: string[];
  /** The bench tenant as seedProject made it, for the provision part (bench/provision-rows.ts). */
  fleetSeed: Seeded | undefined;
}

export const state: BenchState = {
  db: undefined,
  rows: [],
  notes: [],
  cpuPerRequest: new Map(),
  writeCpu: new Map(),
  authCost: undefined,
  customerToken: undefined,
  collab: [],
  extraFigures: {},
  loginLines: [],
  profiles: [],
  fanoutLines: [],
  fleetSeed: undefined,
};
