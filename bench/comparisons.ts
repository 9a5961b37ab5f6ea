/**
 * What each scenario is compared with, and its target (issue 28, item 5). A figure is a row's
 * req/s (named as the row) or a scenario's own measure (`collab/…`, `fanout-…/…`). Targets are
 * reported as met or not in bench/RESULTS.md; no test asserts them.
 */
export interface Comparison {
  id: string;
  scenario: string;
  /** The scenario's figure. */
  figure: string;
  /** The reference figure from the same run (the ratio is figure ÷ reference). */
  reference?: string;
  /** Whether a higher or lower figure is better (for the reader; the ratio is always figure ÷ reference). */
  better: 'higher' | 'lower';
  target?: { of: 'ratio' | 'value'; op: '>=' | '<=' | '<'; value: number; text: string };
}

const ratio = (op: '>=' | '<=', value: number): Comparison['target'] => ({
  of: 'ratio',
  op,
  value,
  text: `${op === '>=' ? '≥' : '≤'} ${value} ×`,
});

export const COMPARISONS: readonly Comparison[] = [
  {
    id: 'read-cached/ceiling-static',
    scenario: 'read-cached',
    figure: 'read-cached',
    reference: 'ceiling-static',
    better: 'higher',
  },
  // Targets against the ceilings are judged on interleaved pairs (bench/interleave.ts): the
  // scenario and its reference in turns, both processes up; the single rows ran a minute apart.
  {
    id: 'read-cached/ceiling-static (interleaved)',
    scenario: 'read-cached',
    figure: 'read-cached/interleaved',
    reference: 'ceiling-static/interleaved:read-cached',
    better: 'higher',
    target: ratio('>=', 0.8),
  },
  {
    id: 'read-cached/postgraphile',
    scenario: 'read-cached',
    figure: 'read-cached',
    reference: 'postgraphile',
    better: 'higher',
    target: ratio('>=', 10),
  },
  {
    id: 'read-cached/yoga-cached',
    scenario: 'read-cached',
    figure: 'read-cached',
    reference: 'yoga-cached',
    better: 'higher',
    target: ratio('>=', 3),
  },
  {
    id: 'read-cached/yoga-jit',
    scenario: 'read-cached',
    figure: 'read-cached',
    reference: 'yoga-jit',
    better: 'higher',
  },
  {
    id: 'read-trusted/ceiling-static',
    scenario: 'read-trusted',
    figure: 'read-trusted',
    reference: 'ceiling-static',
    better: 'higher',
  },
  {
    id: 'read-trusted/ceiling-static (interleaved)',
    scenario: 'read-trusted',
    figure: 'read-trusted/interleaved',
    reference: 'ceiling-static/interleaved:read-trusted',
    better: 'higher',
    target: ratio('>=', 0.85),
  },
  {
    id: 'read-trusted-uncached/ceiling-jit',
    scenario: 'read-trusted-uncached',
    figure: 'read-trusted-uncached',
    reference: 'ceiling-jit',
    better: 'higher',
  },
  {
    id: 'read-trusted-uncached/ceiling-jit (interleaved)',
    scenario: 'read-trusted-uncached',
    figure: 'read-trusted-uncached/interleaved',
    reference: 'ceiling-jit/interleaved:read-trusted-uncached',
    better: 'higher',
    target: ratio('>=', 0.5),
  },
  {
    id: 'revalidate-304/ceiling-static',
    scenario: 'revalidate-304',
    figure: 'revalidate-304',
    reference: 'ceiling-static',
    better: 'higher',
  },
  {
    id: 'read-uncached/ceiling-jit',
    scenario: 'read-uncached',
    figure: 'read-uncached',
    reference: 'ceiling-jit',
    better: 'higher',
  },
  {
    id: 'read-uncached/ceiling-jit (interleaved)',
    scenario: 'read-uncached',
    figure: 'read-uncached/interleaved',
    reference: 'ceiling-jit/interleaved:read-uncached',
    better: 'higher',
    target: ratio('>=', 0.5),
  },
  {
    id: 'read-uncached/postgraphile',
    scenario: 'read-uncached',
    figure: 'read-uncached',
    reference: 'postgraphile',
    better: 'higher',
  },
  {
    id: 'read-uncached/yoga-jit',
    scenario: 'read-uncached',
    figure: 'read-uncached',
    reference: 'yoga-jit',
    better: 'higher',
  },
  {
    id: 'read-uncached/yoga-cached',
    scenario: 'read-uncached',
    figure: 'read-uncached',
    reference: 'yoga-cached',
    better: 'higher',
  },
  // Read replicas (bench/read-replica.ts): the same reads through a hot standby and on the
  // primary, one run; the read-back after a write with read-your-writes (x-svc-lsn) on.
  {
    id: 'read-replica/primary',
    scenario: 'read-replica',
    figure: 'read-replica',
    reference: 'read-replica/primary',
    better: 'higher',
  },
  {
    id: 'read-replica/primary-uncached',
    scenario: 'read-replica',
    figure: 'read-replica/uncached',
    reference: 'read-replica/primary-uncached',
    better: 'higher',
  },
  {
    id: 'read-replica/read-back-p50',
    scenario: 'read-replica',
    figure: 'read-replica/read-back-p50',
    reference: 'read-replica/primary-read-back-p50',
    better: 'lower',
  },
  {
    id: 'read-replica/read-back-p99',
    scenario: 'read-replica',
    figure: 'read-replica/read-back-p99',
    reference: 'read-replica/primary-read-back-p99',
    better: 'lower',
  },
  {
    id: 'read-filtered/ceiling-jit',
    scenario: 'read-filtered',
    figure: 'read-filtered',
    reference: 'ceiling-jit/filtered',
    better: 'higher',
  },
  {
    id: 'read-filtered/postgraphile',
    scenario: 'read-filtered',
    figure: 'read-filtered',
    reference: 'postgraphile/filtered',
    better: 'higher',
  },
  {
    id: 'read-filtered/yoga-jit',
    scenario: 'read-filtered',
    figure: 'read-filtered',
    reference: 'yoga-jit/filtered',
    better: 'higher',
  },
  {
    id: 'read-filtered/yoga-cached',
    scenario: 'read-filtered',
    figure: 'read-filtered',
    reference: 'yoga-cached/filtered',
    better: 'higher',
  },
  {
    id: 'auth-mixed/read-cached',
    scenario: 'auth-mixed',
    figure: 'auth-mixed',
    reference: 'read-cached',
    better: 'higher',
  },
  {
    id: 'auth-customer/read-uncached',
    scenario: 'auth-customer',
    figure: 'auth-customer',
    reference: 'read-uncached',
    better: 'higher',
  },
  {
    id: 'write/postgraphile',
    scenario: 'write',
    figure: 'write',
    reference: 'postgraphile/write',
    better: 'higher',
    target: ratio('>=', 1.5),
  },
  { id: 'write/write-ceiling', scenario: 'write', figure: 'write', reference: 'write-ceiling', better: 'higher' },
  {
    id: 'write/create/postgraphile',
    scenario: 'write/create',
    figure: 'write/create',
    reference: 'postgraphile/create',
    better: 'higher',
  },
  {
    id: 'collab/hocuspocus',
    scenario: 'collab',
    figure: 'collab/updates-per-cpu-second-with-pg',
    reference: 'hocuspocus/updates-per-cpu-second-with-pg',
    better: 'higher',
    target: ratio('>=', 1.5),
  },
  {
    id: 'collab/y-websocket',
    scenario: 'collab',
    figure: 'collab/updates-per-cpu-second',
    reference: 'y-websocket/updates-per-cpu-second',
    better: 'higher',
  },
  {
    id: 'collab/p99',
    scenario: 'collab',
    figure: 'collab/p99',
    better: 'lower',
    target: { of: 'value', op: '<', value: 20, text: '< 20 ms' },
  },
  {
    id: 'collab/pg-per-save',
    scenario: 'collab',
    figure: 'collab/pg-ms-per-save',
    better: 'lower',
    target: { of: 'value', op: '<=', value: 2, text: '≤ 2 ms' },
  },
  {
    id: 'operations/graphile-worker',
    scenario: 'operations',
    figure: 'operations',
    reference: 'graphile-worker',
    better: 'higher',
    target: ratio('>=', 1),
  },
  {
    id: 'operations/direct',
    scenario: 'operations',
    figure: 'operations',
    reference: 'operations/direct',
    better: 'higher',
  },
  {
    id: 'fanout-sse/relay',
    scenario: 'fanout-sse',
    figure: 'fanout-sse/cpu-us-per-delivery',
    reference: 'relay-sse/cpu-us-per-delivery',
    better: 'lower',
    target: ratio('<=', 1.2),
  },
  {
    id: 'fanout-ws/cpu',
    scenario: 'fanout-ws',
    figure: 'fanout-ws/cpu-us-per-delivery',
    reference: 'relay-ws/cpu-us-per-delivery',
    better: 'lower',
    target: { of: 'value', op: '<=', value: 2, text: '≤ 2 µs' },
  },
  {
    id: 'provision/read-1',
    scenario: 'provision',
    figure: 'provision/read-500',
    reference: 'provision/read-1',
    better: 'higher',
  },
  {
    id: 'files-upload/bun',
    scenario: 'files',
    figure: 'files-upload',
    reference: 'files-upload/bun',
    better: 'higher',
  },
  {
    id: 'files-webp/static',
    scenario: 'files',
    figure: 'files-webp',
    reference: 'files-webp/static',
    better: 'higher',
  },
];
