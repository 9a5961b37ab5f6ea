import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command, CommandContext } from '../command.ts';
import { UsageError } from '../args.ts';
import { CliError } from '../client.ts';
import { projectOf } from './config-folder.ts';

/**
 * `svc documents push|list|rm` (docs/documents.md): the project's trusted documents. A manifest is
 * the JSON map `{ "<sha256 hex>": "<document>" }` that graphql-codegen's client preset and Relay's
 * compiler emit.
 */
async function base(ctx: CommandContext): Promise<string> {
  return `/v1/control/projects/${encodeURIComponent(await projectOf(ctx))}/documents`;
}

interface Pushed {
  projectId: string;
  applied: { documents: number };
  errors: { path: string; message: string }[];
}

export const documentsPush: Command = {
  path: ['documents', 'push'],
  summary: 'store, validate and compile the trusted documents of a manifest ({ "<sha256>": "<document>" })',
  usage: 'svc documents push <manifest.json> [--project P] [--replace]',
  flags: { project: 'string', replace: 'boolean' },
  async run(ctx) {
    const file = ctx.positionals[0];
    if (!file) throw new UsageError('name the manifest: svc documents push <manifest.json>');
    let manifest: unknown;
    try {
      manifest = JSON.parse(readFileSync(resolve(file), 'utf8'));
    } catch (err) {
      throw new CliError(`cannot read ${file}: ${(err as Error).message.split('\n')[0]}`);
    }
    const res = await ctx.client.request<Pushed>('POST', await base(ctx), {
      documents: manifest,
      replace: ctx.flags.replace === true,
    });
    const lines = [
      `stored ${res.applied.documents} document(s) in ${res.projectId}`,
      ...res.errors.map((e) => `error: ${e.path}: ${e.message}`),
    ];
    return { output: res, text: lines.join('\n'), exitCode: res.errors.length > 0 ? 1 : 0 };
  },
};

interface Listed {
  hash: string;
  bytes: number;
  valid: boolean;
  problem: string | null;
  createdAt: string;
}

export const documentsList: Command = {
  path: ['documents', 'list'],
  summary: "list the project's trusted documents (and any that no longer validate)",
  usage: 'svc documents list [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const out = await ctx.client.request<{ documents: Listed[] }>('GET', await base(ctx));
    const lines = out.documents.map(
      (d) => `sha256:${d.hash}  ${String(d.bytes).padStart(7)} B  ${d.valid ? 'valid' : `INVALID: ${d.problem ?? ''}`}`,
    );
    return { output: out, text: lines.join('\n') || 'no trusted documents' };
  },
};

export const documentsRm: Command = {
  path: ['documents', 'rm'],
  summary: 'remove a trusted document (requests naming it then answer PERSISTED_QUERY_NOT_FOUND)',
  usage: 'svc documents rm <hash> [--project P]',
  flags: { project: 'string' },
  async run(ctx) {
    const hash = ctx.positionals[0];
    if (!hash) throw new UsageError('name the document: svc documents rm <hash>');
    const out = await ctx.client.request<{ hash: string; removed: true }>(
      'DELETE',
      `${await base(ctx)}/${encodeURIComponent(hash)}`,
    );
    return { output: out, text: `removed sha256:${out.hash}` };
  },
};

export const DOCUMENT_COMMANDS: Command[] = [documentsPush, documentsList, documentsRm];
