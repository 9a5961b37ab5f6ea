import type { Command } from '../command.ts';
import { stringFlag } from '../command.ts';
import { CliError } from '../client.ts';
import { loadFolderConfig } from './config-folder.ts';

interface Group {
  groupId: string;
  name: string;
  schemaVersion: string;
  projects: number;
}

/** `svc fleet-groups publish`: the config folder's models become fleet group G's next schema version. */
export const fleetGroupsPublish: Command = {
  path: ['fleet-groups', 'publish'],
  summary:
    "publish the config folder's models as fleet group G's schema (created on first publish); every member project moves to it",
  usage: 'svc fleet-groups publish --group G [--name N] [--dir D]',
  flags: { group: 'string', name: 'string' },
  async run(ctx) {
    const group = stringFlag(ctx.flags, 'group');
    if (!group) throw new CliError('--group is required');
    const loaded = await loadFolderConfig(ctx.dir);
    const config = loaded.config as { models?: unknown } | null;
    const out = await ctx.client.request<{ groupId: string; schemaVersion: string; projects: number }>(
      'POST',
      `/v1/control/fleet-groups/${encodeURIComponent(group)}/publish`,
      {
        name: stringFlag(ctx.flags, 'name'),
        config: { models: config?.models },
      },
    );
    return {
      output: out,
      text: `fleet group ${out.groupId}: schema version ${out.schemaVersion}, ${out.projects} member project(s)`,
    };
  },
};

export const fleetGroupsList: Command = {
  path: ['fleet-groups', 'list'],
  summary: "the fleet groups of the control key's tenant",
  usage: 'svc fleet-groups list',
  flags: {},
  async run({ client }) {
    const out = await client.request<{ groups: Group[] }>('GET', '/v1/control/fleet-groups');
    const lines = out.groups.map(
      (g) => `${g.groupId}  ${g.name}  version ${g.schemaVersion}  ${g.projects} project(s)`,
    );
    return { output: out, text: lines.length ? lines.join('\n') : 'no fleet groups' };
  },
};
