import { randomInt } from 'node:crypto';
import { sign, verify } from '../crypto/hmac.ts';
import { BadUserInput, PermissionDenied, RateLimited, Unauthenticated } from '../errors.ts';
import { newId } from '../ids.ts';
import { secretsKey, secretsKeyring } from '../secrets-key.ts';
import type { Identity } from './identity.ts';
import { sendMail } from './mailer.ts';
import { attemptFailed, attemptSucceeded, subjects, takeAttempt, WINDOW_MINUTES } from './login-attempts.ts';
import { INVALID_CODE, normalizeEmail, openSession, setting, type AuthPayload, type ProjectView } from './accounts.ts';

/**
 * One-time-code login of customers (CONTRACT §8): a six-digit code by mail, HMAC'd with the
 * vault key, single use, valid 10 minutes, 5 tries each, at most 5 requested per address per
 * window; a first login by code may create the account (when sign-up is on).
 */
const OTP_MINUTES = 10;
const OTP_TRIES = 5;
const OTP_REQUESTS_PER_WINDOW = 5;

const codeSigned = (projectId: string, email: string, code: string) => `otp\0${projectId}\0${email}\0${code}`;
function codeHash(dataDir: string, projectId: string, email: string, code: string): string {
  return sign(secretsKey(dataDir), codeSigned(projectId, email, code), 'hex');
}

/** Always true for a well-formed email (no account enumeration); the code goes by mail. */
export async function requestCustomerOtp(
  id: Identity,
  project: ProjectView,
  input: { email: unknown },
): Promise<boolean> {
  if (!setting(project, 'customerOtpEnabled', false))
    throw new PermissionDenied('One-time codes are disabled for this project');
  const email = normalizeEmail(input.email);
  const [recent] = await id.sql<{ n: number }[]>`
    select count(*)::int as n from customer_otps
    where project_id = ${project.id} and email = ${email} and created_at > now() - make_interval(mins => ${WINDOW_MINUTES})`;
  if (recent!.n >= OTP_REQUESTS_PER_WINDOW) throw new RateLimited('Too many codes requested; try again later');
  const [known] =
    await id.sql`select 1 from customers where project_id = ${project.id} and email = ${email} and disabled_at is null`;
  // Unknown addresses get a code only when a first login may create the account.
  if (!known && !setting(project, 'customerSignupEnabled', true)) return true;
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  await id.sql`insert into customer_otps (id, project_id, email, code_hash, expires_at)
               values (${newId('otp')}, ${project.id}, ${email}, ${codeHash(id.mail.settings.dataDir, project.id, email, code)},
                       now() + make_interval(mins => ${OTP_MINUTES}))`;
  const from = typeof project.settings.displayName === 'string' ? project.settings.displayName : undefined;
  await sendMail(id.mail, {
    projectId: project.id,
    to: email,
    list: 'otp',
    subject: `Your login code: ${code}`,
    text: `Your login code is ${code}. It is valid for ${OTP_MINUTES} minutes and can be used once.`,
    fromName: typeof project.settings.fromName === 'string' ? project.settings.fromName : from,
  });
  return true;
}

export async function loginCustomerWithOtp(
  id: Identity,
  project: ProjectView,
  input: { email: unknown; code: unknown },
  ip: string | null,
): Promise<AuthPayload> {
  if (!setting(project, 'customerOtpEnabled', false))
    throw new PermissionDenied('One-time codes are disabled for this project');
  const email = normalizeEmail(input.email);
  if (typeof input.code !== 'string' || !/^\d{6}$/.test(input.code.trim()))
    throw new BadUserInput('code must be the 6 digits from the mail', { field: 'code' });
  const code = input.code.trim();
  const subs = subjects(email, ip);
  const attempt = await takeAttempt(id.sql, project.id, subs);
  const keyring = secretsKeyring(id.mail.settings.dataDir);
  const matched = await id.sql.begin(async (tx) => {
    const rows = await tx<{ id: string; code_hash: string }[]>`
      select id, code_hash from customer_otps
      where project_id = ${project.id} and email = ${email} and used_at is null and expires_at > now() and attempts < ${OTP_TRIES}
      order by created_at desc limit 3 for update`;
    const hit = rows.find((r) => verify(keyring, codeSigned(project.id, email, code), r.code_hash, 'hex'));
    if (!hit) {
      if (rows.length)
        await tx`update customer_otps set attempts = attempts + 1 where id in ${tx(rows.map((r) => r.id))}`;
      return false;
    }
    // Single use: this code and any older one for the address.
    await tx`update customer_otps set used_at = now() where project_id = ${project.id} and email = ${email} and used_at is null`;
    return true;
  });
  if (!matched) {
    await attemptFailed(
      id.sql,
      project.id,
      subs.map((s) => s.subject),
    );
    throw new Unauthenticated(INVALID_CODE);
  }
  await attemptSucceeded(id.sql, project.id, email, attempt);
  const [row] = await id.sql<{ id: string; email: string; name: string | null; disabled_at: Date | null }[]>`
    select id, email, name, disabled_at from customers where project_id = ${project.id} and email = ${email}`;
  if (row?.disabled_at) throw new Unauthenticated(INVALID_CODE);
  if (row) {
    await id.sql`update customers set email_verified_at = coalesce(email_verified_at, now()) where id = ${row.id}`;
    return openSession(id, project, row);
  }
  if (!setting(project, 'customerSignupEnabled', true)) throw new Unauthenticated(INVALID_CODE);
  return openSession(id, project, { id: newId('cus'), email, name: null }, { passwordHash: null, verified: true });
}
