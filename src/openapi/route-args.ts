import { RouteRegistry, type RouteInfo } from '../http/route-registry';
import { openApiPath } from './document';

/**
 * The WordPress route index's `endpoints` (GET /wp-json/, GET /wp-json/{namespace}): each
 * route's methods with their `args`, as WordPress describes them
 * (`{name: {required, type, description, enum, default, …}}`), read from the OpenAPI
 * document, so they are the very schemas that validate the requests.
 */
type Json = Record<string, unknown>;

export interface IndexEndpoint {
  methods: string[];
  args: Record<string, Json>;
}

const REF = '#/components/schemas/';

/** rest_get_allowed_schema_keywords(): what WordPress shows of an argument's schema. */
const ALLOWED = new Set([
  'title', 'description', 'default', 'type', 'format', 'enum', 'items', 'properties', 'additionalProperties', 'patternProperties', 'minProperties',
  'maxProperties', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'minLength', 'maxLength', 'pattern', 'minItems', 'maxItems',
  'uniqueItems', 'anyOf', 'oneOf',
]);

/** $refs replaced by what they name (JsonValue, which is recursive, by its types), a few levels deep. */
function inline(node: unknown, schemas: Record<string, Json>, depth = 0): unknown {
  if (Array.isArray(node)) return node.map((n) => inline(n, schemas, depth));
  if (!node || typeof node !== 'object') return node;
  const s = node as Json;
  if (typeof s.$ref === 'string' && s.$ref.startsWith(REF)) {
    const name = s.$ref.slice(REF.length);
    const target = schemas[name] ?? {};
    if (name === 'JsonValue' || depth > 8) return { description: target.description, type: target.type };
    return inline(target, schemas, depth + 1);
  }
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, k === 'enum' || k === 'const' || k === 'default' || k === 'examples' ? v : inline(v, schemas, depth)]));
}

/** One argument: the allowed keywords of its schema, `required` as WordPress says it (a boolean). */
function arg(schema: unknown, required: boolean, description: unknown, schemas: Record<string, Json>): Json {
  const s = inline(schema, schemas) as Json;
  const out: Json = {};
  if (description !== undefined) out.description = description;
  for (const [k, v] of Object.entries(s)) if (ALLOWED.has(k) && !(k === 'description' && out.description !== undefined)) out[k] = v;
  // An object argument's own required fields, as WordPress' draft-3 `required: true` on each.
  if (Array.isArray(s.required) && out.properties && typeof out.properties === 'object') {
    const props = { ...(out.properties as Json) };
    for (const name of s.required as string[]) if (props[name]) props[name] = { ...(props[name] as Json), required: true };
    out.properties = props;
  }
  out.required = required;
  return out;
}

/** The body's fields: an object's properties, or those of its alternatives (required when every one requires it). */
function bodyFields(schema: Json | undefined): { properties: Json; required: Set<string> } {
  if (!schema) return { properties: {}, required: new Set() };
  const branches = [...((schema.anyOf as Json[] | undefined) ?? []), ...((schema.oneOf as Json[] | undefined) ?? [])];
  if (!schema.properties && branches.length > 0) {
    const parts = branches.map(bodyFields);
    const properties = Object.assign({}, ...parts.map((p) => p.properties)) as Json;
    const required = new Set(Object.keys(properties).filter((k) => parts.every((p) => p.required.has(k))));
    return { properties, required };
  }
  return { properties: (schema.properties as Json | undefined) ?? {}, required: new Set((schema.required as string[] | undefined) ?? []) };
}

function operationArgs(op: Json | undefined, schemas: Record<string, Json>): Record<string, Json> {
  const args: Record<string, Json> = {};
  if (!op) return args;
  for (const p of (op.parameters as Json[] | undefined) ?? []) {
    args[String(p.name)] = arg(p.schema, Boolean(p.required), p.description, schemas);
  }
  const content = (op.requestBody as Json | undefined)?.content as Record<string, Json> | undefined;
  const body = bodyFields(inline(content?.['application/json']?.schema, schemas) as Json | undefined);
  for (const [name, schema] of Object.entries(body.properties)) args[name] ??= arg(schema, body.required.has(name), undefined, schemas);
  return args;
}

/**
 * The endpoints of every route of the index, by its WordPress path: the methods whose
 * arguments are the same share an endpoint (update by PUT, PATCH and POST on the id), as the
 * handlers WordPress registers do.
 */
export function indexEndpoints(document: Json, registry: RouteRegistry): Map<string, IndexEndpoint[]> {
  const paths = document.paths as Record<string, Record<string, Json>>;
  const schemas = (document.components as { schemas: Record<string, Json> }).schemas;
  const out = new Map<string, IndexEndpoint[]>();
  for (const op of registry.operations) {
    if (!op.namespace) continue;
    const relative = op.path.slice(`${registry.prefix}/${op.namespace}`.length) || '/';
    const route = RouteRegistry.wpPath(op.namespace, relative);
    const args = operationArgs(paths[openApiPath(op.path)]?.[op.method.toLowerCase()], schemas);
    const endpoints = out.get(route) ?? [];
    const key = JSON.stringify(args);
    const same = endpoints.find((e) => JSON.stringify(e.args) === key);
    if (same) {
      if (!same.methods.includes(op.method)) same.methods.push(op.method);
    } else endpoints.push({ methods: [op.method], args });
    out.set(route, endpoints);
  }
  return out;
}

/** The index's `routes` object, WordPress' shape. */
export function routeIndex(routes: RouteInfo[], endpoints: Map<string, IndexEndpoint[]>, self: (path: string) => string): Record<string, unknown> {
  return Object.fromEntries(
    routes.map((r) => [
      r.path,
      {
        namespace: r.namespace,
        methods: r.methods,
        endpoints: endpoints.get(r.path) ?? [{ methods: r.methods, args: {} }],
        ...(r.public ? { public: true } : {}),
        // As WordPress: a route without parameters links to itself.
        ...(r.path.includes('(?P<') ? {} : { _links: { self: [{ href: self(r.path) }] } }),
      },
    ]),
  );
}
