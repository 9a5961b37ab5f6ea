import type { Sql } from '../../store/db.ts';

/**
 * Which verified custom domain a `Host` names (issue 16 item 5), cached per process: positive
 * answers for a minute, negative ones for five seconds, at most 2,000 hosts (a host name is at
 * most 253 characters, so the cache stays under a megabyte). A newly verified domain serves
 * within seconds; a removed one stops within a minute.
 */
export interface DomainOwner {
  projectId: string;
  clientId: string;
}

const HIT_MS = 60_000;
const MISS_MS = 5_000;
const MAX_HOSTS = 2000;

export class DomainDirectory {
  readonly #sql: Sql;
  readonly #cache = new Map<string, { until: number; owner: DomainOwner | null }>();

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  /** The owner of a verified domain, by host name (no port, any case); null for any other host. */
  async lookup(hostname: string): Promise<DomainOwner | null> {
    const host = hostname.toLowerCase();
    if (host.length === 0 || host.length > 253 || !/^[a-z0-9.-]+$/.test(host)) return null;
    const hit = this.#cache.get(host);
    if (hit && hit.until > Date.now()) return hit.owner;
    const [row] = await this.#sql<{ project_id: string; client_id: string }[]>`
      select project_id, client_id from custom_domains where domain = ${host} and status = 'verified'`;
    const owner = row ? { projectId: row.project_id, clientId: row.client_id } : null;
    this.#cache.delete(host);
    while (this.#cache.size >= MAX_HOSTS) this.#cache.delete(this.#cache.keys().next().value as string);
    this.#cache.set(host, { until: Date.now() + (owner ? HIT_MS : MISS_MS), owner });
    return owner;
  }
}
