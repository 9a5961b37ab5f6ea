import { GraphQLError, Kind, type DocumentNode, type FragmentDefinitionNode, type OperationDefinitionNode, type SelectionSetNode } from 'graphql';

/**
 * Document limits, checked once per distinct document (the result is cached with the compiled
 * query), so a breach is a clear error before anything executes. Defaults are documented in
 * docs/graphql.md.
 */
export const LIMITS = {
  maxDepth: 12,
  maxAliases: 30,
  /** Each selected field costs 1, multiplied by the page size of every enclosing list field. */
  maxCost: 20_000,
  defaultPageSize: 20,
  maxPageSize: 100,
  maxBodyBytes: 1_000_000,
  maxBatchOperations: 100,
  /** Operations in one HTTP batch (a JSON array body); each counts against the rate limit. */
  maxHttpBatch: 20,
} as const;

const LIST_FIELDS = /^(records|searchRecords|search[A-Z]\w*s|\w+s)$/;

function limitError(message: string, code: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code } });
}

export function checkLimits(doc: DocumentNode, op: OperationDefinitionNode): GraphQLError | null {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of doc.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  let aliases = 0;
  let maxDepth = 0;
  const walk = (set: SelectionSetNode, depth: number, multiplier: number, seen: Set<string>): number => {
    let cost = 0;
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) {
        if (s.alias) aliases++;
        const d = depth + 1;
        if (d > maxDepth) maxDepth = d;
        cost += multiplier;
        if (s.selectionSet) {
          // Connection fields multiply their subtree by the page size asked for (or the default).
          let m = multiplier;
          const firstArg = s.arguments?.find((a) => a.name.value === 'first');
          if (firstArg || (LIST_FIELDS.test(s.name.value) && s.name.value !== 'edges')) {
            const n = firstArg?.value.kind === Kind.INT ? Number(firstArg.value.value) : LIMITS.defaultPageSize;
            m = multiplier * Math.max(1, Math.min(n, LIMITS.maxPageSize));
          }
          cost += walk(s.selectionSet, d, m, seen);
        }
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        cost += walk(s.selectionSet, depth, multiplier, seen);
      } else {
        const f = fragments.get(s.name.value);
        // A fragment cycle is reported by validation; here it just stops the walk.
        if (!f || seen.has(f.name.value)) continue;
        cost += walk(f.selectionSet, depth, multiplier, new Set(seen).add(f.name.value));
      }
      if (maxDepth > LIMITS.maxDepth) return cost;
    }
    return cost;
  };
  const cost = walk(op.selectionSet, 0, 1, new Set());
  if (maxDepth > LIMITS.maxDepth) return limitError(`Query depth ${maxDepth} exceeds the maximum of ${LIMITS.maxDepth}`, 'QUERY_TOO_DEEP');
  if (aliases > LIMITS.maxAliases) return limitError(`Query uses ${aliases} aliases; the maximum is ${LIMITS.maxAliases}`, 'TOO_MANY_ALIASES');
  if (cost > LIMITS.maxCost) return limitError(`Query cost ${cost} exceeds the maximum of ${LIMITS.maxCost}`, 'QUERY_TOO_COMPLEX');
  return null;
}
