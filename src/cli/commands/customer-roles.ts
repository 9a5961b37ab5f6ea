import { UsageError } from '../args.ts';
import { listFlag, stringFlag, type Command, type CommandContext } from '../command.ts';
import { projectOf } from './config-folder.ts';

/** `svc customer-roles …`: roles by key; assignments to customer ids. */
async function base(ctx: CommandContext): Promise<string> {
  return `/v1/control/projects/${encodeURIComponent(await projectOf(ctx))}`;
}

function roleKey(ctx: CommandContext): string {
  const key = stringFlag(ctx.flags, 'key') ?? ctx.positionals[0];
  if (!key) throw new UsageError('a role key is required (--key K)');
  return encodeURIComponent(key);
}

function customer(ctx: CommandContext): string {
  const c = stringFlag(ctx.flags, 'customer') ?? ctx.positionals[1];
  if (!c) throw new UsageError('a customer id is required (--customer C)');
  return c;
}

const common = { project: 'string', key: 'string' } as const;

export const customerRolesList: Command = {
  path: ['customer-roles', 'list'],
  summary: 'list customer roles',
  usage: 'svc customer-roles list [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const out = await ctx.client.request<{ roles: unknown[] }>('GET', `${await base(ctx)}/customer-roles`);
    return { output: out.roles };
  },
};

export const customerRolesCreate: Command = {
  path: ['customer-roles', 'create'],
  summary: 'create a customer role',
  usage: 'svc customer-roles create --key K --name N --permissions s1,s2 [--default]',
  flags: { ...common, name: 'string', permissions: 'list', default: 'boolean' },
  async run(ctx) {
    const out = await ctx.client.request('POST', `${await base(ctx)}/customer-roles`, {
      key: stringFlag(ctx.flags, 'key') ?? ctx.positionals[0],
      name: stringFlag(ctx.flags, 'name'),
      permissions: listFlag(ctx.flags, 'permissions') ?? [],
      isDefault: ctx.flags.default === true,
    });
    return { output: out };
  },
};

export const customerRolesUpdate: Command = {
  path: ['customer-roles', 'update'],
  summary: 'change the name, permissions or default flag of a role',
  usage: 'svc customer-roles update --key K [--name N] [--permissions s1,s2] [--default | --no-default]',
  flags: { ...common, name: 'string', permissions: 'list', default: 'boolean', 'no-default': 'boolean' },
  async run(ctx) {
    const patch: Record<string, unknown> = {};
    if (stringFlag(ctx.flags, 'name') !== undefined) patch.name = stringFlag(ctx.flags, 'name');
    if (listFlag(ctx.flags, 'permissions') !== undefined) patch.permissions = listFlag(ctx.flags, 'permissions');
    if (ctx.flags.default === true) patch.isDefault = true;
    if (ctx.flags['no-default'] === true) patch.isDefault = false;
    return { output: await ctx.client.request('PATCH', `${await base(ctx)}/customer-roles/${roleKey(ctx)}`, patch) };
  },
};

export const customerRolesDisable: Command = {
  path: ['customer-roles', 'disable'],
  summary: 'disable a role (it stays listed; assignments are kept)',
  usage: 'svc customer-roles disable --key K',
  flags: common,
  async run(ctx) {
    return { output: await ctx.client.request('POST', `${await base(ctx)}/customer-roles/${roleKey(ctx)}/disable`) };
  },
};

export const customerRolesAssign: Command = {
  path: ['customer-roles', 'assign'],
  summary: 'assign a role to a customer id',
  usage: 'svc customer-roles assign --key K --customer C',
  flags: { ...common, customer: 'string' },
  async run(ctx) {
    const key = roleKey(ctx);
    return {
      output: await ctx.client.request('POST', `${await base(ctx)}/customer-roles/${key}/assignments`, {
        customerId: customer(ctx),
      }),
    };
  },
};

export const customerRolesRevoke: Command = {
  path: ['customer-roles', 'revoke'],
  summary: 'remove a role from a customer id',
  usage: 'svc customer-roles revoke --key K --customer C',
  flags: { ...common, customer: 'string' },
  async run(ctx) {
    const key = roleKey(ctx);
    return {
      output: await ctx.client.request(
        'DELETE',
        `${await base(ctx)}/customer-roles/${key}/assignments/${encodeURIComponent(customer(ctx))}`,
      ),
    };
  },
};

export const customerRolesAssignments: Command = {
  path: ['customer-roles', 'assignments'],
  summary: 'list assignments, optionally of one role or one customer',
  usage: 'svc customer-roles assignments [--key K] [--customer C]',
  flags: { ...common, customer: 'string' },
  async run(ctx) {
    const q = new URLSearchParams();
    const key = stringFlag(ctx.flags, 'key');
    const c = stringFlag(ctx.flags, 'customer');
    if (key) q.set('role', key);
    if (c) q.set('customer', c);
    const out = await ctx.client.request<{ assignments: unknown[] }>(
      'GET',
      `${await base(ctx)}/customer-role-assignments?${q}`,
    );
    return { output: out.assignments };
  },
};

export const CUSTOMER_ROLE_COMMANDS: Command[] = [
  customerRolesList,
  customerRolesCreate,
  customerRolesUpdate,
  customerRolesDisable,
  customerRolesAssign,
  customerRolesRevoke,
  customerRolesAssignments,
];
