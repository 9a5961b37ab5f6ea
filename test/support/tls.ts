import { join } from 'node:path';

/**
 * A self-signed P-256 certificate for `subject` (`/CN=…`) with `altNames` (`DNS:…,IP:…`), valid
 * for two days, written by openssl into `dir` as cert.pem and key.pem: for test HTTPS servers,
 * which the service under test is told to trust (or not). Returns openssl's result (the caller
 * checks its exitCode in its own way) and the two paths.
 */
export function selfSignedCert(dir: string, subject: string, altNames: string) {
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  const made = Bun.spawnSync([
    'openssl',
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    subject,
    '-addext',
    `subjectAltName=${altNames}`,
  ]);
  return { made, cert, key };
}
