import { maxHeaderSize } from 'node:http';
import { z } from 'zod';
import { viewQueryParams } from '../http/fields';
import { FORM_MAX_PARAMETERS, MAX_DEPTH, MAX_VALUES } from '../http/input';
import type { ExamplesDoc, HttpMethod, Operation, ResponseDoc, RouteRegistry } from '../http/route-registry';
import { MAX_QUERY_INTEGER } from '../http/validation';
import { addLinks } from './links';
import { Projections, withRecordLinks } from './projections';
import { formMediaType, JSON_VALUE_SCHEMA, withInputRules } from './request-schemas';

/**
 * The OpenAPI 3.1 document, built from the route registry: the same zod schemas that
 * validate requests describe them here, and every registered operation is in it.
 */
export const ERROR_SCHEMA = {
  type: 'object',
  required: ['code', 'message', 'data'],
  properties: {
    code: { type: 'string', description: 'Machine-readable code, e.g. wu_rest_invalid_parameter.' },
    message: { type: 'string' },
    data: {
      type: 'object',
      required: ['status'],
      properties: {
        status: { type: 'integer' },
        params: { type: 'object', additionalProperties: { type: 'string' }, description: 'Every offending parameter with a message.' },
        request_id: { type: 'string' },
      },
      additionalProperties: true,
    },
  },
  additionalProperties: false,
};

const ERROR_STATUSES: Record<number, string> = {
  400:
    'Invalid parameters (`wu_rest_invalid_parameter`, every one in data.params: also a string holding NUL or an unpaired surrogate, a body nested too deep or too large, a query parameter with an empty or control-character name), ' +
    'malformed JSON (`rest_invalid_json`), an unknown or read-only field on update (`wu_rest_{model}_invalid_set_method`) or a business rule.',
  401: 'Missing or wrong credentials (`rest_forbidden`).',
  403:
    'The API is disabled (`wu_rest_api_disabled`), the item is protected, (chat) the caller may not use this route or session (`rest_forbidden`), ' +
    'or a browser sent a request that changes data from another site (`rest_cross_site_forbidden`).',
  404: 'Unknown id (`wu_rest_{model}_invalid_id`) or route (`rest_no_route`).',
  409:
    'Conflict: the record is still referenced (`wu_rest_{model}_in_use`), a status change its state machine does not allow (`wu_rest_membership_invalid_status_transition`, naming both), or an Idempotency-Key was used with another request (`wu_rest_idempotency_key_reused`), ' +
    'is still running (`wu_rest_idempotency_key_in_use`, with `Retry-After`) or its first request was interrupted (`wu_rest_idempotency_key_interrupted`).',
  413: 'Request body too large (`rest_request_too_large`: over BODY_LIMIT, or a form with too many parameters; `chat_attachment_too_large` for an attachment).',
  415: 'A body that is not JSON (wu/v2: or form-encoded) (`rest_unsupported_media_type`), an unsupported body encoding, or (chat attachments) not multipart or a file type that is not allowed.',
  429: 'Too many failed authentications from this address (`Retry-After` says when to try again).',
  431: `The URL and headers exceed ${maxHeaderSize / 1024} KiB (\`rest_request_header_too_large\`); the connection is closed.`,
  500: 'Unexpected failure (`internal_error`, with data.request_id).',
  503:
    'A backing service is unavailable: the database (`hostflow_database_unavailable`, with `Retry-After`) or Temporal ' +
    '(`wu_rest_temporal_unavailable` and feature-specific codes); try again later.',
};

/** The header every write of an idempotent namespace takes (src/http/idempotency.ts). */
const IDEMPOTENCY_KEY_PARAM = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: the same key with the same request (method, URL and body) answers the first answer again (with `Idempotent-Replayed: true`) without running it again, ' +
    'for IDEMPOTENCY_KEY_TTL_HOURS (24 by default); with another request, 409 `wu_rest_idempotency_key_reused`; while the first still runs, 409 `wu_rest_idempotency_key_in_use` (after waiting up to 5 s). ' +
    '2xx and 4xx answers are final; after a 5xx the same key runs the request again. /register keeps its own keys (see its description).',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[!-~]+$' },
};
const REPLAYED = { 'Idempotent-Replayed': { description: '`true` when this is the kept answer of an earlier request with the same Idempotency-Key.', schema: { const: 'true' } } };

/** Answers after authentication hold the caller's data: never cached. */
const NO_STORE = { 'Cache-Control': { description: 'no-store (answers after authentication are not to be cached).', schema: { type: 'string' } } };

function toJsonSchema(schema: z.ZodType | Record<string, unknown>, io: 'input' | 'output'): Record<string, unknown> {
  if (!(schema instanceof z.ZodType)) return schema;
  const json = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any', reused: 'inline' }) as Record<string, unknown>;
  delete json.$schema;
  return json;
}

/** /wp-json/wu/v2/customers/:id -> /wp-json/wu/v2/customers/{id} */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z_]+)/g, '{$1}');
}

/** `examples` of a media type, when there are some. */
function examples(ex: ExamplesDoc | undefined): Record<string, unknown> {
  return ex && Object.keys(ex).length > 0 ? { examples: ex } : {};
}

function response(doc: ResponseDoc, io: 'output', projections: Projections | null): Record<string, unknown> {
  const out: Record<string, unknown> = { description: doc.description };
  if (doc.headers) out.headers = doc.headers;
  if (doc.schema) {
    const schema = toJsonSchema(doc.schema, io);
    out.content = { 'application/json': { schema: projections ? projections.answer(schema) : schema, ...examples(doc.examples) } };
  }
  return out;
}

export function buildOpenApiDocument(registry: RouteRegistry, opts: { serverUrl?: string; version: string }): Record<string, unknown> {
  const schemas: Record<string, Record<string, unknown>> = {
    Error: ERROR_SCHEMA,
    JsonValue: JSON_VALUE_SCHEMA,
    ...Object.fromEntries([...registry.components].map(([name, schema]) => [name, toJsonSchema(schema, 'output')])),
  };
  withRecordLinks(schemas, registry.componentLinks);
  const projections = new Projections(schemas);
  const paths: Record<string, Record<string, unknown>> = {};
  const seen = new Set<string>();
  for (const op of registry.operations) {
    const key = `${op.method} ${op.path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const path = openApiPath(op.path);
    const item = (paths[path] ??= {});
    item[op.method.toLowerCase()] = operationObject(op, registry.prefix, registry.formNamespaces.has(op.namespace), projections, registry.idempotentNamespaces.has(op.namespace));
  }
  addLinks(paths, schemas);
  return {
    openapi: '3.1.0',
    info: {
      title: 'hostflow API',
      version: opts.version,
      description:
        'JSON REST API of the hostflow multi-site hosting and billing platform (namespace wu/v2, compatible with the original platform). ' +
        'Authenticate with HTTP Basic (API key as user name, API secret as password) or the api_key/api_secret query parameters. ' +
        'The support chat namespace ({product}-support-tickets/v1) also takes Bearer session and agent tokens; each of its operations says which callers it accepts. ' +
        'Every error is {code, message, data:{status, ...}}. ' +
        'Bodies are JSON; wu/v2 also takes application/x-www-form-urlencoded (the form media type of each body says how: objects as billing_address[city]=x, ' +
        'arrays by repeating the name (ips=a&ips=b) or by index (line_items[0][name]=x), null as null; numbers and booleans converted where the schema expects them); any other body type is 415. ' +
        `Limits: the URL and headers together at most ${maxHeaderSize / 1024} KiB (else 431: put long inputs in a body, such as POST /translations/check/batch, and split long filters such as id__in, at most 100 values each, over several requests); ` +
        `a body at most BODY_LIMIT (1 MB by default; else 413), nested at most ${MAX_DEPTH} levels and holding at most ${MAX_VALUES} values, a form at most ${FORM_MAX_PARAMETERS} parameters (else 400 naming the field). ` +
        'No string may hold NUL (U+0000) or an unpaired UTF-16 surrogate, nor may a query parameter name be empty or hold a control character (400 naming it); ' +
        'the schemas say the first with a pattern (free-form values are JsonValue), JSON Schema has no word for the second. ' +
        'Lengths are counted in characters (code points), as JSON Schema counts them. ' +
        'Requests that change data are refused (403 rest_cross_site_forbidden) when a browser sends them from another site. Authenticated answers carry Cache-Control: no-store.',
      contact: { name: 'hostflow' },
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: opts.serverUrl ?? '/', description: 'This service' }],
    security: [{ basicAuth: [] }, { apiKeyQuery: [], apiSecretQuery: [] }],
    tags: [...new Set(registry.operations.flatMap((o) => o.doc.tags))].sort().map((name) => ({ name, description: `${name} operations` })),
    components: {
      securitySchemes: {
        basicAuth: { type: 'http', scheme: 'basic', description: 'API key as user name, API secret as password (recommended).' },
        apiKeyQuery: { type: 'apiKey', in: 'query', name: 'api_key', description: 'API key (with api_secret).' },
        apiSecretQuery: { type: 'apiKey', in: 'query', name: 'api_secret', description: 'API secret (with api_key).' },
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'Support chat only: a session token (hfc_…, from POST /chat/sessions) or an agent token (hfa_…).' },
      },
      schemas,
    },
    paths,
  };
}

/** GET /wp-json/wu/v2/customers/:id -> WuV2CustomersById (the REST prefix left out). */
function operationName(path: string, prefix: string): string {
  if (path === '/') return 'Root';
  const rest = path === prefix ? 'RestIndex' : path.startsWith(`${prefix}/`) ? path.slice(prefix.length) : path;
  return rest
    .split(/[/\-_.]/)
    .filter(Boolean)
    .map((p) => (p.startsWith(':') ? `By${p.slice(1, 2).toUpperCase()}${p.slice(2)}` : p.charAt(0).toUpperCase() + p.slice(1)))
    .join('');
}

/** The body's media types: JSON, and form-encoded in the namespaces that accept it (the same body, spelled as forms spell it). */
function requestBodyContent(schema: Record<string, unknown>, form: boolean, ex?: ExamplesDoc): Record<string, unknown> {
  return {
    'application/json': { schema, ...examples(ex) },
    ...(form ? { 'application/x-www-form-urlencoded': formMediaType(schema) } : {}),
  };
}

/** A request input's schema: the zod schema's, with the rules every route applies (no NUL). */
function inputSchema(schema: z.ZodType | Record<string, unknown>): Record<string, unknown> {
  return withInputRules(toJsonSchema(schema, 'input')) as Record<string, unknown>;
}

function operationObject(op: Operation, prefix: string, formBodies: boolean, projections: Projections, idempotent: boolean): Record<string, unknown> {
  const d = op.doc;
  const success = Object.entries(d.responses).find(([status]) => /^2/.test(status))?.[1];
  const query = [...(d.query ?? [])];
  if (d.fields && success?.schema) query.push(...viewQueryParams(projections.fieldNames(toJsonSchema(success.schema, 'output')), d.fields.embed));
  const parameters: Record<string, unknown>[] = [];
  for (const m of op.path.matchAll(/:([A-Za-z_]+)/g)) {
    const documented = d.pathParams?.[m[1]];
    const schema = documented ?? (m[1].endsWith('id') ? { type: 'integer', minimum: 1, maximum: MAX_QUERY_INTEGER } : { type: 'string' });
    const description = documented ? undefined : m[1].endsWith('id') ? 'Identifier (digits only; anything else matches no route).' : undefined;
    parameters.push({ name: m[1], in: 'path', required: true, ...(description ? { description } : {}), schema: inputSchema(schema) });
  }
  for (const q of query) {
    const schema = inputSchema(q.schema);
    const isArray = schema.type === 'array';
    parameters.push({
      name: q.name,
      in: 'query',
      required: q.required ?? false,
      description: q.description,
      schema,
      ...(isArray ? { style: 'form', explode: true } : {}),
      ...(q.example !== undefined ? { example: q.example } : {}),
    });
  }
  const takesKey = idempotent && op.method !== 'GET';
  if (takesKey) parameters.push(IDEMPOTENCY_KEY_PARAM);
  const responses: Record<string, unknown> = {};
  for (const [status, r] of Object.entries(d.responses)) {
    const headers = { ...(d.public ? {} : NO_STORE), ...(takesKey && /^2/.test(status) ? REPLAYED : {}), ...r.headers };
    responses[status] = response(Object.keys(headers).length ? { ...r, headers } : r, 'output', d.fields && /^2/.test(status) ? projections : null);
  }
  // Any request can be too long for the server (431) or meet the database down (503), public ones included.
  const errorStatuses = d.public ? [431, 500, 503] : Object.keys(ERROR_STATUSES).map(Number);
  for (const status of errorStatuses) {
    responses[String(status)] ??= {
      description: ERROR_STATUSES[status],
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      ...(status === 401 ? { headers: { 'WWW-Authenticate': { description: 'Support chat only: a Bearer challenge (wu/v2 sends none, as WordPress).', schema: { type: 'string' } } } } : {}),
      ...(status === 429 || status === 503 ? { headers: { 'Retry-After': { description: 'Seconds to wait (503: when the database is unreachable)', schema: { type: 'integer' } } } } : {}),
    };
  }
  const operationId = `${op.method.toLowerCase()}${operationName(op.path, prefix)}`;
  return {
    operationId,
    summary: d.summary,
    description: `${d.description ? `${d.description} ` : ''}${d.auth ?? (d.public ? 'Public: no credentials needed.' : 'Needs the API credentials (HTTP Basic, or the api_key and api_secret parameters).')}`,
    tags: d.tags,
    ...(d.security ? { security: d.security } : d.public ? { security: [] } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(d.body ? { requestBody: { required: d.bodyRequired ?? true, content: requestBodyContent(inputSchema(d.body), formBodies, d.bodyExamples) } } : {}),
    ...(d.requestBody ? { requestBody: d.requestBody } : {}),
    responses,
  };
}

export type { HttpMethod };
