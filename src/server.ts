import type { Server } from 'bun';
import type { Settings } from './env.ts';
import { openService, type Service } from './service.ts';
import { buildApi } from './http/api.ts';
import { startGateway, type Gateway, type GatewayModule } from './http/gateway.ts';
import { RealtimeHub } from './realtime/hub.ts';
import { realtimeGateway } from './realtime/gateway.ts';
import { collabGateway } from './collab/gateway.ts';
import type { CollabOptions } from './collab/rooms.ts';
import { joinAuth } from './collab/auth.ts';
import { onSessionRevoked, verifyAccessToken } from './identity/tokens.ts';
import { metricsModule } from './http/metrics.ts';
import { warmUp, type WarmUp } from './http/warmup.ts';

export interface Running {
  svc: Service;
  apiUrl: string | undefined;
  gatewayUrl: string | undefined;
  /** What the start-up warm-up did before the API port opened (http/warmup.ts); absent when off. */
  warmup?: WarmUp;
  /** Stops accepting, lets in-flight requests finish, then closes the database. */
  stop(): Promise<void>;
}

/** How long SIGTERM waits for in-flight API requests before it closes their connections. */
const DRAIN_MS = 10_000;

/**
 * Stops accepting, waits until every in-flight request has been answered (at most DRAIN_MS),
 * then closes the connections left. Bun's graceful `stop()` also waits for idle keep-alive
 * connections and for ones that have sent nothing (or half a request line) until their idle
 * timeout: a client could hold the shutdown for 10 s with an open socket.
 */
async function drainListener(server: Server<unknown>): Promise<void> {
  void server.stop(false);
  const end = Date.now() + DRAIN_MS;
  while (server.pendingRequests > 0 && Date.now() < end) await Bun.sleep(10);
  await server.stop(true);
}

/** Starts the listeners that `SVC_ROLE` asks for, on one shared Service. */
export async function startServer(settings: Settings, collabOptions: CollabOptions = {}): Promise<Running> {
  const svc = await openService(settings, collabOptions);
  const runsApi = settings.role === 'all' || settings.role === 'api';
  const runsGateway = settings.role === 'all' || settings.role === 'gateway';
  let api: Server<unknown> | undefined;
  let gateway: Gateway | undefined;
  // One realtime hub per process: the gateway's channels and /graphql/ws share its actors.
  const hub = new RealtimeHub(svc.bus, {
    maxConnectionsPerIdentity: settings.realtimeConnectionsPerIdentity,
    maxSubscriptionsPerConnection: settings.realtimeSubscriptionsPerConnection,
    heartbeatMs: settings.sseHeartbeatMs,
    // With read replicas, content events name their commit's position (data.lsn) for refetches.
    lsn: settings.replicas !== undefined,
  });
  svc.metrics.actors.add(() => [[['channel', 'live'], hub.status().channels]]);
  svc.metrics.gauge(
    'svc_realtime_clients',
    'Connected realtime clients (SSE, /_events, /graphql/ws).',
    () => hub.status().clients,
  );
  // A logout or revoked session closes that session's realtime connections (4403).
  const stopRevocations = onSessionRevoked(svc, (e) => hub.sessionRevoked(e.sessionId));
  let warmup: WarmUp | undefined;
  try {
    if (runsApi) {
      if (settings.warmupMs > 0) warmup = await warmUp(svc, { budgetMs: settings.warmupMs });
      const app = buildApi(svc, hub).listen({ port: settings.port, hostname: settings.host });
      api = app.server ?? undefined;
      // PORT=0 (tests, benches): callbacks must name the port actually bound.
      if (api && settings.port === 0 && settings.baseUrl.endsWith(':0')) {
        svc.operations.setBaseUrl(`http://${settings.host}:${api.port}`);
        // File URLs (src/files) are built from it too.
        svc.settings.baseUrl = `http://${settings.host}:${api.port}`;
      }
    }
    if (runsGateway) {
      // Each capability on the gateway contributes one module (its routes and socket handlers).
      const modules: GatewayModule[] = [
        metricsModule(svc),
        realtimeGateway(svc, hub, (t, projectId) => verifyAccessToken(svc, t, projectId)),
        collabGateway(
          svc.collab,
          joinAuth({
            sql: svc.sql,
            gate: svc.gate,
            verifyToken: (t, projectId) => verifyAccessToken(svc, t, projectId),
          }),
        ),
      ];
      gateway = startGateway({ port: settings.realtimePort, hostname: settings.host, requests: svc.requests }, modules);
      // REALTIME_PORT=0 (tests): /collab/info and the Studio must name the port actually bound.
      if (settings.realtimePort === 0 && settings.realtimeUrl.endsWith(':0'))
        svc.settings.realtimeUrl = `ws://${settings.host}:${gateway.server.port}`;
    }
  } catch (err) {
    api?.stop(true);
    await gateway?.stop();
    stopRevocations();
    await hub.close();
    await svc.close();
    const e = err as { code?: string; message?: string };
    if (e.code === 'EADDRINUSE') throw new Error(`port in use: ${e.message}`);
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    svc,
    ...(warmup ? { warmup } : {}),
    apiUrl: api ? `http://${settings.host}:${api.port}` : undefined,
    gatewayUrl: gateway ? `http://${settings.host}:${gateway.server.port}` : undefined,
    stop() {
      stopping ??= (async () => {
        // Realtime clients first get a close frame they can reconnect on (1012), so the
        // listeners are not held open by sockets while they stop.
        hub.drain();
        await Promise.all([api && drainListener(api), gateway?.stop()]);
        stopRevocations();
        await hub.close();
        await svc.close();
      })();
      return stopping;
    },
  };
}
