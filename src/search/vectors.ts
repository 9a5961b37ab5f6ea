import { BadUserInput } from '../errors.ts';

/**
 * Embedding vectors and model names as clients send them (no I/O). A vector is 1 to 2,000
 * finite numbers that fit PostgreSQL's `real` (pgvector's HNSW limit is 2,000 dimensions), not
 * all zero (cosine similarity needs a length).
 */
export const MAX_DIMENSIONS = 2000;
const REAL_MAX = 3.4e38;
const MODEL_RE = /^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$/;

export function checkVector(v: unknown, field = 'vector'): { values: number[]; norm: number } {
  if (!Array.isArray(v) || v.length === 0 || v.length > MAX_DIMENSIONS) {
    throw new BadUserInput(`${field} must be a list of 1 to ${MAX_DIMENSIONS} numbers`, { field });
  }
  let sum = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (typeof x !== 'number' || !Number.isFinite(x))
      throw new BadUserInput(`${field}[${i}] is not a finite number (NaN and Infinity are refused)`, { field });
    if (Math.abs(x) > REAL_MAX)
      throw new BadUserInput(`${field}[${i}] is outside the range of a 32-bit float`, { field });
    sum += x * x;
  }
  const norm = Math.sqrt(sum);
  if (!(norm > 0) || !Number.isFinite(norm))
    throw new BadUserInput(`${field} must not be all zeros (cosine similarity needs a direction)`, { field });
  return { values: v as number[], norm };
}

export function checkModelName(v: unknown, field = 'model'): string {
  if (typeof v !== 'string' || !MODEL_RE.test(v)) {
    throw new BadUserInput(
      `${field} must name the embedding model (letters, digits and . _ : / @ -, at most 128 characters), for example text-embedding-3-small`,
      { field },
    );
  }
  return v;
}

/** pgvector's text form of a vector: `[1,2,3]`. */
export function vectorLiteral(values: readonly number[]): string {
  return `[${values.join(',')}]`;
}
