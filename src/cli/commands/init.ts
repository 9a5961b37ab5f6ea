import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CliError } from '../client.ts';
import { stringFlag, type Command } from '../command.ts';
import { SETTINGS_FILE } from './pull.ts';

function starter(pin: { id: string; tenantId: string } | null, name: string): string {
  const project = pin
    ? `  // Pins this folder to one project: svc push refuses any other.
  project: {
    id: '${pin.id}',
    tenantId: '${pin.tenantId}',
    // Written by svc pull. Leave settings out entirely to keep the platform's settings as they are.
    settings,
  },`
    : `  // Pin the folder to a project (svc init --project P does it for you):
  // project: { id: 'prj_…', tenantId: 'ten_…', settings },`;
  return `import { defineConfig, defineModel, text, richtext, boolean } from 'svc/config';
import settings from './${SETTINGS_FILE}';

export default defineConfig({
  key: '${name}',
  name: '${name}',
${project}
  models: [
    defineModel({
      key: 'page',
      name: 'Page',
      fields: [
        text({ key: 'title', label: 'Title', required: true, queryable: true }),
        text({ key: 'slug', label: 'Slug', required: true, queryable: true }),
        richtext({ key: 'body', label: 'Body' }),
        boolean({ key: 'featured', label: 'Featured', queryable: true }),
      ],
      lookups: [{ keyBy: ['slug'] }],
    }),
  ],
  apiKeys: [{ name: 'website', keyType: 'public', envVar: 'SVC_PUBLIC_KEY', scopes: ['records:read'] }],
});
`;
}

/** `svc init`: a starter config folder, git-ignoring the files that hold credentials. */
export const init: Command = {
  path: ['init'],
  summary: 'write a starter config folder (svc.config.ts, .gitignore, secrets files)',
  usage: 'svc init [--project P] [--name N] [--dir D]',
  flags: { project: 'string', name: 'string' },
  async run(ctx) {
    if (existsSync(join(ctx.dir, 'svc.config.ts')) || existsSync(join(ctx.dir, 'svc.config.json'))) {
      throw new CliError(`${ctx.dir} already holds a config; refusing to overwrite it`);
    }
    const projectId = stringFlag(ctx.flags, 'project');
    let pin: { id: string; tenantId: string } | null = null;
    let settings: unknown = {};
    if (projectId) {
      // Reading the live config checks access and gives the tenant for the pin.
      const live = await ctx.client.request<{ project: { id: string; tenantId: string; settings: unknown } }>(
        'GET',
        `/v1/control/projects/${encodeURIComponent(projectId)}/config`,
      );
      pin = { id: live.project.id, tenantId: live.project.tenantId };
      settings = live.project.settings;
    }
    const name = (stringFlag(ctx.flags, 'name') ?? 'site').replace(/[^A-Za-z0-9 _.-]/g, '');
    mkdirSync(ctx.dir, { recursive: true });
    const files: Record<string, string> = {
      'svc.config.ts': starter(pin, name),
      [SETTINGS_FILE]: JSON.stringify(settings, null, 2) + '\n',
      'svc.secrets.json': JSON.stringify({ secrets: [] }, null, 2) + '\n',
      '.gitignore':
        '# Written by svc push (API keys) and by you (secret values): never commit them.\n.env\nsvc.secrets.local.json\n',
    };
    for (const [f, content] of Object.entries(files)) {
      if (f === '.gitignore' && existsSync(join(ctx.dir, f))) continue;
      writeFileSync(join(ctx.dir, f), content);
    }
    return {
      output: { dir: ctx.dir, files: Object.keys(files), projectId: pin?.id ?? null },
      text: `wrote ${Object.keys(files).join(', ')} in ${ctx.dir}`,
    };
  },
};
