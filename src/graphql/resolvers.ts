import { Kind, type GraphQLResolveInfo, type SelectionSetNode } from 'graphql';
import type { ModelDef } from '../projects/types.ts';
import { hasScope, missingScope } from '../auth/scopes.ts';
import { BadUserInput } from '../errors.ts';
import { listRecords, readByIds, readOne, searchContent, listVersions, type ListRow } from '../content/read.ts';
import { encodeCursor } from '../content/sql-builder.ts';
import { toNode, type ContentRow, type ReadScope, type RecordNode } from '../content/types.ts';
import type { GqlContext } from './context.ts';
import { LIMITS } from './limits.ts';
import { checkCursor, checkOrderBy, checkWhere, searchOffset } from './argument-limits.ts';
import { hiddenFields, maskContent, readerPrincipals } from '../content/field-access.ts';
import { targetingFor } from './targeting.ts';
import type { Reader } from '../content/db.ts';
import { releaseExists } from '../releases/store.ts';
import { memberEmails } from '../control/tenancy.ts';

/** Shared resolver logic for per-model and generic fields: scopes, preview, locale, paging. */
const LOCALE_RE = /^[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*$/;

/**
 * The key's scopes, plus the stamped scopes of a customer token sent with it (spec "Rules for
 * customer roles" 2: a public key never grants write or execute; only the customer's role does,
 * so the role's scopes are checked without the key kind's limits).
 */
export function holds(ctx: Pick<GqlContext, 'principal' | 'customer'>, scope: string): boolean {
  return hasScope(ctx.principal, scope) || (ctx.customer !== null && hasScope(ctx.customer.scopes, scope));
}

export function requireScope(ctx: GqlContext, scope: string): void {
  if (!holds(ctx, scope)) throw missingScope(scope);
}

/** Per-model scopes: the bare scope or its `:<model>` variant satisfies the requirement. */
export function requireModelScope(ctx: GqlContext, base: string, model: ModelDef): void {
  if (!holds(ctx, modelScope(base, model))) throw missingScope(base);
}

/** `<base>:<model>`, made once per model definition and scope (a string built and hashed per read otherwise). */
const modelScopes = new WeakMap<ModelDef, Map<string, string>>();
function modelScope(base: string, model: ModelDef): string {
  let byBase = modelScopes.get(model);
  if (!byBase) modelScopes.set(model, (byBase = new Map()));
  let scope = byBase.get(base);
  if (scope === undefined) byBase.set(base, (scope = `${base}:${model.key}`));
  return scope;
}

/** Published content may come from a replica (ctx.published); drafts and release previews from the primary. */
export function readerFor(ctx: GqlContext, scope: ReadScope): Reader {
  return scope.stage === 'published' && scope.release === undefined ? ctx.published : ctx.svc.readSql;
}

export function readScope(ctx: GqlContext, args: { locale?: string | null; preview?: boolean | null }): ReadScope {
  let stage: ReadScope['stage'] = 'published';
  if (args.preview === true) {
    // Never fall back to published content: without drafts:read a preview read is an error.
    if (!hasScope(ctx.principal, 'drafts:read')) throw missingScope('drafts:read');
    ctx.noStore = true;
    stage = 'draft';
  }
  const locale = checkLocale(ctx, args.locale);
  return { projectId: ctx.snapshot.id, stage, locale, defaultLocale: ctx.snapshot.defaultLocale, rows: ctx.rows };
}

/** readScope plus the targeting context (which variant each record shows). */
export async function targetedScope(ctx: GqlContext, args: Record<string, any>): Promise<ReadScope> {
  return targetedScopeNow(ctx, args);
}

/**
 * targetedScope() without a promise when nothing has to be read for it (no release, a key-only
 * or remembered targeting context): the usual read awaits only its statement.
 */
function targetedScopeNow(ctx: GqlContext, args: Record<string, any>): ReadScope | Promise<ReadScope> {
  const scope = readScope(ctx, args);
  if (args.release !== undefined && args.release !== null)
    return releaseOf(ctx, args).then(async (release) => {
      scope.release = release;
      scope.targeting = await targetingFor(ctx, args.context);
      return scope;
    });
  const t = targetingFor(ctx, args.context);
  if (t instanceof Promise)
    return t.then((targeting) => {
      scope.targeting = targeting;
      return scope;
    });
  scope.targeting = t;
  return scope;
}

/**
 * `release: ID` (secret keys with drafts:read): the site as it will look once the release is
 * live. The release must be this project's (NOT_FOUND otherwise, never another project's view);
 * checked once per request and id. Never stored in any cache.
 */
async function releaseOf(ctx: GqlContext, args: Record<string, any>): Promise<string> {
  if (!hasScope(ctx.principal, 'drafts:read')) throw missingScope('drafts:read');
  if (args.preview === true)
    throw new BadUserInput('release and preview cannot be combined: a release read previews the release', {
      field: 'release',
    });
  ctx.noStore = true;
  const id = String(args.release);
  const known = (ctx.releases ??= new Map());
  let p = known.get(id);
  if (!p) known.set(id, (p = releaseExists(ctx.svc.sql, ctx.snapshot.id, id)));
  return p;
}

/** A customer reading a model with `self`-readable fields needs each record's owner (the records join). */
const ownerMatters = (ctx: GqlContext, model: ModelDef): boolean =>
  ctx.customer !== null && model.fields.some((f) => f.access?.read?.includes('self') === true);

/**
 * The locale of a read or a write: well-formed, and one of the project's configured locales
 * when it has a list (`settings.locales`); the default locale is always allowed. Writes check
 * it like reads, so nothing is stored that could not be read back.
 */
export function checkLocale(ctx: GqlContext, locale: string | null | undefined, field = 'locale'): string {
  if (locale === null || locale === undefined || locale === '') return ctx.snapshot.defaultLocale;
  if (locale.length > 35 || !LOCALE_RE.test(locale))
    throw new BadUserInput(`Invalid locale "${locale.slice(0, 40)}"`, { field });
  const configured = ctx.snapshot.settings?.locales;
  if (
    Array.isArray(configured) &&
    configured.length &&
    locale !== ctx.snapshot.defaultLocale &&
    !configured.includes(locale)
  ) {
    throw new BadUserInput(
      `Locale "${locale}" is not one of the project's locales (${[ctx.snapshot.defaultLocale, ...configured.filter((l) => l !== ctx.snapshot.defaultLocale)].join(', ')})`,
      { field },
    );
  }
  return locale;
}

export function pageSize(first: number | null | undefined): number {
  if (first === null || first === undefined) return LIMITS.defaultPageSize;
  if (!Number.isInteger(first) || first < 0 || first > LIMITS.maxPageSize) {
    throw new BadUserInput(`first must be between 0 and ${LIMITS.maxPageSize}`, { field: 'first' });
  }
  return first;
}

/**
 * What a connection field's selection asks for, per field node list: a compiled document hands
 * its resolver the same nodes on every execution, so each walk is made once (the two walks were
 * ~0.5 µs of an uncached read; bench/NOTES.md, issue 31).
 */
const selectionMemo = new WeakMap<readonly unknown[], { total: boolean; records: boolean }>();

function selectionOf(info: GraphQLResolveInfo): { total: boolean; records: boolean } {
  let m = selectionMemo.get(info.fieldNodes);
  if (!m) selectionMemo.set(info.fieldNodes, (m = { total: wantsTotal(info), records: needsRecordColumns(info) }));
  return m;
}

/** Whether the selection asks for totalCount (fragments count as "maybe": we then compute it). */
export function wantsTotal(info: GraphQLResolveInfo): boolean {
  const check = (set: SelectionSetNode | undefined): boolean =>
    !!set && set.selections.some((s) => (s.kind === Kind.FIELD ? s.name.value === 'totalCount' : true));
  return info.fieldNodes.some((n) => check(n.selectionSet));
}

/** System fields stored on `records`, not on `record_content`. */
const RECORD_COLUMNS = new Set(['naturalKey', '_createdAt', '_updatedAt', '_publishedAt', '_hasDraft']);

/**
 * Whether a connection's nodes select a `records` column. Conservative: fragments or anything
 * but plain fields on the way to `node` count as yes.
 */
export function needsRecordColumns(info: GraphQLResolveInfo): boolean {
  for (const conn of info.fieldNodes) {
    for (const s of conn.selectionSet?.selections ?? []) {
      if (s.kind !== Kind.FIELD) return true;
      if (s.name.value !== 'edges') continue;
      for (const e of s.selectionSet?.selections ?? []) {
        if (e.kind !== Kind.FIELD) return true;
        if (e.name.value !== 'node') continue;
        for (const n of e.selectionSet?.selections ?? [])
          if (n.kind !== Kind.FIELD || RECORD_COLUMNS.has(n.name.value)) return true;
      }
    }
  }
  return false;
}

export function node(ctx: GqlContext, row: ContentRow, scope: ReadScope): RecordNode | null {
  const model = ctx.models.get(row.model_key);
  return model ? toNode(row, model, scope) : null;
}

export interface Connection {
  edges: { cursor: string; node: RecordNode }[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
  totalCount: number;
}

/** An edge whose cursor is encoded only if the document selects it (most reads do not). */
class Edge {
  constructor(
    private readonly row: ListRow,
    private readonly sortKeyCount: number,
    readonly node: RecordNode,
  ) {}

  get cursor(): string {
    const values: unknown[] = [];
    for (let i = 0; i < this.sortKeyCount; i++) values.push(this.row[`_k${i}`] ?? null);
    values.push(this.row.id);
    return encodeCursor(values);
  }
}

export async function listConnection(
  ctx: GqlContext,
  model: ModelDef,
  args: Record<string, any>,
  info: GraphQLResolveInfo,
): Promise<Connection> {
  requireModelScope(ctx, 'records:read', model);
  const s = targetedScopeNow(ctx, args);
  const scope = s instanceof Promise ? await s : s;
  const first = pageSize(args.first);
  checkWhere(args.where);
  checkOrderBy(args.orderBy);
  const selection = selectionOf(info);
  const withRecord = selection.records || ownerMatters(ctx, model);
  const r = await listRecords(readerFor(ctx, scope), scope, model, {
    first,
    after: args.after ? checkCursor(args.after) : args.after,
    where: args.where,
    orderBy: args.orderBy,
    withTotal: selection.total,
    withRecord,
  });
  const edges = r.rows.map((row: ListRow) => new Edge(row, r.sortKeyCount, toNode(row, model, scope)));
  const pageInfo = {
    hasNextPage: r.hasNextPage,
    get endCursor(): string | null {
      return edges.at(-1)?.cursor ?? null;
    },
  };
  return { edges, pageInfo, totalCount: r.totalCount ?? edges.length };
}

export async function searchConnection(
  ctx: GqlContext,
  models: readonly ModelDef[],
  args: Record<string, any>,
): Promise<Connection> {
  requireScope(ctx, 'search:read');
  const query = String(args.query ?? '').trim();
  if (query.length === 0 || query.length > 500)
    throw new BadUserInput('query must be 1 to 500 characters', { field: 'query' });
  const scope = await targetedScope(ctx, args);
  const first = pageSize(args.first);
  const offset = searchOffset(args.after);
  const r = await searchContent(
    readerFor(ctx, scope),
    scope,
    models.map((m) => m.key),
    query,
    first,
    offset,
  );
  const edges = r.rows.flatMap((row, i) => {
    const n = node(ctx, row, scope);
    return n ? [{ cursor: encodeCursor(['s', offset + i + 1]), node: n }] : [];
  });
  return {
    edges,
    pageInfo: { hasNextPage: r.hasNextPage, endCursor: edges.at(-1)?.cursor ?? null },
    totalCount: r.totalCount,
  };
}

export async function singleRead(
  ctx: GqlContext,
  model: ModelDef,
  args: Record<string, any>,
  lookupKeys: readonly string[],
): Promise<RecordNode | null> {
  requireModelScope(ctx, 'records:read', model);
  const scope = await targetedScope(ctx, args);
  const lookup: Record<string, unknown> = {};
  for (const k of lookupKeys) if (args[k] !== undefined && args[k] !== null) lookup[k] = args[k];
  if (!args._id && !args.naturalKey && Object.keys(lookup).length === 0) {
    throw new BadUserInput(`${model.key} needs _id, naturalKey or a lookup argument`);
  }
  const row = await readOne(readerFor(ctx, scope), scope, model, { id: args._id, naturalKey: args.naturalKey, lookup });
  return row ? toNode(row, model, scope) : null;
}

export async function genericRecord(ctx: GqlContext, args: Record<string, any>): Promise<RecordNode | null> {
  requireScope(ctx, 'records:read');
  const scope = await targetedScope(ctx, args);
  const rows = await readByIds(readerFor(ctx, scope), scope, [String(args._id)], [...ctx.models.keys()]);
  const row = rows.get(String(args._id));
  return row ? node(ctx, row, scope) : null;
}

export async function versions(ctx: GqlContext, args: Record<string, any>) {
  requireScope(ctx, 'records:read');
  if (!hasScope(ctx.principal, 'drafts:read')) throw missingScope('drafts:read');
  ctx.noStore = true;
  const history = await listVersions(ctx.svc.readSql, ctx.snapshot.id, String(args._id), [...ctx.models.keys()]);
  if (!history) return null;
  // A model whose records this reader may not read (model access.read) has no history for them either.
  if (ctx.rows && (ctx.rows.closed.includes(history.modelKey) || ctx.rows.owned.includes(history.modelKey)))
    return null;
  // Fields the reader may not read (`access.read`) are left out of the history too.
  const model = ctx.models.get(history.modelKey);
  const hidden = model ? hiddenFields(model, readerPrincipals(ctx.principal)) : [];
  // The Studio's History names people, not ids, for a signed-in member; API keys get none:
  // member emails are staff data.
  const emails = ctx.principal.member
    ? await memberEmails(
        ctx.svc.sql,
        ctx.principal.tenantId,
        history.versions.map((v) => v.user_id),
      )
    : new Map<string, string>();
  return history.versions.map((v, i) => ({
    version: i + 1,
    action: v.action,
    locale: v.locale,
    variantId: v.variant_id ?? 'default',
    content:
      v.action === 'restored' && v.data
        ? Object.fromEntries(
            Object.entries(v.data).map(([l, d]) => [l, maskContent(d as Record<string, unknown>, hidden)]),
          )
        : maskContent(v.data, hidden),
    userId: v.user_id,
    userEmail: (v.user_id && emails.get(v.user_id)) ?? null,
    createdAt: v.created_at,
    restoredFrom: v.restored_from ?? null,
  }));
}

/** The working version of a record as it stands now (read after the fact, e.g. saveCollabDraft). */
export async function draftNode(
  ctx: GqlContext,
  id: string,
  locale: string | null | undefined,
): Promise<RecordNode | null> {
  const scope: ReadScope = {
    projectId: ctx.snapshot.id,
    stage: 'draft',
    locale: locale ?? ctx.snapshot.defaultLocale,
    defaultLocale: ctx.snapshot.defaultLocale,
  };
  const rows = await readByIds(ctx.svc.readSql, scope, [id], null);
  const row = rows.get(id);
  return row ? node(ctx, row, scope) : null;
}
