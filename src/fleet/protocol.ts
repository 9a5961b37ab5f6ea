import { createHash } from 'node:crypto';
import { BadUserInput } from '../errors.ts';

/**
 * The wire format of `POST /v1/provision` and `GET /v1/provision/{provision_id}` (spec
 * "POST /v1/provision"): parsing and validating the body, the idempotency digest of a request,
 * and the response object. No I/O.
 */
export const PROVISION_STEPS = ['created_project', 'group_joined', 'branding_set', 'allow_list_extended'] as const;
export type ProvisionStep = (typeof PROVISION_STEPS)[number];

export interface ProvisionRequest {
  provisionId: string;
  groupKey: string;
  name: string;
  /** Project settings the branding sets (see BRANDING_FIELDS); null when not given. */
  branding: Record<string, string> | null;
  /** Tenant keys whose allow-list gains the new project, de-duplicated and sorted. */
  allowListKeyIds: string[];
}

export interface ProvisionView {
  provision_id: string;
  project_id: string;
  status: string;
  schema_version: string | null;
  steps: Record<ProvisionStep, boolean>;
}

/**
 * `branding` maps onto these project settings (the ones the hosted login page and customer
 * mail show: docs/config.md "project.settings"), validated as `svc push` validates them.
 */
export const BRANDING_FIELDS: Record<string, (v: string) => string | null> = {
  displayName: (v) => (v.length <= 200 ? null : 'must be at most 200 characters'),
  logoUrl: (v) => (isHttpUrl(v) ? null : 'must be an absolute http(s) URL'),
  primaryColor: (v) =>
    /^#(?:[0-9a-f]{3}|[0-9a-f]{6}|[0-9a-f]{8})$/i.test(v) ? null : 'must be a hex colour like #0055ff',
  fromName: (v) => (v.length <= 200 ? null : 'must be at most 200 characters'),
  supportEmail: (v) => (EMAIL_RE.test(v) && v.length <= 320 ? null : 'must be an email address'),
  replyTo: (v) => (EMAIL_RE.test(v) && v.length <= 320 ? null : 'must be an email address'),
  appBaseUrl: (v) => (isHttpUrl(v) ? null : 'must be an absolute http(s) URL'),
};

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const MAX_ID = 200;
const MAX_KEYS = 100;
// No control characters: the id is echoed in responses and logs.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the check is that none is present
const PRINTABLE = /^[^\u0000-\u001f\u007f]+$/;

function isHttpUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return (u.protocol === 'http:' || u.protocol === 'https:') && v.length <= 2048;
  } catch {
    return false;
  }
}

function requiredString(body: Record<string, unknown>, field: string, max: number): string {
  const v = body[field];
  if (typeof v !== 'string' || v.trim() === '') throw new BadUserInput(`${field} is required (a non-empty string)`);
  if (v.length > max) throw new BadUserInput(`${field} must be at most ${max} characters`);
  if (!PRINTABLE.test(v)) throw new BadUserInput(`${field} must not contain control characters`);
  return v;
}

export function parseProvisionRequest(body: unknown): ProvisionRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BadUserInput('The request body must be a JSON object');
  const b = body as Record<string, unknown>;
  const provisionId = requiredString(b, 'provision_id', MAX_ID);
  const groupKey = requiredString(b, 'group_id', MAX_ID);
  const name = requiredString(b, 'name', 200).trim();
  let branding: Record<string, string> | null = null;
  if (b.branding !== undefined && b.branding !== null) {
    if (typeof b.branding !== 'object' || Array.isArray(b.branding))
      throw new BadUserInput('branding must be an object');
    branding = {};
    for (const [k, v] of Object.entries(b.branding as Record<string, unknown>)) {
      const check = BRANDING_FIELDS[k];
      if (!check)
        throw new BadUserInput(`branding.${k} is not a branding field; use ${Object.keys(BRANDING_FIELDS).join(', ')}`);
      if (v === null || v === undefined) continue;
      if (typeof v !== 'string') throw new BadUserInput(`branding.${k} must be a string`);
      if (!PRINTABLE.test(v)) throw new BadUserInput(`branding.${k} must not contain control characters`);
      const problem = check(v);
      if (problem) throw new BadUserInput(`branding.${k} ${problem}`);
      branding[k] = v;
    }
  }
  let allowListKeyIds: string[] = [];
  if (b.allow_list_key_ids !== undefined && b.allow_list_key_ids !== null) {
    const ids = b.allow_list_key_ids;
    if (!Array.isArray(ids) || ids.some((id) => typeof id !== 'string' || id === '' || id.length > MAX_ID)) {
      throw new BadUserInput('allow_list_key_ids must be an array of API key ids');
    }
    if (ids.length > MAX_KEYS) throw new BadUserInput(`allow_list_key_ids may list at most ${MAX_KEYS} keys`);
    allowListKeyIds = [...new Set(ids as string[])].sort();
  }
  return { provisionId, groupKey, name, branding, allowListKeyIds };
}

/** The digest that tells a re-send (same body) from a different request under the same id. */
export function requestDigest(r: ProvisionRequest): string {
  const branding = r.branding
    ? Object.fromEntries(Object.entries(r.branding).sort(([a], [b]) => (a < b ? -1 : 1)))
    : null;
  return createHash('sha256')
    .update(JSON.stringify([r.provisionId, r.groupKey, r.name, branding, r.allowListKeyIds]))
    .digest('hex');
}

export interface ProvisionRow {
  provision_id: string;
  project_id: string;
  status: string;
  schema_version: number | null;
  created_project: boolean;
  group_joined: boolean;
  branding_set: boolean;
  allow_list_extended: boolean;
}

export function provisionView(row: ProvisionRow): ProvisionView {
  return {
    provision_id: row.provision_id,
    project_id: row.project_id,
    status: row.status,
    schema_version: row.schema_version === null ? null : String(row.schema_version),
    steps: {
      created_project: row.created_project,
      group_joined: row.group_joined,
      branding_set: row.branding_set,
      allow_list_extended: row.allow_list_extended,
    },
  };
}
