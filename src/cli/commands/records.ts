import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command, CommandContext } from '../command.ts';
import { stringFlag } from '../command.ts';
import { CliError } from '../client.ts';
import { UsageError } from '../args.ts';

/**
 * `svc records save|publish` (CONTRACT §3). Records are content, so these commands act with an
 * API key over POST /graphql, never with a control key: the key comes from `--token` when it is
 * an `sk_`/`sk_t_` key, else from SVC_API_KEY (plus SVC_PROJECT_ID for tenant keys). It needs
 * records:write / records:publish, and drafts:read to find a record by natural key
 * (docs/graphql.md, "CLI").
 */
function apiKey(ctx: CommandContext): { key: string; project: string | undefined } {
  const token = ctx.client.opts.token;
  const key = token && /^sk(_t)?_/.test(token) ? token : ctx.env.SVC_API_KEY;
  if (!key) throw new CliError('records commands need a secret API key: pass --token sk_… or set SVC_API_KEY');
  return { key, project: ctx.env.SVC_PROJECT_ID };
}

async function gql(ctx: CommandContext, query: string, variables: Record<string, unknown>): Promise<any> {
  const { key, project } = apiKey(ctx);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-api-key': key };
  if (project) headers['x-project-id'] = project;
  let res: Response;
  try {
    res = await fetch(new URL('/graphql', ctx.client.opts.url), { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  } catch {
    throw new CliError(`cannot reach svc at ${ctx.client.opts.url} (is it running? set --url or SVC_URL)`);
  }
  let body: any;
  try {
    body = await res.json();
  } catch {
    throw new CliError(`${res.status}: the server answered with something that is not JSON`);
  }
  const err = body?.errors?.[0];
  if (err) throw new CliError(`${res.status} ${err.extensions?.code ?? 'ERROR'}: ${err.message}`);
  return body.data;
}

const BATCH = `mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }`;

export const recordsSave: Command = {
  path: ['records', 'save'],
  summary: 'create or update (by natural key) the working version of a record',
  usage: 'svc records save --model M --natural-key K --file F.json [--locale L]',
  flags: { model: 'string', 'natural-key': 'string', file: 'string', locale: 'string' },
  async run(ctx) {
    const model = stringFlag(ctx.flags, 'model');
    const naturalKey = stringFlag(ctx.flags, 'natural-key');
    const file = stringFlag(ctx.flags, 'file');
    if (!model || !naturalKey || !file) throw new UsageError('--model, --natural-key and --file are required');
    let data: unknown;
    try {
      data = JSON.parse(readFileSync(resolve(ctx.dir, file), 'utf8'));
    } catch (e) {
      throw new CliError(`cannot read ${file} as JSON: ${(e as Error).message}`);
    }
    const locale = stringFlag(ctx.flags, 'locale') ?? null;
    const lookup = await findByNaturalKey(ctx, model, naturalKey);
    const op = lookup ? { action: 'UPDATE', _id: lookup, locale, data } : { action: 'CREATE', modelKey: model, naturalKey, locale, data };
    const out = await gql(ctx, BATCH, { ops: [op] });
    const id = out.batchRecordOperations[0]._id as string;
    return { output: { _id: id }, text: `${lookup ? 'updated' : 'created'} ${model} ${id}` };
  },
};

async function findByNaturalKey(ctx: CommandContext, model: string, naturalKey: string): Promise<string | null> {
  // The single read is per model (`<model>(naturalKey, preview)`), so its name is the model key.
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(model)) throw new CliError(`unknown model ${model}`);
  const data = await gql(ctx, `query($k: String!) { r: ${model}(naturalKey: $k, preview: true) { _id } }`, { k: naturalKey });
  return data.r?._id ?? null;
}

export const recordsPublish: Command = {
  path: ['records', 'publish'],
  summary: 'publish the working version of a record',
  usage: 'svc records publish --model M --id ID',
  flags: { model: 'string', id: 'string' },
  async run(ctx) {
    const model = stringFlag(ctx.flags, 'model');
    const id = stringFlag(ctx.flags, 'id');
    if (!model || !id) throw new UsageError('--model and --id are required');
    await gql(ctx, BATCH, { ops: [{ action: 'PUBLISH', modelKey: model, _id: id }] });
    return { output: { _id: id, published: true }, text: `published ${model} ${id}` };
  },
};
