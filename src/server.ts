import type { Server } from 'bun';
import type { Settings } from './env.ts';
import { openService, type Service } from './service.ts';
import { buildApi } from './http/api.ts';
import { startGateway } from './http/gateway.ts';

export interface Running {
  svc: Service;
  apiUrl: string | undefined;
  gatewayUrl: string | undefined;
  /** Stops accepting, lets in-flight requests finish, then closes the database. */
  stop(): Promise<void>;
}

/** Starts the listeners that `SVC_ROLE` asks for, on one shared Service. */
export async function startServer(settings: Settings): Promise<Running> {
  const svc = await openService(settings);
  const runsApi = settings.role === 'all' || settings.role === 'api';
  const runsGateway = settings.role === 'all' || settings.role === 'gateway';
  let api: Server<unknown> | undefined;
  let gateway: Server<unknown> | undefined;
  try {
    if (runsApi) {
      const app = buildApi(svc).listen({ port: settings.port, hostname: settings.host });
      api = app.server ?? undefined;
    }
    if (runsGateway) gateway = startGateway(svc, { port: settings.realtimePort, hostname: settings.host });
  } catch (err) {
    api?.stop(true);
    gateway?.stop(true);
    await svc.close();
    const e = err as { code?: string; message?: string };
    if (e.code === 'EADDRINUSE') throw new Error(`port in use: ${e.message}`);
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    svc,
    apiUrl: api ? `http://${settings.host}:${api.port}` : undefined,
    gatewayUrl: gateway ? `http://${settings.host}:${gateway.port}` : undefined,
    stop() {
      stopping ??= (async () => {
        await Promise.all([api?.stop(), gateway?.stop()]);
        await svc.close();
      })();
      return stopping;
    },
  };
}
