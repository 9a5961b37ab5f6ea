import { UsageError } from '../args.ts';
import { stringFlag, type Command } from '../command.ts';
import { projectOf } from './config-folder.ts';

/** `svc executions …` and `svc schedules …` (docs/operations.md), on the control plane. */
interface Execution {
  id: string;
  operationKey: string;
  status: string;
  trigger: string;
  attempts: number;
  deadLetter: boolean;
  createdAt: string;
}

const base = (projectId: string) => `/v1/control/projects/${encodeURIComponent(projectId)}`;

function line(e: Execution): string {
  return `${e.id}  ${e.status.padEnd(10)} ${e.operationKey}  ${e.trigger}  attempts=${e.attempts}${e.deadLetter ? '  DEAD-LETTER' : ''}  ${e.createdAt}`;
}

export const executionsList: Command = {
  path: ['executions', 'list'],
  summary: 'list recent operation executions (newest first); --dead-letter for failed hooks',
  usage: 'svc executions list [--status S] [--operation K] [--dead-letter] [--limit N] [--project P]',
  flags: { project: 'string', status: 'string', operation: 'string', 'dead-letter': 'boolean', limit: 'string' },
  async run(ctx) {
    const projectId = await projectOf(ctx);
    const q = new URLSearchParams();
    const status = stringFlag(ctx.flags, 'status');
    const operation = stringFlag(ctx.flags, 'operation');
    const limit = stringFlag(ctx.flags, 'limit');
    if (status) q.set('status', status);
    if (operation) q.set('operation', operation);
    if (limit) q.set('limit', limit);
    if (ctx.flags['dead-letter'] === true) q.set('deadLetter', '1');
    const out = await ctx.client.request<{ executions: Execution[] }>('GET', `${base(projectId)}/executions?${q}`);
    return { output: out, text: out.executions.map(line).join('\n') || 'no executions' };
  },
};

export const executionsShow: Command = {
  path: ['executions', 'show'],
  summary: 'one execution with its input, result or error',
  usage: 'svc executions show <executionId> [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const id = ctx.positionals[0];
    if (!id) throw new UsageError('usage: svc executions show <executionId>');
    const out = await ctx.client.request('GET', `${base(await projectOf(ctx))}/executions/${encodeURIComponent(id)}`);
    return { output: out, text: JSON.stringify(out, null, 2) };
  },
};

export const executionsCancel: Command = {
  path: ['executions', 'cancel'],
  summary: 'cancel a pending or running execution (aborts its call)',
  usage: 'svc executions cancel <executionId> [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const id = ctx.positionals[0];
    if (!id) throw new UsageError('usage: svc executions cancel <executionId>');
    const out = await ctx.client.request<Execution>(
      'POST',
      `${base(await projectOf(ctx))}/executions/${encodeURIComponent(id)}/cancel`,
    );
    return { output: out, text: line(out) };
  },
};

export const schedulesList: Command = {
  path: ['schedules', 'list'],
  summary: 'list schedules with their last and next run',
  usage: 'svc schedules list [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const out = await ctx.client.request<{
      schedules: {
        key: string;
        cron: string;
        timezone: string;
        enabled: boolean;
        nextRunAt: string | null;
        lastRunAt: string | null;
      }[];
    }>('GET', `${base(await projectOf(ctx))}/schedules`);
    const text = out.schedules
      .map(
        (s) =>
          `${s.key}  ${s.cron} (${s.timezone})  ${s.enabled ? 'enabled' : 'disabled'}  last=${s.lastRunAt ?? '-'}  next=${s.nextRunAt ?? '-'}`,
      )
      .join('\n');
    return { output: out, text: text || 'no schedules' };
  },
};

export const schedulesTrigger: Command = {
  path: ['schedules', 'trigger'],
  summary: 'run a schedule once now',
  usage: 'svc schedules trigger <scheduleKey> [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const key = ctx.positionals[0];
    if (!key) throw new UsageError('usage: svc schedules trigger <scheduleKey>');
    const out = await ctx.client.request<{ executionId: string | null; fireAt: string }>(
      'POST',
      `${base(await projectOf(ctx))}/schedules/${encodeURIComponent(key)}/trigger`,
    );
    return {
      output: out,
      text: `${key} triggered at ${out.fireAt}: execution ${out.executionId ?? '(operation missing)'}`,
    };
  },
};

export const OPERATION_COMMANDS: Command[] = [
  executionsList,
  executionsShow,
  executionsCancel,
  schedulesList,
  schedulesTrigger,
];
