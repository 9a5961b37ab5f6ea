import {
  GraphQLBoolean,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLNullableType,
} from 'graphql';
import { listApps, listPlacements } from '../../apps/store.ts';
import { readDesignTokens } from '../../config/design-tokens.ts';
import { BadUserInput } from '../../errors.ts';
import type { GqlContext } from '../context.ts';
import { requireScope } from '../resolvers.ts';
import { DateTimeScalar, JSONScalar } from '../scalars.ts';

/**
 * Project presentation for front-ends and editor UIs: `designTokens` (any key: a published
 * read), `apps` and `placements(modelKey)` (schemas:read). All three change only with a push,
 * which empties the response cache (project.changed), so their answers are cacheable.
 */
const nn = <T extends GraphQLNullableType>(t: T) => new GraphQLNonNull(t);

const App = new GraphQLObjectType({
  name: 'App',
  fields: {
    name: { type: nn(GraphQLString) },
    source: { type: nn(GraphQLString), description: 'The https URL of the manifest.' },
    settings: {
      type: nn(JSONScalar),
      description: 'Installation settings as pushed; secret settings hold secret labels, never values.',
    },
    mappings: { type: nn(JSONScalar), description: 'sources, sinks and placementFields, as pushed.' },
    manifest: { type: JSONScalar, description: 'The validated manifest fetched at the last push.' },
    updatedAt: { type: nn(DateTimeScalar) },
  },
});

const Placement = new GraphQLObjectType({
  name: 'Placement',
  fields: {
    type: { type: nn(GraphQLString), description: 'For example main-editor.' },
    url: { type: nn(GraphQLString) },
    modelKeys: { type: nn(new GraphQLList(nn(GraphQLString))), description: 'Empty: every model.' },
    tabName: { type: GraphQLString },
    hideContentTab: { type: nn(GraphQLBoolean) },
    app: { type: GraphQLString, description: "The app whose manifest brings it; null for the config's placements." },
  },
});

export function projectUiQueries(): GraphQLFieldConfigMap<unknown, GqlContext> {
  return {
    designTokens: {
      type: JSONScalar,
      description:
        "The project's W3C Design Tokens document as pushed (references such as {font.size.display1} kept); null when none.",
      resolve: (_r, _a, ctx) => readDesignTokens(ctx.svc.sql, ctx.principal.projectId),
    },
    apps: {
      type: nn(new GraphQLList(nn(App))),
      description: 'Installed apps (schemas:read).',
      resolve: (_r, _a, ctx) => {
        requireScope(ctx, 'schemas:read');
        return listApps(ctx.svc.sql, ctx.principal.projectId);
      },
    },
    placements: {
      type: nn(new GraphQLList(nn(Placement))),
      description: 'Custom editor panels for a model, or all of them without modelKey (schemas:read).',
      args: { modelKey: { type: GraphQLString } },
      resolve: (_r, a: { modelKey?: string | null }, ctx) => {
        requireScope(ctx, 'schemas:read');
        const modelKey = a.modelKey ?? null;
        if (modelKey !== null && !ctx.snapshot.models.some((m) => m.key === modelKey))
          throw new BadUserInput(`"${modelKey.slice(0, 64)}" is not a model of this project`, { field: 'modelKey' });
        return listPlacements(ctx.svc.sql, ctx.principal.projectId, modelKey);
      },
    },
  };
}
