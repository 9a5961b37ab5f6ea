import { expect } from 'bun:test';
import { EventSource } from 'eventsource';
import { createClient, type Client } from 'graphql-ws';

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

/** `/graphql/ws` of a service at `httpUrl`. */
export const graphqlWsUrl = (httpUrl: string) => `${httpUrl.replace(/^http/, 'ws')}/graphql/ws`;

/**
 * A graphql-ws client on `/graphql/ws` of `httpUrl`, connecting at once and never retrying, with
 * the close events it saw; pushed to `clients`, which the file's afterAll disposes.
 */
export function wsClient(httpUrl: string, connectionParams: Record<string, unknown>, clients: Client[]) {
  const closes: { code: number; reason: string }[] = [];
  const c = createClient({
    url: graphqlWsUrl(httpUrl),
    connectionParams,
    retryAttempts: 0,
    lazy: false,
    on: { closed: (e) => closes.push({ code: (e as CloseEvent).code, reason: (e as CloseEvent).reason }) },
    onNonLazyError: () => {},
  });
  clients.push(c);
  return { c, closes };
}

/** Subscribes and collects `next` payloads; `state` holds the error or completion. */
export function collect(c: Client, query: string, variables: Record<string, unknown> = {}) {
  const got: any[] = [];
  const state: { error?: any; done?: boolean } = {};
  const stop = c.subscribe(
    { query, variables },
    { next: (v) => got.push(v), error: (e) => (state.error = e), complete: () => (state.done = true) },
  );
  return { got, state, stop };
}
