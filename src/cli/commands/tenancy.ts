import type { Command } from '../command.ts';
import { stringFlag } from '../command.ts';

export const tenantsCreate: Command = {
  path: ['tenants', 'create'],
  summary: 'create a tenant and its owner (root token)',
  usage: 'svc tenants create --name N [--owner-email E]',
  flags: { name: 'string', 'owner-email': 'string' },
  required: ['name'],
  async run({ client, flags }) {
    const out = await client.request('POST', '/v1/control/tenants', {
      name: stringFlag(flags, 'name'),
      ownerEmail: stringFlag(flags, 'owner-email'),
    });
    return {
      output: out,
      text: `tenant ${out.tenantId}\nowner member ${out.memberId}\ncontrol key (shown once): ${out.controlKey}`,
    };
  },
};

export const projectsCreate: Command = {
  path: ['projects', 'create'],
  summary: "create a project in the control key's tenant",
  usage: 'svc projects create --name N',
  flags: { name: 'string' },
  required: ['name'],
  async run({ client, flags }) {
    const out = await client.request('POST', '/v1/control/projects', { name: stringFlag(flags, 'name') });
    return { output: out, text: `project ${out.projectId} in tenant ${out.tenantId}` };
  },
};

export const membersAdd: Command = {
  path: ['members', 'add'],
  summary:
    'add a member (owner, admin, editor or viewer; of the tenant or of one project) and print their Studio sign-in link',
  usage: 'svc members add --email E --role owner|admin|editor|viewer [--project P]',
  flags: { email: 'string', role: 'string', project: 'string' },
  required: ['email', 'role'],
  async run({ client, flags }) {
    const out = await client.request('POST', '/v1/control/members', {
      email: stringFlag(flags, 'email'),
      role: stringFlag(flags, 'role'),
      project: stringFlag(flags, 'project'),
    });
    const link =
      typeof out.loginUrl === 'string' ? `\nfirst sign-in to the Studio (single use, 7 days): ${out.loginUrl}` : '';
    return { output: out, text: `member ${out.memberId}\ncontrol key (shown once): ${out.controlKey}${link}` };
  },
};
