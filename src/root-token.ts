import { existsSync, mkdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { newSecret } from './ids.ts';

/**
 * The operator credential (CONTRACT §2): SVC_ROOT_TOKEN, else the token kept in
 * SVC_DATA_DIR/root-token (mode 0600), else a new one written there. Only its hash is kept
 * in memory once the process has started.
 */
export function loadRootToken(
  dataDir: string,
  fromEnv: string | undefined,
): { token: string; file: string | null; created: boolean } {
  if (fromEnv) return { token: fromEnv, file: null, created: false };
  const file = join(dataDir, 'root-token');
  if (existsSync(file)) return { token: readFileSync(file, 'utf8').trim(), file, created: false };
  mkdirSync(dataDir, { recursive: true });
  const token = newSecret('rt_');
  writeFileSync(file, token + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  return { token, file, created: true };
}
