import { expect } from 'bun:test';
import { EventSource } from 'eventsource';

/**
 * The `data` of a content event as a service delivers it: with read replicas (the suite on a
 * standby, .ci/replicas) it also names `lsn`, the position a refetch presents as `x-svc-lsn`.
 */
export function contentData(server: { svc: { replicas?: unknown } }, data: Record<string, unknown>) {
  return server.svc.replicas ? { ...data, lsn: expect.stringMatching(/^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/) } : data;
}

/** An EventSource on a gateway channel, collecting what it receives. */
export function sse(
  gatewayUrl: string,
  channel: string,
  params: Record<string, string>,
  headers: Record<string, string> = {},
) {
  const url = `${gatewayUrl}/sse/${encodeURIComponent(channel)}?${new URLSearchParams(params)}`;
  const es = new EventSource(url, {
    fetch: (input, init) =>
      fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), ...headers } }),
  });
  const events: any[] = [];
  const ids: string[] = [];
  let connected = false;
  /** `event: bus` frames: the gateway's event bus went away (false) or came back (true). */
  const bus: boolean[] = [];
  es.addEventListener('connected', () => (connected = true));
  es.addEventListener('bus', (e) => bus.push(JSON.parse((e as MessageEvent).data).connected));
  es.onmessage = (e) => {
    events.push(JSON.parse(e.data));
    ids.push(e.lastEventId);
  };
  return { es, events, ids, bus, isConnected: () => connected };
}

/** A `/_events` socket with a queue of received frames. */
export async function eventsSocket(gatewayUrl: string, params: Record<string, string>) {
  const ws = new WebSocket(`${gatewayUrl.replace(/^http/, 'ws')}/_events?${new URLSearchParams(params)}`);
  const frames: any[] = [];
  let closed: { code: number; reason: string } | undefined;
  ws.onmessage = (e) => frames.push(JSON.parse(String(e.data)));
  ws.onclose = (e) => (closed = { code: e.code, reason: e.reason });
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error('socket failed'));
  });
  return {
    ws,
    frames,
    closed: () => closed,
    send: (f: unknown) => ws.send(typeof f === 'string' ? f : JSON.stringify(f)),
  };
}
