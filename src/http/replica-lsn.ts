import { BadUserInput } from '../errors.ts';
import { formatLsn, parseLsn } from '../store/lsn.ts';
import type { ReadReplicas } from '../store/replicas.ts';

/**
 * Read-your-writes over HTTP (docs/scaling.md): a write's response names the position its commit
 * reached (`x-svc-lsn`, and the `svc_lsn` cookie for browsers such as the Studio); a read that
 * presents it is answered by a replica only once that replica has replayed it. Only with
 * DATABASE_READ_URL set: without replicas nothing is sent or read.
 */
export const LSN_HEADER = 'x-svc-lsn';
const COOKIE = 'svc_lsn';
/** Long enough for any replica in rotation to have caught up (SVC_REPLICA_MAX_LAG_MS is far less). */
const COOKIE_MAX_AGE = 60;
const LSN = /^[0-9A-Fa-f]{1,8}\/[0-9A-Fa-f]{1,8}$/;

/** The LSN a request presents (header, else cookie); 0 when none. A malformed header is a 400. */
export function presentedLsn(headers: Headers, replicas: ReadReplicas | undefined): number {
  if (!replicas) return 0;
  const h = headers.get(LSN_HEADER);
  if (h !== null) {
    if (!LSN.test(h.trim()))
      throw new BadUserInput(`${LSN_HEADER} must be a PostgreSQL LSN such as 0/16B3748 (from a write's response)`);
    return parseLsn(h);
  }
  const cookie = headers.get('cookie');
  if (!cookie || !cookie.includes(COOKIE)) return 0;
  const m = /(?:^|;\s*)svc_lsn=([0-9A-Fa-f]{1,8}(?:\/|%2F)[0-9A-Fa-f]{1,8})(?:;|$)/i.exec(cookie);
  return m ? parseLsn(m[1]!.replace(/%2F/i, '/')) : 0;
}

/** The header and cookie of a write's response: this process's latest commit, at or after the write's. */
export function lsnHeaders(replicas: ReadReplicas | undefined): Record<string, string> {
  if (!replicas || replicas.lastCommitLsn === 0) return {};
  const lsn = formatLsn(replicas.lastCommitLsn);
  return {
    [LSN_HEADER]: lsn,
    'set-cookie': `${COOKIE}=${lsn.replace('/', '%2F')}; Path=/; Max-Age=${COOKIE_MAX_AGE}; SameSite=Lax; HttpOnly`,
  };
}
