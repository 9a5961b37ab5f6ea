import type { BusEvent } from '../contract.ts';

/** What the NATS transport puts on the wire, and its subjects (no I/O). */

export interface Wire {
  o: string;
  at: number;
  e: BusEvent;
  /**
   * The primary's flushed WAL position when the relay read the event's outbox row, at or past
   * its commit (read replicas, src/store/replicas.ts); the relay adds it (`stampLsn`).
   */
  l?: string;
}

/** A stored wire payload (a JSON object) with `l` added first; anything else unchanged. */
export function stampLsn(payload: string, lsn: string | null | undefined): string {
  if (!lsn || !/^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/.test(lsn) || payload[0] !== '{') return payload;
  return `{"l":"${lsn}",${payload.slice(1)}`;
}

/** NATS subject tokens may not hold `.`, `*`, `>` or white space. */
const token = (s: string) => s.replace(/[.*>\s]/g, '_') || '_';

/** The subject below the deployment's prefix (what the outbox stores, so a new prefix still relays old rows). */
export function relativeSubject(e: BusEvent): string {
  // Revocations feed a process-wide list that must be whole whatever projects are watched.
  if (e.type === 'customer.session.revoked') return `_.${e.type}`;
  if (e.type === 'record.changed') return `${token(e.projectId)}.changes.${token(e.modelKey)}`;
  if ('projectId' in e && typeof e.projectId === 'string') return `${token(e.projectId)}.events.${e.type}`;
  return `_.${e.type}`;
}

export function subjectOf(e: BusEvent, prefix = 'svc'): string {
  return `${prefix}.${relativeSubject(e)}`;
}

/**
 * `nats://host:port` → subjects `svc.…` in stream `SVC_BUS`; `nats://host:port/acme` → `acme.…`
 * in `ACME_BUS`, so several deployments may share one NATS server.
 */
export function parseBusUrl(url: string): { servers: string; prefix: string; stream: string } {
  const u = new URL(url);
  const name = u.pathname.replace(/^\/+|\/+$/g, '');
  if (name && !/^[A-Za-z0-9_-]{1,64}$/.test(name))
    throw new Error(
      `SVC_BUS_URL: the path names the deployment's subjects and may hold only letters, digits, _ and -, got "${name}"`,
    );
  const prefix = name || 'svc';
  const auth = u.username
    ? `${decodeURIComponent(u.username)}${u.password ? `:${decodeURIComponent(u.password)}` : ''}@`
    : '';
  return {
    servers: `${u.protocol}//${auth}${u.host}`,
    prefix,
    stream: `${prefix.toUpperCase().replace(/-/g, '_')}_BUS`,
  };
}

/** A message's payload, or undefined for one that is not ours. */
export function decodeWire(data: Uint8Array): Wire | undefined {
  try {
    const w = JSON.parse(new TextDecoder().decode(data)) as Wire;
    return w && typeof w.o === 'string' && w.e && typeof w.e.type === 'string' ? w : undefined;
  } catch {
    return undefined;
  }
}

/** The outbox row id in a message id `<database identity>.<id>` (the relay's order). */
export function outboxIdOf(msgId: string | undefined): number | undefined {
  if (!msgId) return undefined;
  const n = Number(msgId.slice(msgId.lastIndexOf('.') + 1));
  return Number.isSafeInteger(n) ? n : undefined;
}

/** The token a project takes in subjects. */
export const projectToken = (projectId: string) => token(projectId);
