import type { Sql } from '../store/db.ts';
import type { EventBus } from '../bus/bus.ts';
import { BadUserInput, NotFound } from '../errors.ts';

/**
 * Customer profiles for targeting (issue 12, item 5): the attributes segment rules read.
 * Token-bearing reads need them on every request, so each process keeps the profiles it has
 * read (bounded in bytes, least recently used out first) and drops one when `customer.changed`
 * says it changed, from any process; after a bus reconnect (events may have been missed) the
 * whole cache goes. A profile is read at most once per process until it changes.
 *
 * Attributes are written by the project's servers (`updateCustomerAttributes`, secret keys
 * with `customers:write`), never by the customer: segments decide what content a customer
 * sees, so a customer must not be able to place themselves in one.
 */
export interface Profile {
  customerId: string;
  email: string;
  name: string | null;
  attributes: Record<string, unknown>;
}

const CACHE_BYTES = 8 * 1024 * 1024;
/** Largest attribute document, as JSON text. */
export const MAX_ATTRIBUTES_BYTES = 16 * 1024;

export class CustomerProfiles {
  readonly #sql: Sql;
  readonly #entries = new Map<string, { profile: Profile | null; bytes: number }>();
  readonly #loading = new Map<string, Promise<Profile | null>>();
  #bytes = 0;
  /** Bumped by every invalidation: a load that started before must not be cached. */
  #gen = 0;
  readonly #off: (() => void)[];

  constructor(sql: Sql, bus: EventBus) {
    this.#sql = sql;
    this.#off = [
      bus.subscribe((e) => {
        if (e.type === 'customer.changed') this.drop(e.projectId, e.customerId);
      }),
      bus.onReconnect(() => this.clear()),
    ];
  }

  /**
   * Bumped whenever any cached profile may have changed (a drop or a clear): what is derived from
   * a profile (the targeting memo kept with a verified token, graphql/targeting.ts) is reused
   * only while this has not moved.
   */
  get generation(): number {
    return this.#gen;
  }

  /** The customer's profile (null when there is no such customer in the project). */
  get(projectId: string, customerId: string): Promise<Profile | null> {
    const k = `${projectId}\0${customerId}`;
    const hit = this.#entries.get(k);
    if (hit) {
      // Most recently used goes last (Map keeps insertion order).
      this.#entries.delete(k);
      this.#entries.set(k, hit);
      return Promise.resolve(hit.profile);
    }
    let p = this.#loading.get(k);
    if (!p) {
      const gen = this.#gen;
      p = this.#load(projectId, customerId).then(
        (profile) => {
          this.#loading.delete(k);
          if (gen === this.#gen) this.#store(k, profile);
          return profile;
        },
        (err) => {
          this.#loading.delete(k);
          throw err;
        },
      );
      this.#loading.set(k, p);
    }
    return p;
  }

  drop(projectId: string, customerId: string): void {
    this.#gen++;
    const k = `${projectId}\0${customerId}`;
    const e = this.#entries.get(k);
    if (e) {
      this.#entries.delete(k);
      this.#bytes -= e.bytes;
    }
  }

  clear(): void {
    this.#gen++;
    this.#entries.clear();
    this.#bytes = 0;
  }

  close(): void {
    for (const off of this.#off) off();
    this.clear();
  }

  async #load(projectId: string, customerId: string): Promise<Profile | null> {
    const [row] = await this.#sql<
      { id: string; email: string; name: string | null; attributes: Record<string, unknown> }[]
    >`
      select id, email, name, attributes from customers where project_id = ${projectId} and id = ${customerId} and disabled_at is null`;
    return row ? { customerId: row.id, email: row.email, name: row.name, attributes: row.attributes ?? {} } : null;
  }

  #store(k: string, profile: Profile | null): void {
    const bytes =
      256 +
      2 *
        (k.length +
          (profile
            ? JSON.stringify(profile.attributes).length + profile.email.length + (profile.name?.length ?? 0)
            : 0));
    if (bytes > CACHE_BYTES / 8) return;
    this.#entries.set(k, { profile, bytes });
    this.#bytes += bytes;
    for (const [key, e] of this.#entries) {
      if (this.#bytes <= CACHE_BYTES) break;
      this.#entries.delete(key);
      this.#bytes -= e.bytes;
    }
  }
}

/** The subject segment rules are evaluated against: the attributes, also under `customer.` with email and name. */
export function segmentSubject(p: Profile): Record<string, unknown> {
  return { ...p.attributes, customer: { id: p.customerId, email: p.email, name: p.name, ...p.attributes } };
}

function checkAttributes(v: unknown): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new BadUserInput('attributes must be a JSON object', { field: 'attributes' });
  for (const k of Object.keys(v)) {
    if (k.length === 0 || k.length > 100 || !/^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(k)) {
      throw new BadUserInput(
        `attribute name "${k.slice(0, 40)}" must start with a letter and hold only letters, digits, _ and - (at most 100)`,
        { field: 'attributes' },
      );
    }
  }
  if (JSON.stringify(v).length > MAX_ATTRIBUTES_BYTES)
    throw new BadUserInput(`attributes must be at most ${MAX_ATTRIBUTES_BYTES / 1024} KB as JSON`, {
      field: 'attributes',
    });
  return v as Record<string, unknown>;
}

/**
 * Sets a customer's attributes: merged into the stored ones (a null value removes that
 * attribute), or replacing them with `merge: false`. Announces `customer.changed` after the
 * commit, so every process re-reads the profile on its next read.
 */
export async function updateAttributes(
  sql: Sql,
  bus: EventBus,
  projectId: string,
  customerId: string,
  attributes: unknown,
  merge: boolean,
): Promise<Profile> {
  const attrs = checkAttributes(attributes);
  const removed = Object.keys(attrs).filter((k) => attrs[k] === null);
  const set = Object.fromEntries(Object.entries(attrs).filter(([, v]) => v !== null));
  const profile = await sql.begin(async (tx) => {
    const [row] = await tx<{ id: string; email: string; name: string | null; attributes: Record<string, unknown> }[]>`
      update customers set updated_at = now(),
        attributes = (case when ${merge} then attributes || ${tx.json(set as never)}::jsonb else ${tx.json(set as never)}::jsonb end) - ${removed}::text[]
      where project_id = ${projectId} and id = ${customerId}
      returning id, email, name, attributes`;
    if (!row) throw new NotFound(`No customer "${customerId}"`);
    // A merge may grow the document past the bound: refused, and rolled back with the transaction.
    if (JSON.stringify(row.attributes).length > MAX_ATTRIBUTES_BYTES)
      throw new BadUserInput(`attributes must be at most ${MAX_ATTRIBUTES_BYTES / 1024} KB as JSON`, {
        field: 'attributes',
      });
    return { customerId: row.id, email: row.email, name: row.name, attributes: row.attributes };
  });
  await bus.publish({ type: 'customer.changed', projectId, customerId });
  return profile;
}
