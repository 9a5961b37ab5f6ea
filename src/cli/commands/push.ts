import { join } from 'node:path';
import type { Command } from '../command.ts';
import { loadFolderConfig, projectOf, writeEnvVars } from './config-folder.ts';

interface PushOutput {
  projectId: string;
  applied: Record<string, number>;
  errors: { path: string; message: string }[];
  /** Applied, but not working yet (absent from older servers' answers). */
  warnings?: { path: string; message: string }[];
  domains?: { domain: string; records: { type: string; name: string; value: string }[] }[];
  apiKeys?: { name: string; envVar: string; key: string }[];
}

export const push: Command = {
  path: ['push'],
  summary:
    'validate and apply the config folder to its project: what is valid applies, the rest is listed in errors (--atomic: all or nothing)',
  usage: 'svc push [--force] [--atomic] [--project P] [--dir D]',
  flags: { force: 'boolean', atomic: 'boolean', project: 'string' },
  async run(ctx) {
    const loaded = await loadFolderConfig(ctx.dir);
    const projectId = await projectOf(ctx, loaded);
    const res = await ctx.client.request<PushOutput>(
      'POST',
      `/v1/control/projects/${encodeURIComponent(projectId)}/config`,
      {
        config: loaded.config,
        force: ctx.flags.force === true,
        atomic: ctx.flags.atomic === true,
      },
    );
    // Key values go to .env only; they are never printed.
    const { apiKeys, ...rest } = res;
    const shown = { ...rest, warnings: res.warnings ?? [] };
    if (apiKeys && apiKeys.length > 0)
      writeEnvVars(join(ctx.dir, '.env'), Object.fromEntries(apiKeys.map((k) => [k.envVar, k.key])));
    const lines = [`pushed to ${res.projectId}`];
    for (const [c, n] of Object.entries(res.applied)) lines.push(`  ${c}: ${n}`);
    for (const k of apiKeys ?? []) lines.push(`  new key "${k.name}" written to .env as ${k.envVar}`);
    for (const d of res.domains ?? []) {
      lines.push(`  domain ${d.domain} is pending; add these DNS records, then run svc domains verify ${d.domain}:`);
      for (const r of d.records) lines.push(`    ${r.type} ${r.name} ${r.value}`);
    }
    for (const w of shown.warnings) lines.push(`warning: ${w.path}: ${w.message}`);
    for (const e of res.errors) lines.push(`error: ${e.path}: ${e.message}`);
    return { output: shown, text: lines.join('\n'), exitCode: res.errors.length > 0 ? 1 : 0 };
  },
};
