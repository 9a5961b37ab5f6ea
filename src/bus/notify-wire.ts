import type { BusEvent } from './contract.ts';

/**
 * The PostgreSQL bus's wire format (transport in postgres.ts): the JSON of a NOTIFY on the bus
 * channel, and how a batch of events is cut into NOTIFY payloads. No I/O.
 */

/** NOTIFY payloads must stay under 8,000 bytes; leave room for the envelope. */
const PAYLOAD_BUDGET = 7_500;

export interface Message {
  origin: string;
  /** The primary's flushed WAL position when the relay sent it, at or past the events' commits (sql/053_bus_relay_lsn.sql). */
  lsn?: string;
  events?: BusEvent[];
  /** Ids in `bus_payloads` of events too large for a NOTIFY (sql/011_bus_payloads.sql). */
  refs?: string[];
}

export type Frame = { payload: string } | { stored: string; head: string };

/** NOTIFY payloads in order; an event too large for one is `stored` and announced by its row id. */
export function frames(origin: string, events: readonly BusEvent[]): Frame[] {
  const head = `{"origin":${JSON.stringify(origin)},`;
  const out: Frame[] = [];
  let chunk: string[] = [];
  let size = 0;
  const flush = () => {
    if (chunk.length) out.push({ payload: `${head}"events":[${chunk.join(',')}]}` });
    chunk = [];
    size = 0;
  };
  for (const e of events) {
    const text = JSON.stringify(e);
    if (text.length > PAYLOAD_BUDGET) {
      flush();
      out.push({ stored: text, head });
      continue;
    }
    if (size + text.length > PAYLOAD_BUDGET) flush();
    chunk.push(text);
    size += text.length + 1;
  }
  flush();
  return out;
}
