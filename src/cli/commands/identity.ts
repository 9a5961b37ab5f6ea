import type { Command } from '../command.ts';
import { stringFlag } from '../command.ts';
import { resolve } from 'node:path';
import { UsageError } from '../args.ts';
import { listOutbox } from '../../identity/mailer.ts';

/** `svc signing-keys rotate`: the deployment's customer-token keys (root token). */
export const signingKeysRotate: Command = {
  path: ['signing-keys', 'rotate'],
  summary: 'publish a new token signing key; it signs after --publish-seconds (default 300)',
  usage: 'svc signing-keys rotate [--publish-seconds S]',
  flags: { 'publish-seconds': 'string' },
  async run({ client, flags }) {
    const raw = stringFlag(flags, 'publish-seconds');
    const publishSeconds = raw === undefined ? undefined : Number(raw);
    if (raw !== undefined && !Number.isInteger(publishSeconds))
      throw new UsageError('--publish-seconds must be a whole number');
    const out = await client.request<{ kid: string; activeFrom: string; retired: string[] }>(
      'POST',
      '/v1/control/signing-keys/rotate',
      { publishSeconds },
    );
    return { output: out, text: `key ${out.kid} published; it signs from ${out.activeFrom}` };
  },
};

/**
 * `svc mail list`: the local outbox of a server without SVC_SMTP_URL, read from its data folder
 * (`--data-dir`, else SVC_DATA_DIR, else ./.svc) — the developer's way to read one-time codes.
 */
export const mailList: Command = {
  path: ['mail', 'list'],
  summary: 'print the local mail outbox (servers without SVC_SMTP_URL)',
  usage: 'svc mail list [--to E] [--data-dir D]',
  flags: { to: 'string', 'data-dir': 'string' },
  async run({ flags, env }) {
    const dataDir = resolve(stringFlag(flags, 'data-dir') ?? env.SVC_DATA_DIR ?? './.svc');
    const mails = listOutbox(dataDir, { to: stringFlag(flags, 'to') });
    return {
      output: { mails },
      text: mails.map((m) => `${m.createdAt}  ${m.to}  ${m.subject}`).join('\n') || '(no mail)',
    };
  },
};

export const IDENTITY_COMMANDS: Command[] = [signingKeysRotate, mailList];
