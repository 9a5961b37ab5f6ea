import { exportJWK, generateKeyPair, importJWK, calculateJwkThumbprint, type CryptoKey, type JWK } from 'jose';
import type { Sql } from '../store/db.ts';
import { decrypt, encrypt } from '../secrets/vault.ts';

/**
 * The deployment's Ed25519 signing keys (CONTRACT §8). Stored in PostgreSQL with the private
 * half AES-256-GCM encrypted by the vault's key (src/secrets/vault.ts), so every process on the
 * database signs with the same key and verifies the others' tokens. Lifecycle of a key:
 *
 *   created_at   published in /.well-known/jwks.json
 *   active_from  signs (rotation sets it in the future: clients fetch the key before they see it)
 *   retired_at   stops signing (the next key's active_from)
 *   expires_at   leaves the key set, after every token it signed has expired
 *
 * Rows are few (one or two); each process keeps them all in memory and reloads on
 * `signing-keys.changed` from the bus, on a bus reconnect, and (throttled) on an unknown kid.
 */
export const ALG = 'EdDSA';
/** No access token lives longer than this, whatever a project sets (bounds key and revocation lifetimes). */
export const MAX_TOKEN_SECONDS = 3600;
/** How long a rotated-in key is published before it signs (≥ the JWKS response's max-age). */
export const DEFAULT_PUBLISH_SECONDS = 300;
export const JWKS_MAX_AGE = 60;
/** Advisory lock serialising key creation and rotation across processes. */
const LOCK = 727_012;

interface KeyRow {
  kid: string;
  public_jwk: JWK;
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
  created_at: Date;
  active_from: Date;
  retired_at: Date | null;
  expires_at: Date | null;
}

interface LoadedKey {
  kid: string;
  jwk: JWK;
  publicKey: CryptoKey;
  activeFrom: number;
  retiredAt: number | null;
  expiresAt: number | null;
  row: KeyRow;
  privateKey?: Promise<CryptoKey>;
}

const aadOf = (kid: string) => `signing-key/${kid}`;

async function newKeyRow(tx: Sql, vaultKey: Buffer, activeFrom: Date | null): Promise<string> {
  const { publicKey, privateKey } = await generateKeyPair(ALG, { crv: 'Ed25519', extractable: true });
  const pub = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(pub);
  const box = encrypt(vaultKey, JSON.stringify(await exportJWK(privateKey)), aadOf(kid));
  const publicJwk = { ...pub, kid, alg: ALG, use: 'sig' };
  await tx`insert into signing_keys (kid, public_jwk, iv, ciphertext, tag, active_from)
           values (${kid}, ${tx.json(publicJwk as never)}, ${box.iv}, ${box.ciphertext}, ${box.tag}, ${activeFrom ?? tx`now()`})`;
  return kid;
}

/** Creates the first key when there is none that signs now or later. Safe to race. */
export async function ensureSigningKey(sql: Sql, vaultKey: Buffer): Promise<boolean> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK})`;
    const [live] = await tx`select 1 from signing_keys where retired_at is null or retired_at > now() limit 1`;
    if (live) return false;
    await newKeyRow(tx as unknown as Sql, vaultKey, null);
    return true;
  });
}

/**
 * `svc signing-keys rotate`: publishes a new key now that signs `publishSeconds` from now; the
 * current signers retire at that moment and stay in the key set until their last token expires.
 */
export async function rotateSigningKey(
  sql: Sql,
  vaultKey: Buffer,
  publishSeconds = DEFAULT_PUBLISH_SECONDS,
): Promise<{ kid: string; activeFrom: string; retired: string[] }> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK})`;
    const [row] = await tx<{ at: Date }[]>`select now() + make_interval(secs => ${publishSeconds}) as at`;
    const at = row!.at;
    const retiring = await tx<{ kid: string }[]>`
      update signing_keys set retired_at = ${at}, expires_at = ${at}::timestamptz + make_interval(secs => ${MAX_TOKEN_SECONDS + 60})
      where retired_at is null or retired_at > ${at} returning kid`;
    const kid = await newKeyRow(tx as unknown as Sql, vaultKey, at);
    return { kid, activeFrom: at.toISOString(), retired: retiring.map((r) => r.kid) };
  });
}

export class SigningKeys {
  readonly #sql: Sql;
  readonly #vaultKey: Buffer;
  #keys: LoadedKey[] = [];
  #loading: Promise<void> | undefined;
  #lastLoad = 0;

  constructor(sql: Sql, vaultKey: Buffer) {
    this.#sql = sql;
    this.#vaultKey = vaultKey;
  }

  /** Loads every key still in the key set (creating the first one if needed). */
  async init(): Promise<void> {
    await ensureSigningKey(this.#sql, this.#vaultKey);
    await this.reload();
  }

  reload(): Promise<void> {
    this.#loading ??= this.#load().finally(() => {
      this.#loading = undefined;
    });
    return this.#loading;
  }

  async #load(): Promise<void> {
    this.#lastLoad = Date.now();
    const rows = await this.#sql<KeyRow[]>`
      select kid, public_jwk, iv, ciphertext, tag, created_at, active_from, retired_at, expires_at
      from signing_keys where expires_at is null or expires_at > now() order by active_from`;
    const old = new Map(this.#keys.map((k) => [k.kid, k]));
    const next: LoadedKey[] = [];
    for (const row of rows) {
      const prev = old.get(row.kid);
      next.push({
        kid: row.kid,
        jwk: row.public_jwk,
        publicKey: prev?.publicKey ?? ((await importJWK(row.public_jwk, ALG)) as CryptoKey),
        activeFrom: row.active_from.getTime(),
        retiredAt: row.retired_at?.getTime() ?? null,
        expiresAt: row.expires_at?.getTime() ?? null,
        row,
        privateKey: prev?.privateKey,
      });
    }
    this.#keys = next;
  }

  /** The public JWK set: every key not yet expired, pending ones included. */
  jwks(now = Date.now()): { keys: JWK[] } {
    return { keys: this.#keys.filter((k) => k.expiresAt === null || k.expiresAt > now).map((k) => k.jwk) };
  }

  /** The key that signs now: the latest active one not retired. */
  async signer(now = Date.now()): Promise<{ kid: string; key: CryptoKey }> {
    let pick = this.#pick(now);
    if (!pick) {
      await this.init();
      pick = this.#pick(now);
      if (!pick) throw new Error('no signing key is active');
    }
    pick.privateKey ??= importJWK(
      JSON.parse(decrypt(this.#vaultKey, pick.row, aadOf(pick.kid))),
      ALG,
    ) as Promise<CryptoKey>;
    return { kid: pick.kid, key: await pick.privateKey };
  }

  #pick(now: number): LoadedKey | undefined {
    let best: LoadedKey | undefined;
    for (const k of this.#keys) {
      if (
        k.activeFrom <= now &&
        (k.retiredAt === null || k.retiredAt > now) &&
        (!best || k.activeFrom > best.activeFrom)
      )
        best = k;
    }
    return best;
  }

  /** The verification key for a kid, or undefined (an unknown kid reloads at most once a second). */
  publicKey(kid: string | undefined): CryptoKey | undefined {
    if (!kid) return undefined;
    const now = Date.now();
    const k = this.#keys.find((x) => x.kid === kid && (x.expiresAt === null || x.expiresAt > now));
    return k?.publicKey;
  }

  async publicKeyOrReload(kid: string | undefined): Promise<CryptoKey | undefined> {
    const k = this.publicKey(kid);
    if (k || !kid || Date.now() - this.#lastLoad < 1000) return k;
    await this.reload();
    return this.publicKey(kid);
  }
}
