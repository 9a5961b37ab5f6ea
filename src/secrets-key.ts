import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Keyring } from './crypto/hmac.ts';

/**
 * The deployment's secrets key (the vault's, docs/secrets.md): from `SVC_SECRETS_KEY` (any
 * string; hashed to 32 bytes) or from `SVC_DATA_DIR/secrets-key`, generated once with mode 0600.
 * A foundation, below every capability that encrypts or HMACs with it (secrets, control,
 * identity, operations), so none of them imports another for the key.
 */
const keys = new Map<string, Buffer>();

export function fileKey(dataDir: string, create: boolean): Buffer | null {
  const cached = keys.get(dataDir);
  if (cached) return cached;
  const file = join(dataDir, 'secrets-key');
  if (!existsSync(file)) {
    if (!create) return null;
    mkdirSync(dataDir, { recursive: true });
    try {
      writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    } catch (err) {
      // Another process of the deployment created it first: use theirs.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  if (key.length !== 32) throw new Error(`${file} must hold 64 hex characters`);
  keys.set(dataDir, key);
  return key;
}

export function secretsKey(dataDir: string): Buffer {
  const fromEnv = process.env.SVC_SECRETS_KEY;
  if (fromEnv) return createHash('sha256').update(fromEnv).digest();
  return fileKey(dataDir, true)!;
}

/**
 * The deployment's secrets key and the ones it replaced (docs/secrets.md, rotation): the values
 * listed in `SVC_SECRETS_KEY_PREVIOUS` (comma-separated, hashed like `SVC_SECRETS_KEY`) and a
 * generated `SVC_DATA_DIR/secrets-key` left behind by a move to `SVC_SECRETS_KEY`. The vault
 * decrypts with any of them; HMACs made with the secrets key verify under any of them.
 */
export function secretsKeyring(dataDir: string): Keyring & { current: Buffer; previous: readonly Buffer[] } {
  const current = secretsKey(dataDir);
  const previous: Buffer[] = (process.env.SVC_SECRETS_KEY_PREVIOUS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((old) => createHash('sha256').update(old).digest());
  if (process.env.SVC_SECRETS_KEY) {
    const generated = fileKey(dataDir, false);
    if (generated) previous.push(generated);
  }
  return { current, previous: previous.filter((k) => !k.equals(current)) };
}

/** Names a vault key without revealing it: the first 8 bytes of its SHA-256, hex. */
export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}
