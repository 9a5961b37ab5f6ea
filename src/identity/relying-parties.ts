import { randomBytes } from 'node:crypto';
import type { Sql } from '../store/db.ts';
import { newId } from '../ids.ts';
import type { ConfigError, Obj } from '../projects/types.ts';

/**
 * Relying parties and their custom domains (spec "Push semantics for relying parties").
 * Permission failures are per entry: the entry is reported and skipped, the rest applies.
 */
export interface PartyContext {
  tx: Sql;
  projectId: string;
  may: (perm: 'relyingparties:write' | 'domains:write') => boolean;
  /** Host the CNAME record of a custom domain points at. */
  cnameTarget: string;
  errors: ConfigError[];
  /** Domains registered by this push, with the DNS records to create. */
  registered: DomainChallenge[];
}

export interface DomainChallenge {
  domain: string;
  clientId: string;
  status: 'pending' | 'verified';
  records: { type: 'CNAME' | 'TXT'; name: string; value: string }[];
}

export const CHALLENGE_PREFIX = '_svc-challenge';

export function challengeOf(row: {
  domain: string;
  client_id: string;
  status: string;
  challenge_token: string;
  cname_target: string;
}): DomainChallenge {
  return {
    domain: row.domain,
    clientId: row.client_id,
    status: row.status as DomainChallenge['status'],
    records: [
      { type: 'CNAME', name: row.domain, value: row.cname_target },
      { type: 'TXT', name: `${CHALLENGE_PREFIX}.${row.domain}`, value: row.challenge_token },
    ],
  };
}

interface PartyRow {
  key: string;
  allowed_origins: string[];
  definition: Obj;
}

/** JSON with sorted keys: jsonb does not keep key order, so plain stringify would differ. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Obj)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

function sameDefinition(a: Obj, b: Obj): boolean {
  const strip = (o: Obj) => canonical({ ...o, allowedOrigins: undefined, customDomains: undefined });
  return strip(a) === strip(b);
}

export async function applyRelyingParties(ctx: PartyContext, entries: Obj[], force: boolean): Promise<number> {
  const { tx, projectId } = ctx;
  const existing = new Map(
    (
      await tx<PartyRow[]>`select key, allowed_origins, definition from relying_parties where project_id = ${projectId}`
    ).map((r) => [r.key, r]),
  );
  const declared = new Set(entries.map((e) => String(e.clientId)));
  let applied = 0;
  // Parties that left the config are pruned, together with their domains.
  for (const [key] of existing) {
    if (declared.has(key)) continue;
    if (!ctx.may('relyingparties:write')) {
      ctx.errors.push({
        path: 'relyingParties',
        message: `removing relying party "${key}" needs permission relyingparties:write`,
      });
      continue;
    }
    const domains = await tx<
      { domain: string }[]
    >`select domain from custom_domains where project_id = ${projectId} and client_id = ${key}`;
    if (domains.length > 0 && !ctx.may('domains:write')) {
      ctx.errors.push({
        path: 'relyingParties',
        message: `removing relying party "${key}" removes domain ${domains[0]!.domain}, which needs permission domains:write`,
      });
      continue;
    }
    await tx`delete from custom_domains where project_id = ${projectId} and client_id = ${key}`;
    await tx`delete from relying_parties where project_id = ${projectId} and key = ${key}`;
  }
  for (const [i, entry] of entries.entries()) {
    const path = `relyingParties[${i}]`;
    const clientId = String(entry.clientId);
    const before = force ? undefined : existing.get(clientId);
    const changed =
      !before ||
      !sameDefinition(before.definition, entry) ||
      ('allowedOrigins' in entry && JSON.stringify(entry.allowedOrigins) !== JSON.stringify(before.allowed_origins));
    if (changed && !ctx.may('relyingparties:write')) {
      const verb = existing.has(clientId) ? 'changing' : 'creating';
      ctx.errors.push({ path, message: `${verb} relying party "${clientId}" needs permission relyingparties:write` });
      continue;
    }
    // An omitted allowedOrigins keeps the stored list; [] clears it.
    const origins = Array.isArray(entry.allowedOrigins)
      ? (entry.allowedOrigins as string[])
      : (existing.get(clientId)?.allowed_origins ?? []);
    const definition: Obj = { ...entry, kind: 'customer' };
    if (!('kind' in entry)) delete definition.kind;
    if (changed) {
      if (force) await tx`delete from relying_parties where project_id = ${projectId} and key = ${clientId}`;
      const row = {
        project_id: projectId,
        key: clientId,
        position: i,
        kind: 'customer',
        name: String(entry.name),
        redirect_uris: entry.redirectUris as string[],
        allowed_scopes: Array.isArray(entry.allowedScopes) ? (entry.allowedScopes as string[]) : null,
        allowed_origins: origins,
        post_login_url: typeof entry.postLoginUrl === 'string' ? entry.postLoginUrl : null,
        definition: tx.json(definition as never),
      };
      const cols = Object.keys(row).filter((c) => c !== 'project_id' && c !== 'key');
      await tx`insert into relying_parties ${tx(row as unknown as Record<string, never>)}
               on conflict (project_id, key) do update set ${tx(row as unknown as Record<string, never>, cols as never[])}, updated_at = now()`;
    } else {
      await tx`update relying_parties set position = ${i} where project_id = ${projectId} and key = ${clientId}`;
    }
    if (Array.isArray(entry.customDomains))
      await reconcileDomains(ctx, clientId, entry.customDomains as string[], path);
    applied++;
  }
  return applied;
}

async function reconcileDomains(ctx: PartyContext, clientId: string, wanted: string[], path: string): Promise<void> {
  const { tx, projectId } = ctx;
  const current = await tx<{ domain: string }[]>`
    select domain from custom_domains where project_id = ${projectId} and client_id = ${clientId}`;
  const have = new Set(current.map((r) => r.domain));
  for (const d of have) {
    if (wanted.includes(d)) continue;
    if (!ctx.may('domains:write')) {
      ctx.errors.push({
        path: `${path}.customDomains`,
        message: `removing domain ${d} needs permission domains:write`,
      });
      continue;
    }
    await tx`delete from custom_domains where project_id = ${projectId} and domain = ${d}`;
  }
  for (const [j, d] of wanted.entries()) {
    if (have.has(d)) continue;
    const p = `${path}.customDomains[${j}]`;
    if (!ctx.may('domains:write')) {
      ctx.errors.push({ path: p, message: `adding domain ${d} needs permission domains:write` });
      continue;
    }
    const [taken] = await tx<{ client_id: string; project_id: string }[]>`
      select client_id, project_id from custom_domains where domain = ${d} and (status = 'verified' or project_id = ${projectId})`;
    if (taken) {
      const where = taken.project_id === projectId ? `relying party "${taken.client_id}"` : 'another project';
      ctx.errors.push({ path: p, message: `domain ${d} is already registered to ${where}` });
      continue;
    }
    const row = {
      id: newId('dom'),
      domain: d,
      client_id: clientId,
      status: 'pending',
      challenge_token: randomBytes(16).toString('hex'),
      cname_target: ctx.cnameTarget,
    };
    await tx`insert into custom_domains (id, project_id, domain, client_id, status, challenge_token, cname_target)
             values (${row.id}, ${projectId}, ${d}, ${clientId}, 'pending', ${row.challenge_token}, ${row.cname_target})`;
    ctx.registered.push(challengeOf(row));
  }
}

/** Parties as pull shows them: stored definition, live origins and domains. */
export async function readRelyingParties(sql: Sql, projectId: string): Promise<Obj[]> {
  const rows = await sql<PartyRow[]>`
    select key, allowed_origins, definition from relying_parties where project_id = ${projectId} order by position, key`;
  const domains = await sql<{ domain: string; client_id: string }[]>`
    select domain, client_id from custom_domains where project_id = ${projectId} order by created_at, domain`;
  return rows.map((r) => {
    const out: Obj = { ...r.definition };
    // Config order first (rows of one push share a timestamp), then anything else live.
    const order = Array.isArray(out.customDomains) ? (out.customDomains as string[]) : [];
    const rank = (d: string) => (order.includes(d) ? order.indexOf(d) : order.length);
    const own = domains
      .filter((d) => d.client_id === r.key)
      .map((d) => d.domain)
      .sort((a, b) => rank(a) - rank(b));
    if (own.length > 0 || 'customDomains' in out) out.customDomains = own;
    if (r.allowed_origins.length > 0 || 'allowedOrigins' in out) out.allowedOrigins = r.allowed_origins;
    return out;
  });
}
