import { UsageError } from '../args.ts';
import type { Command } from '../command.ts';
import { projectOf } from './config-folder.ts';

export const domainsVerify: Command = {
  path: ['domains', 'verify'],
  summary: 'check the DNS challenge of a custom domain and mark it verified',
  usage: 'svc domains verify <domain> [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const domain = ctx.positionals[0];
    if (!domain) throw new UsageError('usage: svc domains verify <domain>');
    const projectId = await projectOf(ctx);
    const out = await ctx.client.request<{ verified: boolean; reason?: string; domain: string }>(
      'POST',
      `/v1/control/projects/${encodeURIComponent(projectId)}/domains/verify`,
      { domain },
    );
    return {
      output: out,
      text: out.verified
        ? `${out.domain} is verified`
        : `${out.domain} is not verified yet: ${out.reason ?? 'DNS records missing'}`,
      exitCode: out.verified ? 0 : 1,
    };
  },
};

export const domainsList: Command = {
  path: ['domains', 'list'],
  summary: 'list custom domains with their status and DNS records',
  usage: 'svc domains list [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const projectId = await projectOf(ctx);
    return { output: await ctx.client.request('GET', `/v1/control/projects/${encodeURIComponent(projectId)}/domains`) };
  },
};
