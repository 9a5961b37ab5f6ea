import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { BadUserInput, PermissionDenied } from '../errors.ts';
import { NO_BROWSERS, NO_CONTROL_KEYS } from '../fleet/provision.ts';
import { controlCaller, objectBody } from './control-request.ts';
import { listGroups, publishGroup } from '../fleet/groups.ts';

/** The decoded path segment after `prefix` (ids may hold any character, percent-encoded). */
function pathId(url: string, prefix: string): string {
  const path = new URL(url).pathname;
  const raw = path.slice(path.indexOf(prefix) + prefix.length);
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new BadUserInput('The path holds a malformed percent-encoding');
  }
}

/**
 * Fleet provisioning (docs/provisioning.md): `POST /v1/provision` and `GET
 * /v1/provision/{provision_id}` with a secret tenant key, and the control-plane routes behind
 * `svc fleet-groups`.
 */
export function provisionRoutes(svc: Service) {
  /** The provisioning key: control keys and browsers are refused before the key is looked at. */
  const admit = async (request: Request) => {
    const h = request.headers;
    const apiKey = h.get('x-api-key');
    if ((apiKey === null && /^Bearer\s+/i.test(h.get('authorization') ?? '')) || apiKey?.trim().startsWith('ck_'))
      throw new PermissionDenied(NO_CONTROL_KEYS);
    if (h.get('origin') !== null || h.get('sec-fetch-site') !== null) throw new PermissionDenied(NO_BROWSERS);
    return svc.gate.admit({ headers: h, request });
  };
  const json = (body: unknown, status: number, headers: Record<string, string>) =>
    new Response(JSON.stringify(body), {
      status,
      headers: { ...headers, 'content-type': 'application/json', 'cache-control': 'no-store' },
    });
  return new Elysia({ name: 'svc.provision' })
    .post('/v1/provision', async ({ request, body }) => {
      const { key, headers } = await admit(request);
      const out = await svc.provisioning.provision(key, body);
      return json(out.view, out.status, headers);
    })
    .get('/v1/provision/:id', async ({ request }) => {
      const { key, headers } = await admit(request);
      return json(await svc.provisioning.status(key, pathId(request.url, '/v1/provision/')), 200, headers);
    })
    .get('/v1/control/fleet-groups', async ({ headers }) => listGroups(svc.sql, await controlCaller(svc, headers)))
    .post('/v1/control/fleet-groups/:group/publish', async ({ headers, request, body }) => {
      const b = objectBody(body);
      const group = pathId(request.url, '/v1/control/fleet-groups/').replace(/\/publish$/, '');
      return publishGroup(svc, await controlCaller(svc, headers), group, { name: b.name, config: b.config });
    });
}
