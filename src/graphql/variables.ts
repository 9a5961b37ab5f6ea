import {
  Kind,
  getNamedType,
  isInputObjectType,
  typeFromAST,
  visit,
  type DocumentNode,
  type GraphQLInputObjectType,
  type GraphQLSchema,
  type OperationDefinitionNode,
} from 'graphql';

/**
 * graphql-jit generates variable coercion code by inlining input types, which never ends for a
 * recursive input type (`<Model>Where` refers to itself through AND/OR/NOT). For documents
 * whose variables use such a type, the variables are coerced by graphql-js instead and handed
 * to the compiled query through variable definitions rewritten to the pass-through JSON scalar.
 * Validation has already run on the original document, so types were checked there.
 */
function recursive(t: GraphQLInputObjectType, path: Set<string>, memo: Map<string, boolean>): boolean {
  const known = memo.get(t.name);
  if (known !== undefined) return known;
  if (path.has(t.name)) return true;
  path.add(t.name);
  let found = false;
  for (const f of Object.values(t.getFields())) {
    const inner = getNamedType(f.type);
    if (isInputObjectType(inner) && recursive(inner, path, memo)) {
      found = true;
      break;
    }
  }
  path.delete(t.name);
  memo.set(t.name, found);
  return found;
}

export function jitDocument(
  schema: GraphQLSchema,
  doc: DocumentNode,
  op: OperationDefinitionNode,
): { document: DocumentNode; rewritten: boolean } {
  const memo = new Map<string, boolean>();
  const needs = (op.variableDefinitions ?? []).some((v) => {
    const t = typeFromAST(schema, v.type as never);
    const named = t ? getNamedType(t) : undefined;
    return !!named && isInputObjectType(named) && recursive(named, new Set(), memo);
  });
  if (!needs) return { document: doc, rewritten: false };
  const document = visit(doc, {
    VariableDefinition(node) {
      return {
        ...node,
        type: { kind: Kind.NAMED_TYPE, name: { kind: Kind.NAME, value: 'JSON' } },
        defaultValue: undefined,
      };
    },
  });
  return { document, rewritten: true };
}
