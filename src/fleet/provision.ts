import type { BusEvent, EventBus } from '../bus/bus.ts';
import type { Sql } from '../store/db.ts';
import type { KeyPrincipal } from '../auth/principal.ts';
import { requireScope } from '../auth/scopes.ts';
import { newId } from '../ids.ts';
import { BadUserInput, Conflict, NotFound, PermissionDenied } from '../errors.ts';
import { groupOfTenant } from './groups.ts';
import {
  parseProvisionRequest,
  provisionView,
  requestDigest,
  PROVISION_STEPS,
  type ProvisionRequest,
  type ProvisionRow,
  type ProvisionStep,
  type ProvisionView,
} from './protocol.ts';

/**
 * `POST /v1/provision` (spec "POST /v1/provision", "Provisioning" states): a new project in the
 * caller's tenant, joined to a fleet group, branded, and served by the listed tenant keys.
 *
 * Idempotent and resumable: the `provisions` row (per tenant and provision_id) is claimed
 * first, with the new project's id chosen then; each step runs in its own transaction that
 * locks the row, skips the step if its flag is already set, and sets the flag with the step's
 * effect — so a step is done exactly once, whoever (which request, which process) runs it, and
 * a failure leaves every completed step recorded. Duplicates arriving in one process while a
 * run is in flight wait for that run instead of starting their own.
 */
export const NEEDS_SK_T = 'Provisioning needs a secret tenant key (sk_t_) holding the provision scope';
export const NO_CONTROL_KEYS =
  'Provisioning takes a secret tenant API key (sk_t_) in x-api-key; control keys and the root token cannot provision';
export const NO_BROWSERS = 'Provisioning is server-side only: requests from a browser are refused';

export interface ProvisionDeps {
  sql: Sql;
  bus: EventBus;
}

export interface ProvisionOutcome {
  /** 201 when this request created the provision, 200 for a re-send (resumed or completed). */
  status: 200 | 201;
  view: ProvisionView;
}

type FullRow = ProvisionRow & {
  tenant_id: string;
  request_hash: string;
  group_id: string;
  name: string;
  branding: Record<string, string> | null;
  allow_list_key_ids: string[];
};

/** Only `sk_t_` keys holding `provision` may provision (spec "Errors": every other credential is refused). */
export function requireProvisioner(principal: KeyPrincipal): void {
  if (principal.kind !== 'sk_t') throw new PermissionDenied(NEEDS_SK_T);
  requireScope(principal, 'provision');
}

export class Provisioner {
  readonly #deps: ProvisionDeps;
  readonly #inflight = new Map<string, { digest: string; run: Promise<ProvisionRow> }>();
  /**
   * Test-only fault switch (set only from code, never from a request or the environment): the
   * run fails right after the named step committed, once, as a crash there would.
   */
  readonly faults: { failAfter: ProvisionStep | null } = { failAfter: null };

  constructor(deps: ProvisionDeps) {
    this.#deps = deps;
  }

  async provision(principal: KeyPrincipal, body: unknown): Promise<ProvisionOutcome> {
    requireProvisioner(principal);
    const req = parseProvisionRequest(body);
    const digest = requestDigest(req);
    const slot = `${principal.tenantId}\u0000${req.provisionId}`;
    const running = this.#inflight.get(slot);
    if (running) {
      if (running.digest !== digest) throw conflict(req.provisionId);
      return { status: 200, view: provisionView(await running.run) };
    }
    let created = false;
    const run = (async () => {
      const claim = await this.#claim(principal, req, digest);
      created = claim.created;
      if (claim.row.status === 'completed') return claim.row;
      return this.#steps(claim.row);
    })();
    this.#inflight.set(slot, { digest, run });
    try {
      const row = await run;
      return { status: created ? 201 : 200, view: provisionView(row) };
    } finally {
      if (this.#inflight.get(slot)?.run === run) this.#inflight.delete(slot);
    }
  }

  /** GET /v1/provision/{id}: the caller's tenant's provision, in flight or completed. */
  async status(principal: KeyPrincipal, provisionId: string): Promise<ProvisionView> {
    requireProvisioner(principal);
    const [row] = await this.#deps.sql<ProvisionRow[]>`
      select provision_id, project_id, status, schema_version, created_project, group_joined, branding_set, allow_list_extended
      from provisions where tenant_id = ${principal.tenantId} and provision_id = ${provisionId}`;
    if (!row) throw new NotFound('Provision not found');
    return provisionView(row);
  }

  /** The existing row for this id (same body), or a new one after checking the group and keys. */
  async #claim(
    principal: KeyPrincipal,
    req: ProvisionRequest,
    digest: string,
  ): Promise<{ row: FullRow; created: boolean }> {
    const { sql } = this.#deps;
    const existing = await this.#row(sql, principal.tenantId, req.provisionId);
    if (existing) {
      if (existing.request_hash !== digest) throw conflict(req.provisionId);
      return { row: existing, created: false };
    }
    // Nothing is created before the request is known to be valid: group and keys first.
    const group = await groupOfTenant(sql, principal.tenantId, req.groupKey);
    if (!group) throw new NotFound(`Fleet group not found: ${req.groupKey}`);
    await checkAllowListKeys(sql, principal.tenantId, req.allowListKeyIds);
    const inserted = await sql<FullRow[]>`
      insert into provisions (tenant_id, provision_id, request_hash, key_id, project_id, group_id, name, branding, allow_list_key_ids)
      values (${principal.tenantId}, ${req.provisionId}, ${digest}, ${principal.keyId}, ${newId('prj')}, ${group.id}, ${req.name},
              ${req.branding ? sql.json(req.branding as never) : null}, ${req.allowListKeyIds})
      on conflict (tenant_id, provision_id) do nothing
      returning *`;
    if (inserted[0]) return { row: inserted[0], created: true };
    // Another process claimed it between our read and insert.
    const raced = (await this.#row(sql, principal.tenantId, req.provisionId))!;
    if (raced.request_hash !== digest) throw conflict(req.provisionId);
    return { row: raced, created: false };
  }

  async #row(sql: Sql, tenantId: string, provisionId: string): Promise<FullRow | undefined> {
    const [row] = await sql<
      FullRow[]
    >`select * from provisions where tenant_id = ${tenantId} and provision_id = ${provisionId}`;
    return row;
  }

  /** Runs the steps not yet recorded, in order; each commits with its flag. */
  async #steps(start: FullRow): Promise<FullRow> {
    let row = start;
    try {
      for (const step of PROVISION_STEPS) {
        if (row[step]) continue;
        row = await this.#step(row, step);
        if (this.faults.failAfter === step) {
          this.faults.failAfter = null;
          throw new Error(`injected fault after step ${step}`);
        }
      }
      return row;
    } catch (err) {
      // Recorded for GET; the steps that committed stay done, and a re-send resumes after them.
      const message = err instanceof Error ? err.message.slice(0, 500) : 'failed';
      await this.#deps.sql`update provisions set status = 'failed', last_error = ${message}, updated_at = now()
                           where tenant_id = ${row.tenant_id} and provision_id = ${row.provision_id} and status <> 'completed'`.catch(
        () => {},
      );
      throw err;
    }
  }

  /**
   * One step as ONE statement (its own transaction): a CTE claims the step by setting its flag
   * where it is still unset — the row lock makes a concurrent run of the same step wait, then
   * find the flag set and do nothing — and the step's effect runs only for a claimed row. A
   * statement is atomic, so the flag and the effect commit together. Cache events go out after
   * the commit (as every key update does, auth/api-keys.ts).
   */
  async #step(row: FullRow, step: ProvisionStep): Promise<FullRow> {
    const { sql, bus } = this.#deps;
    const last = step === PROVISION_STEPS[PROVISION_STEPS.length - 1];
    const status = last ? 'completed' : 'in_progress';
    const t = row.tenant_id;
    const id = row.provision_id;
    let claimed: (FullRow & { key_ids?: string[] | null; key_hashes?: string[] | null })[];
    if (step === 'created_project') {
      claimed = await sql`
        with claim as (
          update provisions set created_project = true, status = ${status}, last_error = null, updated_at = now()
          where tenant_id = ${t} and provision_id = ${id} and not created_project returning *
        ), made as (
          insert into projects (id, tenant_id, name) select project_id, tenant_id, name from claim returning id
        )
        select claim.* from claim where (select count(*) from made) = 1`;
    } else if (step === 'group_joined') {
      // FOR SHARE orders the join against a publish (which locks the group FOR UPDATE and moves
      // the members it sees): the project is pinned to the version current when it joins.
      claimed = await sql`
        with g as (
          select id, schema_version from fleet_groups where id = ${row.group_id} and schema_version > 0 for share
        ), claim as (
          update provisions set group_joined = true, schema_version = (select schema_version from g), status = ${status}, last_error = null, updated_at = now()
          where tenant_id = ${t} and provision_id = ${id} and not group_joined and exists (select 1 from g) returning *
        ), joined as (
          update projects set fleet_group_id = (select id from g), fleet_schema_version = (select schema_version from g), schema_version = schema_version + 1
          where id = (select project_id from claim) returning id
        )
        select claim.* from claim where (select count(*) from joined) = 1`;
    } else if (step === 'branding_set') {
      const branding = row.branding && Object.keys(row.branding).length > 0 ? row.branding : {};
      claimed = await sql`
        with claim as (
          update provisions set branding_set = true, status = ${status}, last_error = null, updated_at = now()
          where tenant_id = ${t} and provision_id = ${id} and not branding_set returning *
        ), branded as (
          update projects set settings = settings || ${sql.json(branding as never)} where id = (select project_id from claim) returning id
        )
        select claim.* from claim where (select count(*) from branded) = 1`;
    } else {
      // Key rows are locked in id order (no deadlock between concurrent provisions listing the
      // same keys) and gain the project only where it is missing: a resumed step adds nothing twice.
      claimed = await sql`
        with claim as (
          update provisions set allow_list_extended = true, status = ${status}, last_error = null, updated_at = now()
          where tenant_id = ${t} and provision_id = ${id} and not allow_list_extended returning *
        ), locked as (
          select k.id from api_keys k, claim c
          where k.id = any(c.allow_list_key_ids) and k.tenant_id = c.tenant_id and k.kind in ('pk_t', 'sk_t') and k.deleted_at is null
          order by k.id for update of k
        ), extended as (
          update api_keys k set project_ids = array_append(k.project_ids, c.project_id), updated_at = now()
          from claim c where k.id in (select id from locked) and not (c.project_id = any(k.project_ids))
          returning k.id, k.key_hash
        )
        select claim.*, (select array_agg(id) from extended) as key_ids, (select array_agg(key_hash) from extended) as key_hashes from claim`;
    }
    const done = claimed[0];
    if (!done) {
      // Not claimed: done meanwhile by a concurrent run (this or another process), or impossible.
      const now = await this.#row(sql, t, id);
      if (!now) throw new NotFound('Provision not found');
      if (now[step]) return now;
      if (step === 'group_joined') throw new NotFound('Fleet group not found');
      throw new Error(`provision step ${step} did not apply`);
    }
    const events: BusEvent[] = [];
    if (step === 'group_joined' || (step === 'branding_set' && row.branding && Object.keys(row.branding).length > 0))
      events.push({ type: 'project.changed', projectId: done.project_id });
    for (const [i, keyId] of (done.key_ids ?? []).entries())
      events.push({ type: 'key.changed', keyId, keyHash: done.key_hashes?.[i] ?? null });
    for (const e of events) await bus.publish(e);
    delete done.key_ids;
    delete done.key_hashes;
    return done;
  }
}

function conflict(provisionId: string): Conflict {
  return new Conflict(`provision_id "${provisionId}" was already used with a different request body`);
}

/** Every listed key must be a live tenant key of the caller's tenant; another tenant's key looks absent. */
async function checkAllowListKeys(sql: Sql, tenantId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  const rows = await sql<{ id: string; kind: string }[]>`
    select id, kind from api_keys where id = any(${ids}::text[]) and tenant_id = ${tenantId} and deleted_at is null`;
  const found = new Map(rows.map((r) => [r.id, r.kind]));
  for (const id of ids) {
    const kind = found.get(id);
    if (!kind) throw new NotFound(`API key not found: ${id}`);
    if (kind !== 'pk_t' && kind !== 'sk_t')
      throw new BadUserInput(
        `API key ${id} is project-bound: only tenant keys (pk_t_, sk_t_) have a project allow-list`,
      );
  }
}
