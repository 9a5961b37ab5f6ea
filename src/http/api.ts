import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { errorBoundary } from './errors.ts';
import { controlRoutes } from './control.ts';
import { keyRoutes } from './keys.ts';
import { configRoutes } from './config.ts';
import { graphqlRoutes } from './graphql.ts';

/**
 * The API listener: one Elysia app; each capability contributes a plugin. Built apart from
 * `listen` so tests can mount it on an ephemeral port.
 */
export function buildApi(svc: Service) {
  return new Elysia({ name: 'svc.api' })
    .use(errorBoundary)
    .get('/health', () => ({ status: 'ok' }))
    .use(controlRoutes(svc))
    .use(keyRoutes(svc))
    .use(configRoutes(svc))
    .use(graphqlRoutes(svc));
}

export type Api = ReturnType<typeof buildApi>;
