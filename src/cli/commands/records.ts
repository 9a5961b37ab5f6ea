import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command, CommandContext } from '../command.ts';
import { stringFlag } from '../command.ts';
import { CliError, ControlClient } from '../client.ts';
import { projectOf } from './config-folder.ts';
import { UsageError } from '../args.ts';

/**
 * `svc records save|publish` (CONTRACT §3) act either
 *  - as the calling member, with a control key (`ck_…`, from --token or SVC_TOKEN): over the
 *    control plane (`/v1/control/projects/{id}/records`) on --project, else the folder's pinned
 *    project; owners, admins and editors may write and publish, viewers may not; or
 *  - with a secret API key (`sk_…`/`sk_t_…`, from --token or SVC_API_KEY) over POST /graphql,
 *    which needs records:write / records:publish and drafts:read (docs/graphql.md, "CLI").
 * An explicit --token decides; otherwise SVC_API_KEY, then a control key in SVC_TOKEN.
 */
type Credential = { kind: 'member'; token: string } | { kind: 'key'; key: string; project: string | undefined };

function credential(ctx: CommandContext): Credential {
  const flag = stringFlag(ctx.flags, 'token');
  const isKey = (t: string) => /^sk(_t)?_/.test(t);
  const project = stringFlag(ctx.flags, 'project') ?? ctx.env.SVC_PROJECT_ID;
  if (flag && isKey(flag)) return { kind: 'key', key: flag, project };
  if (flag && flag.startsWith('ck_')) return { kind: 'member', token: flag };
  if (ctx.env.SVC_API_KEY) return { kind: 'key', key: ctx.env.SVC_API_KEY, project };
  const token = ctx.client.opts.token;
  if (token && isKey(token)) return { kind: 'key', key: token, project };
  if (token && token.startsWith('ck_')) return { kind: 'member', token };
  throw new CliError(
    'records commands need a control key (ck_…, a member who may write) or a secret API key: pass --token or set SVC_TOKEN or SVC_API_KEY',
  );
}

async function memberBase(ctx: CommandContext): Promise<string> {
  return `/v1/control/projects/${encodeURIComponent(await projectOf(ctx))}/records`;
}

async function gql(
  ctx: CommandContext,
  cred: Extract<Credential, { kind: 'key' }>,
  query: string,
  variables: Record<string, unknown>,
): Promise<any> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-api-key': cred.key };
  if (cred.project) headers['x-project-id'] = cred.project;
  let res: Response;
  try {
    res = await fetch(new URL('/graphql', ctx.client.opts.url), {
      method: 'POST',
      headers,
      body: JSON.stringify({ query, variables }),
    });
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

/** POST /graphql with the records API key (`svc records import`, which needs a secret key). */
export async function recordsGql(ctx: CommandContext, query: string, variables: Record<string, unknown>): Promise<any> {
  const cred = credential(ctx);
  if (cred.kind !== 'key')
    throw new CliError('this command needs a secret API key: pass --token sk_… or set SVC_API_KEY');
  return gql(ctx, cred, query, variables);
}

const BATCH = `mutation($ops: [BatchRecordOperationInput!]!) { batchRecordOperations(operations: $ops) { _id } }`;

export const recordsSave: Command = {
  path: ['records', 'save'],
  summary: 'create or update (by natural key) the working version of a record',
  usage: 'svc records save --model M --natural-key K --file F.json [--locale L] [--project P]',
  flags: { model: 'string', 'natural-key': 'string', file: 'string', locale: 'string', project: 'string' },
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
    const cred = credential(ctx);
    if (cred.kind === 'member') {
      const client = new ControlClient({ url: ctx.client.opts.url, token: cred.token });
      const out = await client.request<{ _id: string; created: boolean }>('POST', await memberBase(ctx), {
        model,
        naturalKey,
        locale,
        data,
      });
      return { output: { _id: out._id }, text: `${out.created ? 'created' : 'updated'} ${model} ${out._id}` };
    }
    const lookup = await findByNaturalKey(ctx, cred, model, naturalKey);
    const op = lookup
      ? { action: 'UPDATE', _id: lookup, locale, data }
      : { action: 'CREATE', modelKey: model, naturalKey, locale, data };
    const out = await gql(ctx, cred, BATCH, { ops: [op] });
    const id = out.batchRecordOperations[0]._id as string;
    return { output: { _id: id }, text: `${lookup ? 'updated' : 'created'} ${model} ${id}` };
  },
};

async function findByNaturalKey(
  ctx: CommandContext,
  cred: Extract<Credential, { kind: 'key' }>,
  model: string,
  naturalKey: string,
): Promise<string | null> {
  // The single read is per model (`<model>(naturalKey, preview)`), so its name is the model key.
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(model)) throw new CliError(`unknown model ${model}`);
  const data = await gql(ctx, cred, `query($k: String!) { r: ${model}(naturalKey: $k, preview: true) { _id } }`, {
    k: naturalKey,
  });
  return data.r?._id ?? null;
}

export const recordsPublish: Command = {
  path: ['records', 'publish'],
  summary: 'publish the working version of a record',
  usage: 'svc records publish --model M --id ID [--project P]',
  flags: { model: 'string', id: 'string', project: 'string' },
  async run(ctx) {
    const model = stringFlag(ctx.flags, 'model');
    const id = stringFlag(ctx.flags, 'id');
    if (!model || !id) throw new UsageError('--model and --id are required');
    const cred = credential(ctx);
    if (cred.kind === 'member') {
      const client = new ControlClient({ url: ctx.client.opts.url, token: cred.token });
      await client.request('POST', `${await memberBase(ctx)}/${encodeURIComponent(id)}/publish`, { model });
    } else await gql(ctx, cred, BATCH, { ops: [{ action: 'PUBLISH', modelKey: model, _id: id }] });
    return { output: { _id: id, published: true }, text: `published ${model} ${id}` };
  },
};
