import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from '../command.ts';
import { findConfigFile } from '../../config/load.ts';
import { projectOf } from './config-folder.ts';

/** The settings file a TypeScript config imports (docs/config.md). */
export const SETTINGS_FILE = 'svc.settings.json';

/**
 * Writes the live settings into the folder: in place for a JSON config, into
 * svc.settings.json (imported by svc.config.ts) for a TypeScript one.
 */
export function writeSettings(dir: string, settings: unknown): string {
  const found = findConfigFile(dir);
  if (found?.format === 'json') {
    const config = JSON.parse(readFileSync(found.file, 'utf8')) as Record<string, unknown>;
    const project = (config.project ?? {}) as Record<string, unknown>;
    config.project = { ...project, settings };
    writeFileSync(found.file, JSON.stringify(config, null, 2) + '\n');
    return found.file;
  }
  const file = join(dir, SETTINGS_FILE);
  writeFileSync(file, JSON.stringify(settings, null, 2) + '\n');
  return file;
}

export const pull: Command = {
  path: ['pull'],
  summary: "print the project's live config and write its settings into the folder",
  usage: 'svc pull [--project P] [--dir D]',
  flags: { project: 'string' },
  async run(ctx) {
    const projectId = await projectOf(ctx);
    const live = await ctx.client.request('GET', `/v1/control/projects/${encodeURIComponent(projectId)}/config`);
    const settings = (live.project as { settings?: unknown } | undefined)?.settings ?? {};
    if (existsSync(ctx.dir)) writeSettings(ctx.dir, settings);
    return { output: live };
  },
};
