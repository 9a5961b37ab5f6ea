import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';

// argon2id logins and second processes are slow on a loaded box: never a reason to fail.
setDefaultTimeout(90_000);
import type { Socket, TCPSocketListener } from 'bun';
import type { TestServer } from '../support/server.ts';
import { startGqlProject, type GqlProject } from '../graphql/helpers.ts';
import { listOutbox } from '../../src/identity/mailer.ts';
import { eventually } from '../support/eventually.ts';
import { spawnPeer } from './support.ts';

/**
 * SVC_SMTP_URL: a service process started with it sends customer mail over SMTP (nodemailer)
 * instead of writing the local outbox. The receiving end is a plain SMTP listener on a
 * loopback port (RFC 5321's few verbs; no mail-server package in the tree), which keeps every
 * message it is handed, headers and body, as the wire carried them.
 */
interface Received {
  from: string;
  to: string[];
  /** Header names lower-cased, folded lines unfolded. */
  headers: Record<string, string>;
  body: string;
}

type Conn = { buf: string; inData: boolean; from: string; to: string[] };

function smtpListener(): { port: number; mails: Received[]; stop(): void } {
  const mails: Received[] = [];
  const parse = (raw: string, c: Conn): Received => {
    const text = raw.replace(/\r\n\.\./g, '\r\n.');
    const split = text.indexOf('\r\n\r\n');
    const head = text.slice(0, split).replace(/\r\n[ \t]+/g, ' ');
    const headers: Record<string, string> = {};
    for (const line of head.split('\r\n')) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    return { from: c.from, to: c.to, headers, body: text.slice(split + 4) };
  };
  const listener: TCPSocketListener<Conn> = Bun.listen<Conn>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(s: Socket<Conn>) {
        s.data = { buf: '', inData: false, from: '', to: [] };
        s.write('220 test ESMTP\r\n');
      },
      data(s: Socket<Conn>, chunk: Buffer) {
        const c = s.data;
        c.buf += chunk.toString('utf8');
        for (;;) {
          if (c.inData) {
            const end = c.buf.indexOf('\r\n.\r\n');
            if (end < 0) return;
            mails.push(parse(c.buf.slice(0, end), c));
            c.buf = c.buf.slice(end + 5);
            c.inData = false;
            c.to = [];
            s.write('250 2.0.0 queued\r\n');
            continue;
          }
          const nl = c.buf.indexOf('\r\n');
          if (nl < 0) return;
          const line = c.buf.slice(0, nl);
          c.buf = c.buf.slice(nl + 2);
          const verb = line.slice(0, 4).toUpperCase();
          if (verb === 'EHLO') s.write('250-test\r\n250 8BITMIME\r\n');
          else if (verb === 'MAIL') (c.from = /<([^>]*)>/.exec(line)?.[1] ?? ''), s.write('250 2.1.0 ok\r\n');
          else if (verb === 'RCPT') c.to.push(/<([^>]*)>/.exec(line)?.[1] ?? ''), s.write('250 2.1.5 ok\r\n');
          else if (verb === 'DATA') (c.inData = true), s.write('354 end with <CRLF>.<CRLF>\r\n');
          else if (verb === 'QUIT') return void (s.write('221 2.0.0 bye\r\n'), s.end());
          else s.write('250 ok\r\n');
        }
      },
    },
  });
  return { port: listener.port, mails, stop: () => listener.stop(true) };
}

let server: TestServer;
let p: GqlProject;
let pk: string;
let smtp: ReturnType<typeof smtpListener>;

beforeAll(async () => {
  ({ server, p, pk } = await startGqlProject([
    { key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] },
  ]));
  await server.svc
    .sql`update projects set settings = settings || ${server.svc.sql.json({ customerOtpEnabled: true })} where id = ${p.projectId}`;
  await (await server.svc.projects.get(p.projectId)).reload();
  smtp = smtpListener();
}, 90_000);
afterAll(async () => {
  smtp?.stop();
  await server.stop();
});

describe('SVC_SMTP_URL', () => {
  test('a process with it sends the welcome mail and the one-time code over SMTP, with the RFC 8058 headers, and writes no outbox', async () => {
    const peer = await spawnPeer(server, {
      SVC_SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
      SVC_MAIL_FROM: 'shop@example.com',
    });
    try {
      const gqlAt = async (query: string, variables: Record<string, unknown>) => {
        const res = await fetch(`${peer.apiUrl}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': pk },
          body: JSON.stringify({ query, variables }),
        });
        return (await res.json()) as any;
      };
      const e = `smtp${Math.random().toString(16).slice(2, 10)}@example.com`;
      const reg = await gqlAt(
        `mutation($e: String!) { registerCustomer(email: $e, password: "smtp test pw 1") { customer { id } } }`,
        { e },
      );
      expect(reg.errors).toBeUndefined();
      await eventually(() => smtp.mails.some((m) => m.to.includes(e)), 15_000);
      const welcome = smtp.mails.find((m) => m.to.includes(e))!;
      expect(welcome.from).toBe('shop@example.com');
      expect(welcome.headers.subject).toBe('Welcome');
      expect(welcome.headers['list-unsubscribe-post']).toBe('List-Unsubscribe=One-Click');
      expect(welcome.headers['list-unsubscribe']).toMatch(/^<.+\/v1\/email\/unsubscribe\?token=[^>]+>$/);

      // A one-time code over SMTP logs in on the other process: the code is shared, not the mail path.
      expect(
        (await gqlAt(`mutation($e: String!) { requestCustomerOtp(email: $e) }`, { e })).data.requestCustomerOtp,
      ).toBe(true);
      await eventually(() => smtp.mails.filter((m) => m.to.includes(e)).length === 2, 15_000);
      const otp = smtp.mails.filter((m) => m.to.includes(e))[1]!;
      const code = /\b(\d{6})\b/.exec(otp.headers.subject!)![1]!;
      expect(otp.body).toContain(code);
      expect(otp.headers['list-unsubscribe-post']).toBe('List-Unsubscribe=One-Click');
      const login = await p.gql(
        pk,
        `mutation($e: String!, $c: String!) { loginCustomerWithOtp(email: $e, code: $c) { customer { id } } }`,
        { e, c: code },
      );
      expect(login.body.errors).toBeUndefined();
      expect(login.body.data.loginCustomerWithOtp.customer.id).toBe(reg.data.registerCustomer.customer.id);

      // Nothing went to the local outbox.
      expect(listOutbox(server.dataDir, { to: e })).toEqual([]);
    } finally {
      await peer.stop();
    }
  });
});
