import type { Command, CommandContext } from '../command.ts';
import { listFlag, stringFlag } from '../command.ts';
import { UsageError } from '../args.ts';
import { optionalProjectOf, projectOf } from './config-folder.ts';

/**
 * `svc api-keys …`: API keys on the control plane (docs/keys.md). The key value is printed
 * only by `create`; listings show a hint (`pk_1a2b…`).
 */
function keyId(ctx: CommandContext): string {
  const id = stringFlag(ctx.flags, 'id') ?? ctx.positionals[0];
  if (!id) throw new UsageError('name the key: svc api-keys <action> <id> (or --id ID)');
  return encodeURIComponent(id);
}

export const apiKeysCreate: Command = {
  path: ['api-keys', 'create'],
  summary: 'create an API key; the key value is shown only here',
  usage:
    'svc api-keys create --name N --type public|secret --scopes s1,s2 [--project P | --tenant --projects p1,p2] [--models m1,m2] [--origins o1,o2] [--rate-limit N] [--expires-at ISO] [--documents any|apq|trusted-only]',
  flags: {
    name: 'string',
    type: 'string',
    tenant: 'boolean',
    projects: 'list',
    scopes: 'list',
    models: 'list',
    project: 'string',
    origins: 'list',
    'rate-limit': 'string',
    'expires-at': 'string',
    documents: 'string',
  },
  required: ['name', 'type'],
  async run(ctx) {
    const { client, flags } = ctx;
    const rate = stringFlag(flags, 'rate-limit');
    if (rate !== undefined && !/^\d+$/.test(rate))
      throw new UsageError('--rate-limit must be a whole number of requests per hour');
    const out = await client.request<{ id: string; key: string }>('POST', '/v1/control/api-keys', {
      name: stringFlag(flags, 'name'),
      type: stringFlag(flags, 'type'),
      tenant: flags.tenant === true,
      // A project-bound key: --project, else the project the config folder is pinned to.
      project: flags.tenant === true ? stringFlag(flags, 'project') : await projectOf(ctx),
      projects: listFlag(flags, 'projects'),
      scopes: listFlag(flags, 'scopes') ?? [],
      models: listFlag(flags, 'models'),
      origins: listFlag(flags, 'origins'),
      rateLimit: rate === undefined ? undefined : Number(rate),
      expiresAt: stringFlag(flags, 'expires-at'),
      documents: stringFlag(flags, 'documents'),
    });
    return { output: { id: out.id, key: out.key }, text: `key ${out.id}\nvalue (shown once): ${out.key}` };
  },
};

interface Listed {
  id: string;
  name: string;
  kind: string;
  hint: string;
  projectId: string | null;
  projectIds: string[];
  scopes: string[];
  disabled: boolean;
}

export const apiKeysList: Command = {
  path: ['api-keys', 'list'],
  summary: 'list API keys (never their values)',
  usage: "svc api-keys list [--project P] (default: the config folder's project, if pinned)",
  flags: { project: 'string' },
  async run(ctx) {
    const { client } = ctx;
    const project = await optionalProjectOf(ctx);
    const out = await client.request<{ keys: Listed[] }>(
      'GET',
      `/v1/control/api-keys${project ? `?project=${encodeURIComponent(project)}` : ''}`,
    );
    const lines = out.keys.map((k) =>
      [
        k.id,
        k.kind.padEnd(4),
        k.hint.padEnd(12),
        k.disabled ? 'disabled' : 'active  ',
        k.projectId ?? k.projectIds.join(','),
        k.name,
        k.scopes.join(','),
      ].join('  '),
    );
    return { output: out, text: lines.length ? lines.join('\n') : 'no API keys' };
  },
};

function lifecycle(action: 'disable' | 'enable' | 'delete', summary: string): Command {
  return {
    path: ['api-keys', action],
    summary,
    usage: `svc api-keys ${action} <id>`,
    flags: { id: 'string' },
    async run(ctx) {
      const id = keyId(ctx);
      const out =
        action === 'delete'
          ? await ctx.client.request('DELETE', `/v1/control/api-keys/${id}`)
          : await ctx.client.request('POST', `/v1/control/api-keys/${id}/${action}`);
      return { output: out, text: `key ${decodeURIComponent(id)} ${action}d` };
    },
  };
}

export const apiKeysDisable = lifecycle('disable', 'disable an API key (it stops working within a second)');
export const apiKeysEnable = lifecycle('enable', 'enable a disabled API key again');
export const apiKeysDelete = lifecycle('delete', 'delete an API key for good');
