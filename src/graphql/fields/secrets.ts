import {
  GraphQLBoolean,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLNullableType,
} from 'graphql';
import type { KeyPrincipal } from '../../auth/principal.ts';
import { isPublicKey } from '../../auth/principal.ts';
import { requireScope } from '../../auth/scopes.ts';
import { BadUserInput } from '../../errors.ts';
import { vaultKeys, type VaultKeys } from '../../secrets/vault.ts';
import {
  checkLabel,
  checkValue,
  readSecret,
  removeSecret,
  secretAudit,
  writeSecret,
  type SecretActor,
} from '../../secrets/store.ts';
import type { GqlContext } from '../context.ts';
import { DateTimeScalar } from '../scalars.ts';

/**
 * The Secrets family (spec "GraphQL families"): `getSecret`, `putSecret`, `deleteSecret`, plus
 * `secretAudit`. In the schema of every secret key (a public key can never hold the scopes, so
 * the fields are absent there); a secret key without the scope gets `missing required scope:
 * secrets:….project`. Only the key's own scopes count, never a customer token's. Every answer
 * is `no-store` and never enters the response cache, so every read reaches the audit.
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

let vault: { dir: string; keys: VaultKeys } | undefined;
function keysOf(ctx: GqlContext): VaultKeys {
  const dir = (ctx.svc.settings as { dataDir?: string }).dataDir ?? '.svc';
  if (!vault || vault.dir !== dir) vault = { dir, keys: vaultKeys(dir) };
  return vault.keys;
}

function actorOf(ctx: GqlContext): SecretActor {
  return {
    projectId: ctx.principal.projectId,
    apiKeyId: ctx.principal.keyId,
    customerId: ctx.customer?.customerId ?? null,
  };
}

/** Scope first (a denied caller learns nothing about the label), then the never-cached mark. */
function enter(ctx: GqlContext, scope: string): void {
  ctx.noStore = true;
  requireScope(ctx.principal, scope);
}

const SecretWrite = new GraphQLObjectType({
  name: 'SecretWrite',
  fields: {
    label: { type: nn(GraphQLString) },
    created: { type: nn(GraphQLBoolean), description: 'False when an existing secret was replaced.' },
    updatedAt: { type: nn(DateTimeScalar) },
  },
});

const SecretAuditEntry = new GraphQLObjectType({
  name: 'SecretAuditEntry',
  fields: {
    label: { type: nn(GraphQLString) },
    action: { type: nn(GraphQLString), description: 'read, put or delete' },
    apiKeyId: { type: nn(GraphQLString), description: 'The id (never the value) of the API key that acted.' },
    customerId: { type: GraphQLString },
    found: { type: nn(GraphQLBoolean), description: 'Whether the secret existed when it was accessed.' },
    at: { type: nn(DateTimeScalar) },
  },
});

export function secretQueries(principal: KeyPrincipal): GraphQLFieldConfigMap<unknown, GqlContext> {
  if (isPublicKey(principal.kind)) return {};
  return {
    getSecret: {
      type: GraphQLString,
      description: 'The value of a project secret (secrets:read.project), or null when there is none. Audited.',
      args: { label: { type: nn(GraphQLString) } },
      resolve: (_r, a: { label: string }, ctx) => {
        enter(ctx, 'secrets:read.project');
        return readSecret(ctx.svc.sql, keysOf(ctx), actorOf(ctx), checkLabel(a.label));
      },
    },
    secretAudit: {
      type: nn(new GraphQLList(nn(SecretAuditEntry))),
      description: 'Who read or wrote which secret when, newest first (secrets:read.project). Never values.',
      args: { label: { type: GraphQLString }, first: { type: GraphQLInt } },
      resolve: (_r, a: { label?: string | null; first?: number | null }, ctx) => {
        enter(ctx, 'secrets:read.project');
        const first = a.first ?? 50;
        if (!Number.isInteger(first) || first < 1 || first > 500)
          throw new BadUserInput('first must be 1 to 500', { field: 'first' });
        return secretAudit(ctx.svc.sql, ctx.principal.projectId, a.label == null ? null : checkLabel(a.label), first);
      },
    },
  };
}

export function secretMutations(principal: KeyPrincipal): GraphQLFieldConfigMap<unknown, GqlContext> {
  if (isPublicKey(principal.kind)) return {};
  return {
    putSecret: {
      type: nn(SecretWrite),
      description: 'Creates or replaces a project secret (secrets:put.project), encrypted at rest. Audited.',
      args: { label: { type: nn(GraphQLString) }, value: { type: nn(GraphQLString) } },
      resolve: async (_r, a: { label: string; value: string }, ctx) => {
        enter(ctx, 'secrets:put.project');
        const label = checkLabel(a.label);
        const out = await writeSecret(ctx.svc.sql, keysOf(ctx), actorOf(ctx), label, checkValue(a.value));
        return { label, ...out };
      },
    },
    deleteSecret: {
      type: nn(GraphQLBoolean),
      description: 'Deletes a project secret (secrets:delete.project); false when there was none. Audited.',
      args: { label: { type: nn(GraphQLString) } },
      resolve: (_r, a: { label: string }, ctx) => {
        enter(ctx, 'secrets:delete.project');
        return removeSecret(ctx.svc.sql, actorOf(ctx), checkLabel(a.label));
      },
    },
  };
}
