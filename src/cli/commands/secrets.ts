import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliError } from '../client.ts';
import type { Command } from '../command.ts';
import { projectOf } from './config-folder.ts';

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new CliError(`${file}: not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * `svc secrets push`: declarations from svc.secrets.json, plaintext from the git-ignored
 * svc.secrets.local.json or SVC_SECRET_<LABEL>. Prints labels only, never a value.
 */
export const secretsPush: Command = {
  path: ['secrets', 'push'],
  summary: 'store the secrets declared in svc.secrets.json (never in production)',
  usage: 'svc secrets push [--project P] [--dir D]',
  flags: { project: 'string' },
  async run(ctx) {
    if (ctx.env.SVC_ENV === 'production')
      throw new CliError(
        'svc secrets push refuses to run with SVC_ENV=production: set production secrets in the admin UI',
      );
    const declFile = join(ctx.dir, 'svc.secrets.json');
    if (!existsSync(declFile)) throw new CliError(`no svc.secrets.json in ${ctx.dir}`);
    const decl = readJson(declFile) as { secrets?: unknown };
    if (!Array.isArray(decl?.secrets))
      throw new CliError('svc.secrets.json must be { "secrets": [ { "ownerKind", "label" } ] }');
    const localFile = join(ctx.dir, 'svc.secrets.local.json');
    const local = (existsSync(localFile) ? readJson(localFile) : {}) as Record<string, unknown>;
    const missing: string[] = [];
    const secrets = (decl.secrets as { ownerKind?: unknown; label?: unknown }[]).map((s, i) => {
      if (typeof s?.label !== 'string' || s.label === '')
        throw new CliError(`svc.secrets.json: secrets[${i}].label is required`);
      const label = s.label;
      const fromEnv = ctx.env[`SVC_SECRET_${label.toUpperCase()}`];
      const value = typeof local[label] === 'string' ? (local[label] as string) : fromEnv;
      if (value === undefined) missing.push(label);
      return { ownerKind: s.ownerKind ?? 'project', label, value };
    });
    if (missing.length > 0) {
      throw new CliError(
        `no value for ${missing.join(', ')}: add it to svc.secrets.local.json or set SVC_SECRET_${missing[0]!.toUpperCase()}`,
      );
    }
    const projectId = await projectOf(ctx);
    const out = await ctx.client.request<{ created: string[]; updated: string[]; unchanged: string[] }>(
      'POST',
      `/v1/control/projects/${encodeURIComponent(projectId)}/secrets`,
      { secrets },
    );
    return {
      output: out,
      text: `created: ${out.created.join(', ') || '-'}\nupdated: ${out.updated.join(', ') || '-'}\nunchanged: ${out.unchanged.join(', ') || '-'}`,
    };
  },
};
