import { describe, expect, test } from 'bun:test';
import { hasScope, missingScope, parseScopes, requireScope, scopeError } from '../../src/auth/scopes.ts';
import { ScopeDenied, SvcError } from '../../src/errors.ts';
import { maskError } from '../../src/graphql/errors.ts';
import { PermissionDenied } from '../../src/errors.ts';
import type { KeyKind } from '../../src/auth/principal.ts';
import { fingerprintOf } from '../../src/auth/resolve.ts';

/** The scope rules are pure: no storage is involved, so these run without a server. */
const key = (kind: KeyKind, ...scopes: string[]) => ({ kind, scopes: new Set(scopes) });

describe('Scopes table: each scope is known and grants what its row says', () => {
  const rows: [string, string][] = [
    ['records:read', 'Read records; also gates the generic record and records fields'],
    ['records:write', 'Create and update records'],
    ['records:delete', 'Delete records'],
    ['records:publish', 'Publish and unpublish record versions'],
    ['drafts:read', 'Read unpublished content via preview: true'],
    ['files:read', 'Fetch a file by id'],
    ['files:list', 'List files'],
    ['files:list.all', 'List every file across all customers'],
    ['files:write', 'Request and confirm uploads'],
    ['files:delete', 'Soft-delete, restore, permanently delete files'],
    ['search:read', 'Semantic search'],
    ['search:semantic:read', 'Read embeddings and similarity search'],
    ['search:semantic:write', 'Write and delete embeddings'],
    ['schemas:read', 'Read project schemas and models'],
    ['operations:execute', 'Execute all operations'],
    ['operations:read', 'Read operation execution status'],
    ['notifications:read', 'Read customer notifications and preferences'],
    ['notifications:write', 'Send notifications and manage preferences'],
    ['schedules:read', 'Read schedules'],
    ['schedules:write', 'Trigger schedules'],
    ['secrets:read.project', 'Read project secrets via getSecret'],
    ['secrets:put.project', 'Write project secrets via putSecret'],
    ['secrets:delete.project', 'Delete project secrets via deleteSecret'],
  ];
  for (const [scope, grants] of rows) {
    test(`${scope}: ${grants}`, () => {
      expect(scopeError(scope)).toBeNull();
      expect(parseScopes('sk', [scope])).toEqual([scope]);
      expect(hasScope(key('sk', scope), scope)).toBe(true);
      expect(hasScope(key('sk', 'schemas:read'), scope)).toBe(scope === 'schemas:read');
    });
  }

  test('records:read:<model> and the other per-model variants are valid and bounded to their model', () => {
    for (const verb of ['read', 'write', 'delete', 'publish']) {
      expect(parseScopes('sk', [`records:${verb}:blogPost`])).toEqual([`records:${verb}:blogPost`]);
      expect(hasScope([`records:${verb}:blogPost`], `records:${verb}:blogPost`)).toBe(true);
      expect(hasScope([`records:${verb}:blogPost`], `records:${verb}:author`)).toBe(false);
      expect(hasScope([`records:${verb}:blogPost`], `records:${verb}`)).toBe(false);
      expect(hasScope([`records:${verb}`], `records:${verb}:author`)).toBe(true);
    }
  });

  test('provision: provision a project, secret tenant sk_t_ keys only', () => {
    expect(parseScopes('sk_t', ['provision'])).toEqual(['provision']);
    expect(hasScope(key('sk_t', 'provision'), 'provision')).toBe(true);
    for (const kind of ['sk', 'pk', 'pk_t'] as KeyKind[]) {
      expect(() => parseScopes(kind, ['provision'])).toThrow(/provision/);
      expect(hasScope(key(kind, '*'), 'provision')).toBe(false);
    }
  });

  test('*: full access', () => {
    expect(parseScopes('sk', ['*'])).toEqual(['*']);
    for (const s of [
      'records:write',
      'drafts:read',
      'secrets:put.project',
      'operations:execute:sendMail',
      'records:read:blogPost',
    ]) {
      expect(hasScope(key('sk', '*'), s)).toBe(true);
    }
  });

  test('prefix wildcards cover their family and nothing else', () => {
    expect(hasScope(['records:*'], 'records:publish:blogPost')).toBe(true);
    expect(hasScope(['records:*'], 'drafts:read')).toBe(false);
    expect(hasScope(['search:semantic:*'], 'search:semantic:write')).toBe(true);
    expect(hasScope(['search:semantic:*'], 'search:read')).toBe(false);
    expect(hasScope(['files:list'], 'files:list.all')).toBe(false);
  });

  test('unknown scopes and scopes with spaces are refused with a message naming them', () => {
    expect(() => parseScopes('sk', ['records:reed'])).toThrow('unknown scope "records:reed"');
    expect(() => parseScopes('sk', ['records:read records:write'])).toThrow('contains whitespace');
    expect(() => parseScopes('sk', [' records:read'])).toThrow('contains whitespace');
    expect(() => parseScopes('sk', ['nope:*'])).toThrow('unknown scope "nope:*"');
    expect(() => parseScopes('sk', ['records:read:bad model'])).toThrow();
    expect(() => parseScopes('sk', ['records:read:'])).toThrow('valid model key');
    expect(() => parseScopes('sk', [])).toThrow('non-empty');
    expect(() => parseScopes('sk', [42])).toThrow('non-empty string');
    expect(() => parseScopes('sk', ['x'.repeat(10_000)])).toThrow('longer than');
  });
});

describe('Per-operation scopes', () => {
  test('rule 1: one operations:execute:<operation-key> entry per permitted operation', () => {
    expect(parseScopes('sk', ['operations:execute:sendMail', 'operations:execute:resize-image'])).toHaveLength(2);
    expect(hasScope(key('sk', 'operations:execute:sendMail'), 'operations:execute:sendMail')).toBe(true);
  });

  test('rule 3: an unlisted operation is rejected with missing required scope: operations:execute:<key>', () => {
    const k = key('sk', 'operations:execute:sendMail');
    expect(hasScope(k, 'operations:execute:other')).toBe(false);
    let err: unknown;
    try {
      requireScope(k, 'operations:execute:other');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ScopeDenied);
    expect((err as Error).message).toBe('missing required scope: operations:execute:other');
    // On GraphQL it leaves with the message only (graphql/errors.ts drops the code).
    expect(maskError(err as Error, true).extensions).toBeUndefined();
  });

  test('rule 4: unscoped operations:execute satisfies every per-operation requirement', () => {
    expect(hasScope(key('sk', 'operations:execute'), 'operations:execute:anything')).toBe(true);
    expect(hasScope(key('pk', 'operations:execute'), 'operations:execute:anything')).toBe(true);
  });

  test('rule 5: cancelOperationExecution needs the unscoped scope', () => {
    expect(hasScope(key('sk', 'operations:execute:sendMail'), 'operations:execute')).toBe(false);
    expect(hasScope(key('sk', 'operations:execute'), 'operations:execute')).toBe(true);
  });
});

describe('Errors table: key lacks a required scope', () => {
  test('message is exactly missing required scope: <scope>, with no extensions.code', () => {
    const e = missingScope('records:read');
    expect(e.message).toBe('missing required scope: records:read');
    // One hierarchy: an SvcError (REST answers 403), but GraphQL sends no extensions.code.
    expect(e).toBeInstanceOf(SvcError);
    expect(maskError(e, true)).toEqual({ message: 'missing required scope: records:read' });
    expect(() => requireScope(key('sk', 'files:read'), 'records:read')).toThrow('missing required scope: records:read');
  });

  test('a public key reaching a write gets PERMISSION_DENIED Insufficient permissions', () => {
    expect(() => requireScope(key('pk', 'records:read'), 'records:write')).toThrow(PermissionDenied);
    expect(() => requireScope(key('pk', 'records:read'), 'records:write')).toThrow('Insufficient permissions');
  });
});

describe('Public-key grants (API keys rule 5)', () => {
  const refused = [
    'drafts:read',
    'records:write',
    'records:delete',
    'records:publish',
    'records:write:blogPost',
    'files:list.all',
    'files:write',
    'files:delete',
    'search:semantic:write',
    'notifications:write',
    'schedules:write',
    'secrets:read.project',
    'secrets:put.project',
    'secrets:delete.project',
    'provision',
  ];
  for (const kind of ['pk', 'pk_t'] as KeyKind[]) {
    test(`${kind}_ cannot be granted drafts:read, write, delete, publish, files:list.all, secrets:* or provision`, () => {
      for (const s of refused)
        expect(() => parseScopes(kind, [s])).toThrow(`scope "${s}" cannot be granted to a public key`);
    });
    test(`${kind}_ cannot be granted a prefix that covers a secret-only scope (*, secrets:*, bare auth:login_with_svc)`, () => {
      for (const s of [
        '*',
        'secrets:*',
        'records:*',
        'files:*',
        'search:*',
        'auth:login_with_svc',
        'auth:login_with_svc:*',
        'auth:login_with_svc:admin',
      ]) {
        expect(() => parseScopes(kind, [s])).toThrow(`scope "${s}" cannot be granted to a public key`);
      }
    });
    test(`${kind}_ may hold the safe read-only subset`, () => {
      const ok = [
        'records:read',
        'records:read:blogPost',
        'records:read:*',
        'files:read',
        'files:list',
        'search:read',
        'search:semantic:read',
        'schemas:read',
        'operations:execute:subscribe',
        'operations:read',
        'notifications:read',
        'schedules:read',
        'auth:login_with_svc:customer',
      ];
      expect(parseScopes(kind, ok)).toEqual(ok);
    });
  }
  test('secret keys may hold every scope except provision outside sk_t_', () => {
    expect(parseScopes('sk', ['*', 'drafts:read', 'secrets:*', 'auth:login_with_svc'])).toHaveLength(4);
  });
});

describe('Model-restricted keys', () => {
  const fp = (kind: KeyKind, scopes: string[], models: string[] | null) =>
    fingerprintOf({ kind, scopes: new Set(scopes), allowedModels: models });

  test('rule 3: responses are cached separately per restriction (one fingerprint per restriction)', () => {
    const base = fp('pk', ['records:read'], ['blogPost']);
    expect(fp('pk_t', ['records:read'], ['blogPost'])).toBe(base);
    expect(fp('pk', ['records:read'], ['blogPost', 'author'])).not.toBe(base);
    expect(fp('pk', ['records:read'], null)).not.toBe(base);
    expect(fp('sk', ['records:read'], ['blogPost'])).not.toBe(base);
    expect(fp('pk', ['records:read', 'search:read'], ['blogPost'])).not.toBe(base);
    expect(fp('pk', ['search:read', 'records:read'], ['author', 'blogPost'])).toBe(
      fp('pk', ['records:read', 'search:read'], ['blogPost', 'author']),
    );
  });

  test('rule 4: semantic-search scopes are not model-bounded', () => {
    expect(scopeError('search:semantic:read:blogPost')).toBe('unknown scope "search:semantic:read:blogPost"');
    expect(hasScope(key('pk', 'search:semantic:read'), 'search:semantic:read')).toBe(true);
  });
});
