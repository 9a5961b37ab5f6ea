import type { Sql } from '../../store/db.ts';
import { parseClientId, type Party } from './protocol.ts';

/** The relying party a wire client_id names, or null (unknown project, unknown party, admin lane). */
export async function findParty(sql: Sql, wireClientId: unknown): Promise<Party | null> {
  const id = parseClientId(wireClientId);
  if (!id) return null;
  const [row] = await sql<
    {
      name: string;
      redirect_uris: string[];
      allowed_scopes: string[] | null;
      allowed_origins: string[];
      post_login_url: string | null;
      definition: Record<string, unknown>;
    }[]
  >`
    select name, redirect_uris, allowed_scopes, allowed_origins, post_login_url, definition from relying_parties
    where project_id = ${id.projectId} and key = ${id.clientId} and kind = 'customer'`;
  if (!row) return null;
  const lm = (row.definition.loginMethods ?? {}) as Record<string, unknown>;
  return {
    ...id,
    name: row.name,
    redirectUris: row.redirect_uris,
    allowedScopes: row.allowed_scopes,
    allowedOrigins: row.allowed_origins,
    postLoginUrl: row.post_login_url,
    loginMethods: {
      password: lm.password !== false,
      otp: lm.otp !== false,
      disabledProviders: Array.isArray(lm.disabledProviders)
        ? lm.disabledProviders.filter((k): k is string => typeof k === 'string')
        : [],
    },
  };
}

/** Whether any party lists the origin (CORS preflights carry no client_id). */
export async function originListed(sql: Sql, origin: string): Promise<boolean> {
  const [row] = await sql`select 1 from relying_parties where ${origin} = any(allowed_origins) limit 1`;
  return Boolean(row);
}
