import type { Server, ServerWebSocket } from 'bun';

/**
 * The contract between the gateway listener (src/http/gateway.ts) and the capabilities that
 * plug into it (realtime channels, collaboration rooms). Types and a marker only, no I/O: it
 * sits below both, so a capability never imports the listener.
 */
export interface GatewaySocketData {
  /** The name of the module that upgraded the socket: its websocket handlers get the events. */
  kind: string;
}

export type GatewaySocket<D extends GatewaySocketData = GatewaySocketData> = ServerWebSocket<D>;

/** Returned by a module's fetch after `server.upgrade` succeeded (Bun wants no response then). */
export const UPGRADED = Symbol('upgraded');

export interface GatewayModule<D extends GatewaySocketData = any> {
  /** Also the `kind` its sockets carry. */
  name: string;
  /** A response, UPGRADED, or undefined when the request is not this module's. */
  fetch(
    req: Request,
    url: URL,
    server: Server<GatewaySocketData>,
  ): Response | typeof UPGRADED | undefined | Promise<Response | typeof UPGRADED | undefined>;
  websocket?: {
    open?(ws: GatewaySocket<D>): void | Promise<void>;
    message?(ws: GatewaySocket<D>, message: string | Buffer): void | Promise<void>;
    drain?(ws: GatewaySocket<D>): void;
    close?(ws: GatewaySocket<D>, code: number, reason: string): void | Promise<void>;
  };
  /** Called when the server starts (to publish on its topics). */
  started?(server: Server<GatewaySocketData>): void;
  /** SIGTERM: tell clients to reconnect elsewhere (close frames, ended streams) before the stop. */
  drain?(): void | Promise<void>;
}
