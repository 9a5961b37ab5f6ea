/** WAL positions (pg_lsn) as numbers: commits' LSNs, replicas' replay positions, `x-svc-lsn`. */

/** `X/Y` (pg_lsn's text) as a number: exact below 2^53 bytes of WAL (8 PiB). */
export function parseLsn(text: string | null | undefined): number {
  if (typeof text !== 'string') return 0;
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text.trim());
  if (!m) return 0;
  return parseInt(m[1]!, 16) * 2 ** 32 + parseInt(m[2]!, 16);
}

export function formatLsn(n: number): string {
  const hi = Math.floor(n / 2 ** 32);
  const lo = n - hi * 2 ** 32;
  return `${hi.toString(16).toUpperCase()}/${lo.toString(16).toUpperCase()}`;
}
