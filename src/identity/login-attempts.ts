import type { Sql } from '../store/db.ts';
import { RateLimited } from '../errors.ts';

/**
 * Failed customer logins, counted per email and per client IP over a window (in PostgreSQL, so
 * every process sees the same count): past a limit a login is RATE_LIMITED whatever the
 * password or code. Used by password and one-time-code logins alike (accounts.ts, customer-otp.ts).
 */
export const WINDOW_MINUTES = 15;
export const EMAIL_FAILURE_LIMIT = 10;
export const IP_FAILURE_LIMIT = 100;

/**
 * Takes one attempt per subject (email, client IP) before the password or code is checked:
 * the attempt is written first and counted after, so concurrent attempts all see each other
 * (counting first let a burst of 20 wrong passwords sent at once all pass a check that saw
 * none of them). Past a limit the attempt is taken back and the login is RATE_LIMITED — a
 * refused attempt leaves no row, so a flood cannot grow the table. A failed attempt stays as
 * the failure record; a successful one is given back (`attemptSucceeded`).
 */
export async function takeAttempt(
  sql: Sql,
  projectId: string,
  subjects: { subject: string; limit: number }[],
): Promise<string[]> {
  const taken = await sql<{ ctid: string }[]>`
    insert into customer_login_failures (project_id, subject) select ${projectId}, unnest(${subjects.map((s) => s.subject)}::text[])
    returning ctid::text as ctid`;
  const ctids = taken.map((r) => r.ctid);
  const rows = await sql<{ subject: string; n: number }[]>`
    select subject, count(*)::int as n from customer_login_failures
    where project_id = ${projectId} and subject in ${sql(subjects.map((s) => s.subject))}
      and failed_at > now() - make_interval(mins => ${WINDOW_MINUTES})
    group by subject`;
  for (const r of rows) {
    const limit = subjects.find((s) => s.subject === r.subject)!.limit;
    // `n` includes this attempt: the limit'th failure still gets its answer, the next is refused.
    if (r.n > limit) {
      await giveBack(sql, ctids);
      throw new RateLimited('Too many failed logins; try again later');
    }
  }
  return ctids;
}

export async function giveBack(sql: Sql, ctids: string[]): Promise<void> {
  if (ctids.length) await sql`delete from customer_login_failures where ctid = any(${ctids}::tid[])`;
}

/** The attempt failed: it stays counted; rows past the window go. */
export async function attemptFailed(sql: Sql, projectId: string, subjects: string[]): Promise<void> {
  await sql`delete from customer_login_failures where project_id = ${projectId} and subject in ${sql(subjects)}
            and failed_at < now() - make_interval(mins => ${WINDOW_MINUTES})`;
}

/** The attempt succeeded: the address's failures are forgiven, and this attempt is no failure. */
export async function attemptSucceeded(sql: Sql, projectId: string, email: string, ctids: string[]): Promise<void> {
  // Two statements: an OR of the two would not use the subject index nor a TID scan.
  await giveBack(sql, ctids);
  await sql`delete from customer_login_failures where project_id = ${projectId} and subject = ${`email:${email}`}`;
}

/** What a login attempt counts against: its email, and its client IP when known. */
export function subjects(email: string, ip: string | null): { subject: string; limit: number }[] {
  const out = [{ subject: `email:${email}`, limit: EMAIL_FAILURE_LIMIT }];
  if (ip) out.push({ subject: `ip:${ip}`, limit: IP_FAILURE_LIMIT });
  return out;
}
