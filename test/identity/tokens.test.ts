import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test';

// argon2id logins and second processes are slow on a loaded box: never a reason to fail.
setDefaultTimeout(60_000);
import { createRemoteJWKSet, jwtVerify, SignJWT, UnsecuredJWT, decodeProtectedHeader, base64url } from 'jose';
import { startTestServer, cli, type TestServer } from '../support/server.ts';
import { gqlProject, startProject, type GqlProject } from '../graphql/helpers.ts';
import { tokenService, onSessionRevoked, verifyAccessToken } from '../../src/identity/tokens.ts';
import { createSession, revokeSession } from '../../src/identity/customer-sessions.ts';
import { newId } from '../../src/ids.ts';
import { spawnPeer } from './support.ts';

let server: TestServer;
let p: GqlProject;
let other: GqlProject;
let pk: string;
let otherPk: string;

beforeAll(async () => {
  ({ server, p } = await startProject([{ key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] }]));
  other = await gqlProject(server, [{ key: 'page', name: 'Page', fields: [{ key: 'title', type: 'text' }] }], 'other');
  pk = await p.key('pk', ['records:read']);
  otherPk = await other.key('pk', ['records:read']);
}, 60_000);
afterAll(() => server.stop());

async function customer(projectId: string, email = `c${Math.random().toString(16).slice(2)}@example.com`) {
  const id = newId('cus');
  await server.svc.sql`insert into customers (id, project_id, email) values (${id}, ${projectId}, ${email})`;
  const tokens = tokenService(server.svc);
  const issued = await createSession(server.svc.sql, tokens, {
    projectId,
    customerId: id,
    email,
    scopes: ['records:read'],
    roles: [],
  });
  return { id, email, ...issued };
}

const READ = '{ pages(first: 1) { totalCount } }';

describe('signing keys and JWKS', () => {
  test('the JWKS endpoint publishes Ed25519 public keys only, and jose verifies a minted token against it', async () => {
    const res = await fetch(`${server.apiUrl}/.well-known/jwks.json`);
    expect(res.status).toBe(200);
    const set = (await res.json()) as { keys: Record<string, string>[] };
    expect(set.keys.length).toBe(1);
    expect(set.keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    expect(set.keys[0]!.d).toBeUndefined();
    // Nothing in the database holds the private key in the clear.
    const [row] = await server.svc.sql<{ ciphertext: Buffer }[]>`select ciphertext from signing_keys`;
    expect(row!.ciphertext.toString('utf8')).not.toContain('"d"');

    const c = await customer(p.projectId);
    const jwks = createRemoteJWKSet(new URL(`${server.apiUrl}/.well-known/jwks.json`));
    const { payload, protectedHeader } = await jwtVerify(c.accessToken, jwks, {
      issuer: 'svc-customer',
      audience: p.projectId,
    });
    expect(protectedHeader.alg).toBe('EdDSA');
    expect(protectedHeader.kid).toBe(set.keys[0]!.kid);
    expect(payload.sub).toBe(c.id);
    expect(payload.sid).toBe(c.sessionId);
    expect(payload.scope).toBe('records:read');
    expect(payload.exp! - payload.iat!).toBe(15 * 60);
    expect(c.expiresIn).toBe(900);
  });

  test('a key+token read is private, no-store; a key-only read stays public', async () => {
    const c = await customer(p.projectId);
    const withToken = await p.gql(pk, READ, undefined, { authorization: `Bearer ${c.accessToken}` });
    expect(withToken.body.errors).toBeUndefined();
    expect(withToken.headers.get('cache-control')).toBe('private, no-store');
    const keyOnly = await p.gql(pk, READ);
    expect(keyOnly.headers.get('cache-control')).toStartWith('public');
  });
});

describe('forged and foreign tokens get UNAUTHENTICATED "Invalid or expired token"', () => {
  async function refused(token: string, key = pk) {
    const r = await p.gql(key, READ, undefined, { authorization: `Bearer ${token}` });
    expect(r.status).toBe(401);
    expect(r.body.errors[0]).toEqual({ message: 'Invalid or expired token', extensions: { code: 'UNAUTHENTICATED' } });
  }

  test('every forgery', async () => {
    const c = await customer(p.projectId);
    const claims = { scope: 'records:read records:write:page', sid: c.sessionId };
    const kid = decodeProtectedHeader(c.accessToken).kid!;
    const { key } = await tokenService(server.svc).keys.signer();
    const sign = (build: (j: SignJWT) => SignJWT, header: Record<string, unknown> = {}) =>
      build(
        new SignJWT(claims)
          .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'at+jwt', ...header })
          .setIssuer('svc-customer')
          .setAudience(p.projectId)
          .setSubject(c.id)
          .setIssuedAt(),
      ).sign(key);

    // alg none
    await refused(
      new UnsecuredJWT(claims)
        .setIssuer('svc-customer')
        .setAudience(p.projectId)
        .setSubject(c.id)
        .setExpirationTime('5m')
        .encode(),
    );
    // HS256 "signed" with the public key's bytes (the classic algorithm confusion)
    const jwk = (await (await fetch(`${server.apiUrl}/.well-known/jwks.json`)).json()) as { keys: { x: string }[] };
    const hs = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', kid, typ: 'at+jwt' })
      .setIssuer('svc-customer')
      .setAudience(p.projectId)
      .setSubject(c.id)
      .setExpirationTime('5m')
      .sign(base64url.decode(jwk.keys[0]!.x));
    await refused(hs);
    // wrong kid, wrong issuer, wrong audience, expired, not yet valid
    await refused(await sign((j) => j.setExpirationTime('5m'), { kid: 'not-a-key' }));
    await refused(await sign((j) => j.setExpirationTime('5m').setIssuer('someone-else')));
    await refused(await sign((j) => j.setExpirationTime('5m').setAudience('prj_other')));
    await refused(await sign((j) => j.setExpirationTime(Math.floor(Date.now() / 1000) - 60)));
    await refused(await sign((j) => j.setExpirationTime('10m').setNotBefore('5m')));
    // a tampered payload: the same signature over more scopes
    const [h, body, sig] = c.accessToken.split('.');
    const payload = JSON.parse(new TextDecoder().decode(base64url.decode(body!)));
    payload.scope = 'records:read records:write';
    await refused(`${h}.${base64url.encode(JSON.stringify(payload))}.${sig}`);
    // garbage, and an Authorization header that is no bearer token
    await refused('not.a.jwt');
    const basic = await p.gql(pk, READ, undefined, { authorization: 'Basic Zm9vOmJhcg==' });
    expect(basic.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
    // the real token is fine, but not for another project's key
    expect((await p.gql(pk, READ, undefined, { authorization: `Bearer ${c.accessToken}` })).status).toBe(200);
    await refused(c.accessToken, otherPk);
  });
});

describe('no query per request', () => {
  test('a token read, once its token is known here, touches none of the identity tables', async () => {
    const c = await customer(p.projectId);
    const auth = { authorization: `Bearer ${c.accessToken}` };
    const TARGETED = '{ pages(first: 1) { totalCount edges { node { _context { authStatus segments } } } } }';
    // The first read verifies the token and reads the profile (the only queries it may make).
    expect((await p.gql(pk, TARGETED, undefined, auth)).status).toBe(200);
    const tables = [
      'customers',
      'customer_sessions',
      'customer_refresh_tokens',
      'customer_roles',
      'customer_role_assignments',
      'signing_keys',
    ];
    // While another transaction holds every identity table exclusively, any query of the token
    // path would wait for it: the reads must come back without it ending.
    await server.svc.sql.begin(async (tx) => {
      await tx.unsafe(`lock table ${tables.join(', ')} in access exclusive mode`);
      for (let i = 0; i < 5; i++) {
        const r = await p.gql(pk, READ, undefined, auth);
        expect(r.status).toBe(200);
        expect(r.headers.get('cache-control')).toBe('private, no-store');
      }
      expect((await p.gql(pk, TARGETED, undefined, auth)).status).toBe(200);
    });
  });
});

describe('expiry of a token already verified', () => {
  test('a token this process has verified (and cached) is refused on its first request after exp', async () => {
    const c = await customer(p.projectId);
    const kid = decodeProtectedHeader(c.accessToken).kid!;
    const { key } = await tokenService(server.svc).keys.signer();
    const exp = Math.floor(Date.now() / 1000) + 6;
    const token = await new SignJWT({ scope: 'records:read', sid: c.sessionId })
      .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'at+jwt' })
      .setIssuer('svc-customer')
      .setAudience(p.projectId)
      .setSubject(c.id)
      .setIssuedAt()
      .setExpirationTime(exp)
      .sign(key);
    const auth = { authorization: `Bearer ${token}` };
    const first = await p.gql(pk, READ, undefined, auth);
    // Answered before exp (a box slower than six seconds per request proves nothing here).
    if (Date.now() < exp * 1000) expect(first.status).toBe(200);
    const second = await p.gql(pk, READ, undefined, auth);
    if (Date.now() < exp * 1000) expect(second.status).toBe(200);
    await Bun.sleep(Math.max(0, exp * 1000 - Date.now()) + 50);
    const late = await p.gql(pk, READ, undefined, auth);
    expect(late.status).toBe(401);
    expect(late.body.errors[0]).toEqual({
      message: 'Invalid or expired token',
      extensions: { code: 'UNAUTHENTICATED' },
    });
  });
});

describe('revocation', () => {
  test('a revoked session: refused at once here, listeners told, and refused by a second process as soon as the bus tells it', async () => {
    const peer = await spawnPeer(server);
    try {
      const c = await customer(p.projectId);
      const onPeer = (token: string) =>
        fetch(`${peer.apiUrl}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': pk, authorization: `Bearer ${token}` },
          body: JSON.stringify({ query: READ }),
        });
      // The peer verifies a token this process signed (shared keys in PostgreSQL).
      expect((await onPeer(c.accessToken)).status).toBe(200);
      const told: string[] = [];
      const off = onSessionRevoked(server.svc, (e) => told.push(e.sessionId));
      expect(await revokeSession(server.svc.sql, tokenService(server.svc), p.projectId, c.sessionId)).toBe(true);
      off();
      expect(told).toEqual([c.sessionId]);
      await expect(verifyAccessToken(server.svc, c.accessToken, p.projectId)).rejects.toThrow(
        'Invalid or expired token',
      );
      const t0 = Date.now();
      let status = 0;
      while (Date.now() - t0 < 5000) {
        status = (await onPeer(c.accessToken)).status;
        if (status === 401) break;
        await Bun.sleep(25);
      }
      expect(status).toBe(401);
    } finally {
      await peer.stop();
    }
  }, 60_000);

  test('a process started after a logout already refuses the revoked token (the list loads from PostgreSQL)', async () => {
    const c = await customer(p.projectId);
    await revokeSession(server.svc.sql, tokenService(server.svc), p.projectId, c.sessionId);
    const live = await customer(p.projectId);
    // Same database, same data folder (so the same vault key): another process in all but name.
    const second = await startTestServer({ DATABASE_URL: server.databaseUrl, SVC_DATA_DIR: server.dataDir });
    try {
      await expect(verifyAccessToken(second.svc, c.accessToken, p.projectId)).rejects.toThrow(
        'Invalid or expired token',
      );
      expect((await verifyAccessToken(second.svc, live.accessToken, p.projectId)).customerId).toBe(live.id);
    } finally {
      await second.stop();
    }
  });
});

describe('rotation', () => {
  test('svc signing-keys rotate publishes the new key before it signs; old tokens keep verifying', async () => {
    const before = await customer(p.projectId);
    const peer = await spawnPeer(server);
    try {
      const r = await cli(server, server.rootToken, 'signing-keys', 'rotate', '--publish-seconds', '2', '--json');
      expect(r.code).toBe(0);
      const set = (await (await fetch(`${server.apiUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] };
      expect(set.keys.map((k) => k.kid)).toContain(r.json.kid);
      expect(set.keys.length).toBe(2);
      // Still signed by the old key until the new one's publish window has passed.
      const during = await customer(p.projectId);
      // (Only if it was minted inside the window: a box slower than two seconds proves nothing.)
      if (Date.now() < Date.parse(r.json.activeFrom))
        expect(decodeProtectedHeader(during.accessToken).kid).toBe(decodeProtectedHeader(before.accessToken).kid);
      await Bun.sleep(Math.max(0, Date.parse(r.json.activeFrom) - Date.now()) + 100);
      const after = await customer(p.projectId);
      expect(decodeProtectedHeader(after.accessToken).kid).toBe(r.json.kid);
      for (const t of [before, after])
        expect((await p.gql(pk, READ, undefined, { authorization: `Bearer ${t.accessToken}` })).status).toBe(200);
      // The old key stays published until every token it signed has expired (an hour at most).
      const [old] = await server.svc.sql<{ kept: number }[]>`
        select extract(epoch from expires_at - retired_at)::int as kept from signing_keys where kid = ${decodeProtectedHeader(before.accessToken).kid!}`;
      expect(old!.kept).toBeGreaterThanOrEqual(3600);
      // The other process heard of the rotation: it publishes the new key and signs with it too.
      const peerKids = async () =>
        ((await (await fetch(`${peer.apiUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] }).keys.map(
          (k) => k.kid,
        );
      for (const end = Date.now() + 15_000; !(await peerKids()).includes(r.json.kid) && Date.now() < end; )
        await Bun.sleep(50);
      expect(await peerKids()).toContain(r.json.kid);
      const reg = await fetch(`${peer.apiUrl}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': pk },
        body: JSON.stringify({
          query: `mutation { registerCustomer(email: "rotated@example.com", password: "rotation pw 12") { accessToken } }`,
        }),
      });
      const peerToken = ((await reg.json()) as any).data.registerCustomer.accessToken;
      expect(decodeProtectedHeader(peerToken).kid).toBe(r.json.kid);
      expect((await p.gql(pk, READ, undefined, { authorization: `Bearer ${peerToken}` })).status).toBe(200);
      // Only the root token may rotate.
      const owner = await cli(server, 'ck_' + '0'.repeat(64), 'signing-keys', 'rotate', '--json');
      expect(owner.code).not.toBe(0);
    } finally {
      await peer.stop();
    }
  });
});
