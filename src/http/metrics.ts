import { Elysia } from 'elysia';
import type { Gate } from '../auth/gate.ts';
import type { MetricsRegistry } from '../metrics/registry.ts';
import { restError } from './errors.ts';
import type { GatewayModule } from './gateway.ts';

/**
 * GET /metrics in Prometheus text format, on the API listener and on the gateway (a
 * gateway-only process is scraped too). The gate decides who may read it (SVC_METRICS_TOKEN).
 */
export async function metricsResponse(
  parts: { gate: Gate; metrics: MetricsRegistry },
  request: Request,
): Promise<Response> {
  try {
    parts.gate.checkMetricsAccess(request.headers);
  } catch (err) {
    return restError(err);
  }
  return new Response(await parts.metrics.render(), {
    headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'cache-control': 'no-store' },
  });
}

export function metricsRoutes(parts: { gate: Gate; metrics: MetricsRegistry }) {
  return new Elysia({ name: 'svc.metrics' }).get('/metrics', ({ request }) => metricsResponse(parts, request));
}

export function metricsModule(parts: { gate: Gate; metrics: MetricsRegistry }): GatewayModule {
  return {
    name: 'metrics',
    fetch: (req, url) =>
      req.method === 'GET' && url.pathname === '/metrics' ? metricsResponse(parts, req) : undefined,
  };
}
