import { resolve } from 'node:path';
import { CliError } from '../client.ts';
import { stringFlag, type Command } from '../command.ts';
import { DataDirError, planRemoval, removeDataDir } from '../../store/data-dir.ts';

/**
 * `svc data rm`: removes what svc made for a data dir (`--data-dir`, else SVC_DATA_DIR, else
 * ./.svc) — the embedded cluster (also when kept under /var/lib/svc as root), the root token,
 * keys, files and the outbox — never while a server runs on it. Without --yes it only lists.
 */
export const dataRm: Command = {
  path: ['data', 'rm'],
  summary: 'remove what svc made in its data dir (embedded PostgreSQL included); refuses while svc runs on it',
  usage: 'svc data rm [--data-dir D] [--yes]',
  flags: { 'data-dir': 'string', yes: 'boolean' },
  async run({ flags, env }) {
    const dataDir = resolve(stringFlag(flags, 'data-dir') ?? env.SVC_DATA_DIR ?? './.svc');
    try {
      if (flags.yes !== true) {
        const plan = planRemoval(dataDir);
        const lines = [
          ...plan.remove.map((p) => `would remove ${p}`),
          ...plan.keep.map((p) => `would keep ${p} (not made by svc)`),
          'run again with --yes to remove',
        ];
        return { output: { ...plan, removed: false }, text: lines.join('\n'), exitCode: 2 };
      }
      const done = removeDataDir(dataDir);
      const lines = [...done.remove.map((p) => `removed ${p}`), ...done.keep.map((p) => `kept ${p} (not made by svc)`)];
      if (done.removedDir) lines.push(`removed ${dataDir}`);
      return {
        output: { dataDir, removed: true, paths: done.remove, kept: done.keep, removedDir: done.removedDir },
        text: lines.join('\n'),
      };
    } catch (err) {
      if (err instanceof DataDirError) throw new CliError(err.message);
      throw err;
    }
  },
};
