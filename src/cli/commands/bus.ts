import type { Command } from '../command.ts';

/** `svc bus status`: the event bus as the server sees it (from GET /health; no credentials needed). */
interface BusHealth {
  kind: string;
  connected: boolean;
  lagMs: number;
  backlog: number;
  detail?: string;
}

export const busStatus: Command = {
  path: ['bus', 'status'],
  summary: 'the event bus: postgres or nats, connected, lag, events waiting in the outbox',
  usage: 'svc bus status [--json]',
  flags: {},
  async run(ctx) {
    const health = await ctx.client.request<{ status: string; bus?: BusHealth }>('GET', '/health');
    const bus = health.bus ?? { kind: 'unknown', connected: false, lagMs: 0, backlog: 0 };
    const text = `bus: ${bus.kind}  ${bus.connected ? 'connected' : 'DISCONNECTED'}  lag=${bus.lagMs}ms  outbox=${bus.backlog}${bus.detail ? `  (${bus.detail})` : ''}`;
    return { output: bus, text };
  },
};
