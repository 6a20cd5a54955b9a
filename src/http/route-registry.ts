import type { z } from 'zod';

/**
 * What the service exposes. Every router registers its operations here as it mounts them;
 * the registry feeds the WordPress-style route index (GET /wp-json/, GET /wp-json/{namespace})
 * and the OpenAPI document, so neither can drift from the routes.
 */
export interface RouteInfo {
  namespace: string;
  /** WordPress-style path, e.g. /wu/v2/customers/(?P<id>[\d]+) */
  path: string;
  methods: string[];
  public?: boolean;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** A query parameter documented with a JSON Schema (or the zod schema that validates it). */
export interface ParamDoc {
  name: string;
  description?: string;
  schema: z.ZodType | Record<string, unknown>;
  required?: boolean;
  /** An example value (generated clients and the fuzzer's example phase use it). */
  example?: unknown;
}

/** Named examples of a body, as OpenAPI's `examples` (each checked against its schema by the tests). */
export type ExamplesDoc = Record<string, { summary?: string; value: unknown }>;

export interface ResponseDoc {
  description: string;
  /** A zod schema (converted for the document) or a JSON Schema. */
  schema?: z.ZodType | Record<string, unknown>;
  headers?: Record<string, { description: string; schema: Record<string, unknown> }>;
  examples?: ExamplesDoc;
}

export interface OperationDoc {
  summary: string;
  description?: string;
  tags: string[];
  /** No authentication (index, health). */
  public?: boolean;
  query?: ParamDoc[];
  /** Path parameters other than ids (`*id`: integers, documented for you), by name. */
  pathParams?: Record<string, z.ZodType | Record<string, unknown>>;
  /** The zod schema that validates the body, or (a route that validates by hand) a JSON Schema of it. */
  body?: z.ZodType | Record<string, unknown>;
  /** false: the route also takes a request without a body (as {}); default true (400 without one). */
  bodyRequired?: boolean;
  /** Who may call it, in words (default: the API credentials). */
  auth?: string;
  /** OpenAPI security requirements (default: the document's, the API credentials). */
  security?: Record<string, string[]>[];
  /** A request body other than JSON (e.g. multipart), as an OpenAPI requestBody object. */
  requestBody?: Record<string, unknown>;
  /** Examples of the body (application/json). */
  bodyExamples?: ExamplesDoc;
  /**
   * The success answer honours `_fields` (src/http/fields.ts): the document adds the parameter and
   * describes the answer as the record or a projection of it; `embed` lists the link relations
   * `_embed` can embed (the parameter is added when there are some).
   */
  fields?: { embed?: readonly string[] };
  /** Success responses; the error responses every operation can give are added for it. */
  responses: Record<number, ResponseDoc>;
}

export interface Operation {
  namespace: string;
  method: HttpMethod;
  /** Full Express path, e.g. /wp-json/wu/v2/customers/:id */
  path: string;
  doc: OperationDoc;
}

export class RouteRegistry {
  readonly routes: RouteInfo[] = [];
  readonly namespaces = new Set<string>();
  readonly operations: Operation[] = [];
  /** Named schemas for the document's components (records of each model). */
  readonly components = new Map<string, z.ZodType | Record<string, unknown>>();
  /** Namespaces whose bodies may also be application/x-www-form-urlencoded. */
  readonly formNamespaces = new Set<string>();
  /** Namespaces whose writes take an Idempotency-Key header (src/http/idempotency.ts). */
  readonly idempotentNamespaces = new Set<string>();
  /** Record components that carry `_links` (and `_embedded`): link relation -> the component linked to. */
  readonly componentLinks = new Map<string, Record<string, { component: string; embeddable: boolean }>>();

  constructor(readonly prefix = '/wp-json') {}

  add(info: RouteInfo): void {
    this.namespaces.add(info.namespace);
    const existing = this.routes.find((r) => r.path === info.path);
    if (existing) {
      for (const m of info.methods) if (!existing.methods.includes(m)) existing.methods.push(m);
    } else {
      this.routes.push({ ...info, methods: [...info.methods] });
    }
  }

  /** Documents an operation (and lists it in the index). `path` is relative to the namespace. */
  operation(namespace: string, method: HttpMethod, path: string, doc: OperationDoc): void {
    this.operations.push({ namespace, method, path: `${this.prefix}/${namespace}${path === '/' ? '' : path}`, doc });
    this.add({ namespace, path: RouteRegistry.wpPath(namespace, path), methods: [method], public: doc.public });
  }

  /** Documents that the namespace's operations take form-encoded bodies as well as JSON. */
  acceptFormBodies(namespace: string): void {
    this.formNamespaces.add(namespace);
  }

  /** Documents that the namespace's writes take an Idempotency-Key. */
  acceptIdempotencyKeys(namespace: string): void {
    this.idempotentNamespaces.add(namespace);
  }

  /** Registers a named schema; answers a $ref to it. */
  component(name: string, schema: z.ZodType | Record<string, unknown>): { $ref: string } {
    this.components.set(name, schema);
    return { $ref: `#/components/schemas/${name}` };
  }

  /** Documents the `_links` (and `_embedded`) a record component carries. */
  links(component: string, links: Record<string, { component: string; embeddable: boolean }>): void {
    this.componentLinks.set(component, links);
  }

  /** Documents a route outside the REST namespaces (health, metrics, indexes). */
  service(method: HttpMethod, fullPath: string, doc: OperationDoc): void {
    this.operations.push({ namespace: '', method, path: fullPath, doc: { ...doc, public: true } });
  }

  /** Express path (`/customers/:id`) to WordPress' regex form. */
  static wpPath(namespace: string, expressPath: string): string {
    const p = expressPath.replace(/:([A-Za-z_]+)/g, (_m, name: string) => (name.endsWith('id') ? `(?P<${name}>[\\d]+)` : `(?P<${name}>[\\w-]+)`));
    return `/${namespace}${p === '/' ? '' : p}`;
  }
}
