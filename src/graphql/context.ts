import type { Service } from '../service.ts';
import type { KeyPrincipal } from '../auth/principal.ts';
import type { ProjectSnapshot } from '../actors/project.ts';
import type { ModelDef } from '../models/types.ts';
import type { RecordLoader } from './loader.ts';

/** What every resolver of one request sees. Built per request; cheap. */
export interface GqlContext {
  svc: Service;
  principal: KeyPrincipal;
  snapshot: ProjectSnapshot;
  /** Models this key may see, by key. */
  models: ReadonlyMap<string, ModelDef>;
  loader: RecordLoader;
  /** Set by resolvers that honoured `preview: true`: the response must not be stored anywhere. */
  noStore: boolean;
}

/** Names generated from model and field keys (CONTRACT §4). */
export function typeName(key: string): string {
  const clean = key.replace(/[^A-Za-z0-9_]/g, '_');
  return clean.charAt(0).toUpperCase() + clean.slice(1);
}

export function pluralField(key: string): string {
  return `${key}s`;
}

export const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;
