/**
 * OpenAPI links, derived from the paths themselves: what a create answers (an `id`, or a
 * nested record's `id`) feeds the path parameter of every operation below it. Generated
 * clients and stateful fuzzers (schemathesis) follow them: create, then read, change and
 * delete that record. `POST /customers` → `/customers/{id}`; `POST /chat/sessions` (a body
 * with `session.id`) → `/chat/sessions/{session_id}/…`.
 */
type Json = Record<string, unknown>;

const METHODS = ['get', 'put', 'patch', 'post', 'delete'] as const;

function resolve(schema: unknown, components: Json): Json | null {
  if (!schema || typeof schema !== 'object') return null;
  const ref = (schema as Json).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/components/schemas/')) {
    return resolve(components[ref.slice('#/components/schemas/'.length)], components);
  }
  return schema as Json;
}

function hasId(schema: Json | null): boolean {
  const props = schema?.properties as Json | undefined;
  const id = resolve(props?.id, {});
  return !!id && id.type === 'integer';
}

/**
 * The JSON pointer into a create's answer that holds the id for a path parameter: `/id`
 * when the answer is the record, `/{name}/id` when the parameter is `{name}_id` and the
 * answer holds that record under `name`.
 */
function idPointer(schema: Json | null, param: string, components: Json): string | null {
  if (!schema || schema.type === 'array') return null;
  if (hasId(schema) && (param === 'id' || !/_id$/.test(param))) return '/id';
  const name = param.replace(/_id$/, '');
  const nested = resolve((schema.properties as Json | undefined)?.[name], components);
  if (hasId(nested)) return `/${name}/id`;
  return hasId(schema) ? '/id' : null;
}

/** Adds `links` to the success responses of every create that has operations below it. */
export function addLinks(paths: Record<string, Json>, components: Json): void {
  for (const [path, item] of Object.entries(paths)) {
    if (path.endsWith('}')) continue;
    const create = item.post as Json | undefined;
    if (!create) continue;
    const below = Object.entries(paths).filter(([p]) => p.startsWith(`${path}/{`));
    if (below.length === 0) continue;
    const responses = create.responses as Record<string, Json>;
    for (const [status, response] of Object.entries(responses)) {
      if (!/^2\d\d$/.test(status)) continue;
      const json = (response.content as Record<string, Json> | undefined)?.['application/json'];
      const schema = resolve(json?.schema, components);
      const links: Json = {};
      for (const [target, targetItem] of below) {
        const param = /^\/\{([A-Za-z_]+)\}/.exec(target.slice(path.length))![1];
        const pointer = idPointer(schema, param, components);
        if (!pointer) continue;
        // Deeper paths have other parameters too; links fill only the one a create answers.
        const others = [...target.matchAll(/\{([A-Za-z_]+)\}/g)].map((m) => m[1]).filter((p) => p !== param && !path.includes(`{${p}}`));
        if (others.length > 0) continue;
        const inherited = [...path.matchAll(/\{([A-Za-z_]+)\}/g)].map((m) => m[1]);
        for (const method of METHODS) {
          const op = targetItem[method] as Json | undefined;
          if (!op?.operationId) continue;
          links[`${String(op.operationId)}`] = {
            operationId: op.operationId,
            parameters: {
              [param]: `$response.body#${pointer}`,
              ...Object.fromEntries(inherited.map((p) => [p, `$request.path.${p}`])),
            },
          };
        }
      }
      if (Object.keys(links).length > 0) response.links = links;
    }
  }
}
