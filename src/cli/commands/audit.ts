import type { Command } from '../command.ts';
import { stringFlag } from '../command.ts';
import { CliError } from '../client.ts';
import { optionalProjectOf } from './config-folder.ts';

interface Entry {
  id: string;
  at: string;
  actor: { kind: string; id: string | null };
  action: string;
  target: { kind: string; id: string | null };
  projectId: string | null;
  ip: string | null;
}

/** `svc audit`: the audit log (owners and admins; docs/audit.md), newest first. */
export const audit: Command = {
  path: ['audit'],
  summary: 'the audit log of a project (or of the tenant without --project), newest first; owners and admins',
  usage: 'svc audit [--project P] [--since ISO] [--actor ID] [--first N] [--after CURSOR] [--json]',
  flags: { project: 'string', since: 'string', actor: 'string', first: 'string', after: 'string' },
  async run(ctx) {
    const since = stringFlag(ctx.flags, 'since');
    if (since !== undefined && Number.isNaN(new Date(since).getTime()))
      throw new CliError('--since must be an ISO 8601 date and time, for example 2026-11-01T00:00:00Z');
    const q = new URLSearchParams();
    const projectId = await optionalProjectOf(ctx);
    if (projectId) q.set('projectId', projectId);
    if (since) q.set('since', new Date(since).toISOString());
    for (const k of ['actor', 'first', 'after']) {
      const v = stringFlag(ctx.flags, k);
      if (v !== undefined) q.set(k, v);
    }
    const out = await ctx.client.request<{
      entries: Entry[];
      pageInfo: { hasNextPage: boolean; endCursor: string | null };
    }>('GET', `/v1/control/audit?${q}`);
    const lines = out.entries.map(
      (e) =>
        `${e.at}  ${e.actor.kind}${e.actor.id ? `:${e.actor.id}` : ''}  ${e.action}  ${e.target.kind}${e.target.id ? `:${e.target.id}` : ''}${e.ip ? `  ${e.ip}` : ''}`,
    );
    if (out.pageInfo.hasNextPage) lines.push(`… more: --after ${out.pageInfo.endCursor}`);
    return { output: out, text: lines.length ? lines.join('\n') : 'no entries' };
  },
};
