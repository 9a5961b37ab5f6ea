import { randomBytes } from 'node:crypto';
import { hmac, type Keyring, sign, verify } from '../crypto/hmac.ts';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import type { Sql } from '../store/db.ts';
import { secretsKeyring } from '../secrets-key.ts';

/**
 * The one mailer of customer mail (one-time codes, welcome mail, notifications). SMTP through
 * nodemailer when `SVC_SMTP_URL` is set; otherwise a local outbox, one JSON file per mail under
 * `SVC_DATA_DIR/mail` (mode 0600), which `svc mail list --json` prints — so a developer, and the
 * tests, read the code without a mail server.
 *
 * Every mail carries RFC 8058 one-click unsubscribe headers (`List-Unsubscribe` with an HTTPS
 * URL holding a signed token, and `List-Unsubscribe-Post: List-Unsubscribe=One-Click`). The
 * token is HMAC-SHA256 over (project, email, list) keyed from the vault key, so it needs no row
 * and cannot be forged for another address. Mail of a list the recipient left is not sent;
 * one-time codes are transactional (list `otp`) and always go out.
 */
export interface MailDeps {
  sql: Sql;
  settings: { dataDir: string; baseUrl: string };
}

export interface Mail {
  id: string;
  projectId: string;
  to: string;
  from: string;
  subject: string;
  text: string;
  list: string;
  headers: Record<string, string>;
  createdAt: string;
}

/** Lists a recipient cannot leave (the mail is the login itself). */
const TRANSACTIONAL = new Set(['otp']);

/** The links' own key, derived from the secrets key (and from each previous one, for rotation). */
const unsubscribeKey = (secretsKey: Buffer) => hmac(secretsKey, 'svc/unsubscribe');
function unsubscribeKeys(dataDir: string): Keyring {
  const { current, previous } = secretsKeyring(dataDir);
  return { current: unsubscribeKey(current), previous: previous.map(unsubscribeKey) };
}

export function unsubscribeToken(dataDir: string, projectId: string, email: string, list: string): string {
  const body = Buffer.from(JSON.stringify({ p: projectId, e: email, l: list })).toString('base64url');
  const sig = sign(unsubscribeKeys(dataDir), body, 'base64url');
  return `${body}.${sig}`;
}

/** The (project, email, list) a token was made for, or null when it is not one of ours. */
export function readUnsubscribeToken(
  dataDir: string,
  token: unknown,
): { projectId: string; email: string; list: string } | null {
  if (typeof token !== 'string' || token.length > 2048) return null;
  const [body, sig, extra] = token.split('.');
  if (!body || !sig || extra !== undefined) return null;
  if (!verify(unsubscribeKeys(dataDir), body, sig, 'base64url')) return null;
  try {
    const v = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as { p?: unknown; e?: unknown; l?: unknown };
    if (typeof v.p !== 'string' || typeof v.e !== 'string' || typeof v.l !== 'string') return null;
    return { projectId: v.p, email: v.e, list: v.l };
  } catch {
    return null;
  }
}

export async function recordUnsubscribe(
  sql: Sql,
  t: { projectId: string; email: string; list: string },
): Promise<void> {
  await sql`insert into email_unsubscribes (project_id, email, list) values (${t.projectId}, ${t.email}, ${t.list})
            on conflict do nothing`;
}

export async function isUnsubscribed(sql: Sql, projectId: string, email: string, list: string): Promise<boolean> {
  const rows =
    await sql`select 1 from email_unsubscribes where project_id = ${projectId} and email = ${email} and list in (${list}, '*') limit 1`;
  return rows.length > 0;
}

export function outboxDir(dataDir: string): string {
  return join(dataDir, 'mail');
}

/** The local outbox, oldest first (`svc mail list`). */
export function listOutbox(dataDir: string, filter: { to?: string | undefined } = {}): Mail[] {
  let names: string[];
  try {
    names = readdirSync(outboxDir(dataDir))
      .filter((n) => n.endsWith('.json'))
      .sort();
  } catch {
    return [];
  }
  const out: Mail[] = [];
  for (const n of names) {
    try {
      const m = JSON.parse(readFileSync(join(outboxDir(dataDir), n), 'utf8')) as Mail;
      if (!filter.to || m.to === filter.to.toLowerCase()) out.push(m);
    } catch {
      // a file being written or not ours: skip it
    }
  }
  return out;
}

type Transport = { sendMail(m: Record<string, unknown>): Promise<unknown> };
const transports = new Map<string, Transport>();

/**
 * Sends (or drops, when the recipient left the list) one mail. Returns the mail, or null when
 * it was suppressed. SMTP failures are logged without the body (it may hold a code).
 */
export async function sendMail(
  deps: MailDeps,
  m: {
    projectId: string;
    to: string;
    subject: string;
    text: string;
    list: string;
    fromName?: string | undefined;
    replyTo?: string | undefined;
  },
): Promise<Mail | null> {
  const to = m.to.toLowerCase();
  if (!TRANSACTIONAL.has(m.list) && (await isUnsubscribed(deps.sql, m.projectId, to, m.list))) return null;
  const url = `${deps.settings.baseUrl}/v1/email/unsubscribe?token=${unsubscribeToken(deps.settings.dataDir, m.projectId, to, m.list)}`;
  const fromAddress = process.env.SVC_MAIL_FROM || 'no-reply@svc.local';
  const mail: Mail = {
    id: `mail_${Date.now().toString(36)}_${randomBytes(6).toString('hex')}`,
    projectId: m.projectId,
    to,
    from: m.fromName ? `"${m.fromName.replace(/["\\\r\n]/g, '')}" <${fromAddress}>` : fromAddress,
    subject: m.subject,
    text: `${m.text}\n\nUnsubscribe: ${url}\n`,
    list: m.list,
    headers: {
      'List-Unsubscribe': `<${url}>`,
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
      ...(m.replyTo ? { 'Reply-To': m.replyTo } : {}),
    },
    createdAt: new Date().toISOString(),
  };
  const smtp = process.env.SVC_SMTP_URL;
  if (smtp) {
    let t = transports.get(smtp);
    if (!t) {
      t = nodemailer.createTransport(smtp) as unknown as Transport;
      transports.set(smtp, t);
    }
    await t
      .sendMail({ from: mail.from, to: mail.to, subject: mail.subject, text: mail.text, headers: mail.headers })
      .catch((err: Error) => {
        console.error(`mail to ${mail.to} (${mail.list}) failed: ${err.message}`);
      });
    return mail;
  }
  const dir = outboxDir(deps.settings.dataDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, `${mail.id}.json`), JSON.stringify(mail, null, 2), { mode: 0o600 });
  return mail;
}
