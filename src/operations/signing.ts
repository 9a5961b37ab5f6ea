import { randomBytes } from 'node:crypto';
import { sign as hmacSign, verify as hmacVerify } from '../crypto/hmac.ts';
import type { Sql } from '../store/db.ts';
import { decrypt, encrypt } from '../secrets/vault.ts';
import { secretsKey } from '../secrets-key.ts';

/**
 * The per-project operation signing secret (CONTRACT §9). Calls and callbacks carry
 * `X-Svc-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`. Secrets are AES-GCM encrypted
 * at rest with the vault key. Rotation adds a version; the newest signs, and the previous one
 * still verifies callbacks for ROTATION_GRACE_MS so executions in flight can finish.
 */
export const ROTATION_GRACE_MS = 24 * 3600_000;
/** Callbacks signed longer ago than this are refused (replay window). */
export const SIGNATURE_TOLERANCE_S = 300;
const CACHE_MAX = 1000;

interface Version {
  version: number;
  secret: string;
  createdAt: number;
}

export class SigningSecrets {
  readonly #sql: Sql;
  readonly #key: Buffer;
  /** Small entries (two secrets per project), bounded by count: about 200 bytes each. */
  readonly #cache = new Map<string, Version[]>();

  constructor(sql: Sql, dataDir: string) {
    this.#sql = sql;
    this.#key = secretsKey(dataDir);
  }

  /** Newest first; creates the first secret of a project on first use. */
  async versions(projectId: string): Promise<Version[]> {
    const hit = this.#cache.get(projectId);
    if (hit) return hit;
    let rows = await this.#read(projectId);
    if (!rows.length) {
      await this.#insert(projectId, 1);
      rows = await this.#read(projectId);
    }
    if (this.#cache.size >= CACHE_MAX) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(projectId, rows);
    return rows;
  }

  async current(projectId: string): Promise<Version> {
    return (await this.versions(projectId))[0]!;
  }

  /** Adds a new version; the caller announces it so other processes drop their copy. */
  async rotate(projectId: string): Promise<Version> {
    const [row] = await this.#sql<{ next: number }[]>`
      select coalesce(max(version), 0) + 1 as next from operation_signing_secrets where project_id = ${projectId}`;
    const next = row!.next;
    await this.#insert(projectId, next);
    // Versions older than the previous one verify nothing any more.
    await this.#sql`delete from operation_signing_secrets where project_id = ${projectId} and version < ${next - 1}`;
    this.forget(projectId);
    return this.current(projectId);
  }

  forget(projectId: string): void {
    this.#cache.delete(projectId);
  }

  async #insert(projectId: string, version: number): Promise<void> {
    const box = encrypt(this.#key, randomBytes(32).toString('hex'), `opsign:${projectId}:${version}`);
    await this.#sql`insert into operation_signing_secrets (project_id, version, iv, ciphertext, tag)
      values (${projectId}, ${version}, ${box.iv}, ${box.ciphertext}, ${box.tag}) on conflict do nothing`;
  }

  async #read(projectId: string): Promise<Version[]> {
    const rows = await this.#sql<{ version: number; iv: Buffer; ciphertext: Buffer; tag: Buffer; created_at: Date }[]>`
      select version, iv, ciphertext, tag, created_at from operation_signing_secrets where project_id = ${projectId} order by version desc limit 2`;
    return rows.map((r) => ({
      version: r.version,
      secret: `whsec_${decrypt(this.#key, r, `opsign:${projectId}:${r.version}`)}`,
      createdAt: r.created_at.getTime(),
    }));
  }

  /** Whether a signature header is valid for the body under a secret still accepted. */
  async verify(projectId: string, header: string | null, body: string, nowMs = Date.now()): Promise<boolean> {
    const parsed = parseSignature(header);
    if (!parsed || Math.abs(nowMs / 1000 - parsed.t) > SIGNATURE_TOLERANCE_S) return false;
    const versions = await this.versions(projectId);
    // The previous version stays valid for a grace period after the newest was created.
    const accepted = versions
      .filter((v, i) => i === 0 || nowMs - versions[0]!.createdAt <= ROTATION_GRACE_MS)
      .map((v) => v.secret);
    return parsed.v1.some((sig) => hmacVerify(accepted, `${parsed.t}.${body}`, sig, 'hex'));
  }
}

function hmac(secret: string, t: number, body: string): string {
  return hmacSign(secret, `${t}.${body}`, 'hex');
}

/** The header value for a body: what endpoints verify, and what they send back on callbacks. */
export function sign(secret: string, body: string, nowMs = Date.now()): string {
  const t = Math.floor(nowMs / 1000);
  return `t=${t},v1=${hmac(secret, t, body)}`;
}

function parseSignature(header: string | null): { t: number; v1: string[] } | null {
  if (!header || header.length > 1000) return null;
  let t: number | null = null;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const [k, v] = part.trim().split('=', 2);
    if (k === 't' && v && /^\d{1,12}$/.test(v)) t = Number(v);
    else if (k === 'v1' && v && /^[0-9a-f]{64}$/.test(v)) v1.push(v);
  }
  return t === null || v1.length === 0 ? null : { t, v1 };
}
