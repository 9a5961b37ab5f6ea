import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Settings } from '../env.ts';
import type { Sql } from '../store/db.ts';
import type { ControlCaller } from '../control/credentials.ts';
import { memberMay, projectOfCaller } from '../control/tenancy.ts';
import { BadUserInput, PermissionDenied } from '../errors.ts';
import { newId } from '../ids.ts';

/**
 * Project secrets, AES-256-GCM at rest. The key comes from `SVC_SECRETS_KEY` (any string;
 * hashed to 32 bytes) or from `SVC_DATA_DIR/secrets-key`, generated once with mode 0600.
 * Values never leave this module except decrypted for comparison.
 */
const keys = new Map<string, Buffer>();

export function secretsKey(dataDir: string): Buffer {
  const fromEnv = process.env.SVC_SECRETS_KEY;
  if (fromEnv) return createHash('sha256').update(fromEnv).digest();
  const cached = keys.get(dataDir);
  if (cached) return cached;
  const file = join(dataDir, 'secrets-key');
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  }
  const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  if (key.length !== 32) throw new Error(`${file} must hold 64 hex characters`);
  keys.set(dataDir, key);
  return key;
}

export function encrypt(key: Buffer, plaintext: string, aad: string): { iv: Buffer; ciphertext: Buffer; tag: Buffer } {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  // Binding the row identity stops a ciphertext being swapped onto another label.
  c.setAAD(Buffer.from(aad));
  const ciphertext = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
  return { iv, ciphertext, tag: c.getAuthTag() };
}

export function decrypt(key: Buffer, box: { iv: Buffer; ciphertext: Buffer; tag: Buffer }, aad: string): string {
  const d = createDecipheriv('aes-256-gcm', key, box.iv);
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(box.tag);
  return Buffer.concat([d.update(box.ciphertext), d.final()]).toString('utf8');
}

export const LABEL_RE = /^[A-Za-z][A-Za-z0-9_]{0,127}$/;
const OWNER_RE = /^[a-z][a-z0-9_]{0,63}$/;

/** `svc secrets push`: creates or updates the given secrets; reports labels only. */
export async function pushSecrets(svc: { sql: Sql; settings: Pick<Settings, 'production' | 'dataDir'> }, caller: ControlCaller, projectId: string, input: unknown): Promise<{ created: string[]; updated: string[]; unchanged: string[] }> {
  if (svc.settings.production) throw new PermissionDenied('svc secrets push is refused in production (SVC_ENV=production): set production secrets in the admin UI');
  const project = await projectOfCaller(svc.sql, caller, projectId);
  if (!memberMay(caller, 'keys:write', project.id)) throw new PermissionDenied('Pushing secrets needs an owner or admin control key');
  const list = (input as { secrets?: unknown })?.secrets;
  if (!Array.isArray(list)) throw new BadUserInput('secrets must be a list of { ownerKind, label, value }');
  const seen = new Set<string>();
  for (const [i, s] of list.entries()) {
    const e = s as { ownerKind?: unknown; label?: unknown; value?: unknown };
    if (typeof e.ownerKind !== 'string' || !OWNER_RE.test(e.ownerKind)) throw new BadUserInput(`secrets[${i}].ownerKind must be a lowercase word such as project`);
    if (typeof e.label !== 'string' || !LABEL_RE.test(e.label)) throw new BadUserInput(`secrets[${i}].label must start with a letter and hold letters, digits and _`);
    if (typeof e.value !== 'string') throw new BadUserInput(`secrets[${i}] (${e.label}) has no value`);
    if (seen.has(`${e.ownerKind}/${e.label}`)) throw new BadUserInput(`secrets[${i}]: duplicate label ${e.label}`);
    seen.add(`${e.ownerKind}/${e.label}`);
  }
  const key = secretsKey(svc.settings.dataDir);
  const out = { created: [] as string[], updated: [] as string[], unchanged: [] as string[] };
  await svc.sql.begin(async (tx) => {
    for (const s of list as { ownerKind: string; label: string; value: string }[]) {
      const aad = `${project.id}/${s.ownerKind}/${s.label}`;
      const [row] = await tx<{ id: string; iv: Buffer; ciphertext: Buffer; tag: Buffer }[]>`
        select id, iv, ciphertext, tag from secrets where project_id = ${project.id} and owner_kind = ${s.ownerKind} and label = ${s.label}`;
      if (row) {
        let same = false;
        try {
          same = decrypt(key, row, aad) === s.value;
        } catch {
          same = false; // encrypted under another key: overwrite
        }
        if (same) {
          out.unchanged.push(s.label);
          continue;
        }
        const box = encrypt(key, s.value, aad);
        await tx`update secrets set iv = ${box.iv}, ciphertext = ${box.ciphertext}, tag = ${box.tag}, updated_at = now()
                 where id = ${row.id} and project_id = ${project.id}`;
        out.updated.push(s.label);
      } else {
        const box = encrypt(key, s.value, aad);
        await tx`insert into secrets (id, project_id, owner_kind, label, iv, ciphertext, tag)
                 values (${newId('sec')}, ${project.id}, ${s.ownerKind}, ${s.label}, ${box.iv}, ${box.ciphertext}, ${box.tag})`;
        out.created.push(s.label);
      }
    }
  });
  return out;
}

/** A project secret's plaintext for the server's own use (an upstream client secret); null when unset. */
export async function readSecret(sql: Sql, dataDir: string, projectId: string, label: string, ownerKind = 'project'): Promise<string | null> {
  const [row] = await sql<{ iv: Buffer; ciphertext: Buffer; tag: Buffer }[]>`
    select iv, ciphertext, tag from secrets where project_id = ${projectId} and owner_kind = ${ownerKind} and label = ${label}`;
  if (!row) return null;
  try {
    return decrypt(secretsKey(dataDir), row, `${projectId}/${ownerKind}/${label}`);
  } catch {
    return null; // encrypted under another key
  }
}
