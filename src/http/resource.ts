import { Router, type Request } from 'express';
import type { z } from 'zod';
import { ApiError, noRoute, notFoundItem } from './errors';
import { LIST_HEADERS, listQueryParams, parseListQuery, setPagingHeaders, type ListPage, type ListQuery, type ListSpec } from './list';
import { RouteRegistry } from './routes';
import { bodyObject, parseOrThrow } from './validation';

/** What a resource folder provides; the HTTP behaviour is the same for every resource. */
export interface ResourceService<Rec> {
  list(q: ListQuery): Promise<ListPage<Rec>>;
  get(id: number): Promise<Rec | null>;
  create(input: any): Promise<Rec>;
  /** null when the id is unknown */
  update(id: number, input: any): Promise<Rec | null>;
  /** false when the id is unknown */
  remove(id: number): Promise<boolean>;
}

export interface ResourceDefinition<Rec> {
  /** Model name used in error codes: wu_rest_{model}_invalid_id */
  model: string;
  /** Plural path segment from the contract; the model name is the singular path. */
  plural: string;
  listSpec: ListSpec;
  createSchema: z.ZodType;
  updateSchema: z.ZodObject;
  /** What a record looks like in a response (the OpenAPI document's schema of the model). */
  recordSchema: z.ZodType;
  service: ResourceService<Rec>;
  /** What the document says of create and update beyond the body's schema (references, uniqueness, rules across fields). */
  description?: string;
}

export function parseId(req: Request, model: string, param = 'id'): number {
  const raw = String(req.params[param]);
  // Non-numeric ids match no route, as in WordPress.
  if (!/^\d{1,15}$/.test(raw)) throw noRoute();
  const id = Number.parseInt(raw, 10);
  if (id < 1) throw notFoundItem(model);
  return id;
}

/**
 * Mounts list/get/create/update/delete of a resource on both its plural and its singular
 * path. Update answers PUT, PATCH and POST on the id, like the original.
 */
export function mountResource<Rec>(router: Router, registry: RouteRegistry, namespace: string, def: ResourceDefinition<Rec>): void {
  const updatable = new Set(Object.keys(def.updateSchema.shape));

  const tags = [def.plural];
  const record = registry.component(def.model.charAt(0).toUpperCase() + def.model.slice(1), def.recordSchema);
  for (const base of [`/${def.plural}`, `/${def.model}`]) {
    const alias = base === `/${def.model}` ? ' (singular path of the original)' : '';
    registry.operation(namespace, 'GET', base, {
      summary: `List ${def.plural}${alias}`,
      tags,
      query: listQueryParams(def.listSpec),
      responses: { 200: { description: `A page of ${def.plural} (a bare array).`, schema: { type: 'array', items: record }, headers: LIST_HEADERS } },
    });
    registry.operation(namespace, 'POST', base, {
      summary: `Create a ${def.model}${alias}`,
      description: def.description,
      tags,
      body: def.createSchema,
      responses: { 200: { description: `The created ${def.model}.`, schema: record } },
    });
    registry.operation(namespace, 'GET', `${base}/:id`, { summary: `Get a ${def.model}${alias}`, tags, responses: { 200: { description: `The ${def.model}.`, schema: record } } });
    for (const method of ['PUT', 'PATCH', 'POST'] as const) {
      registry.operation(namespace, method, `${base}/:id`, {
        summary: `Update a ${def.model}${alias}${method === 'POST' ? ' (POST on the id, as the original)' : ''}`,
        description: `${def.description ? `${def.description} ` : ''}A field that does not exist or cannot be set: 400 wu_rest_${def.model}_invalid_set_method.`,
        tags,
        body: def.updateSchema,
        responses: { 200: { description: `The updated ${def.model}.`, schema: record } },
      });
    }
    registry.operation(namespace, 'DELETE', `${base}/:id`, {
      summary: `Delete a ${def.model}${alias}`,
      tags,
      responses: { 200: { description: 'Deleted: the literal true.', schema: { type: 'boolean', const: true } } },
    });

    router.get(base, async (req, res) => {
      const q = parseListQuery(req.query as Record<string, unknown>, def.listSpec);
      const page = await def.service.list(q);
      setPagingHeaders(req, res, q, page);
      res.json(page.rows);
    });

    router.post(base, async (req, res) => {
      const input = parseOrThrow(def.createSchema, bodyObject(req.body));
      res.status(200).json(await def.service.create(input));
    });

    router.get(`${base}/:id`, async (req, res) => {
      const id = parseId(req, def.model);
      const rec = await def.service.get(id);
      if (!rec) throw notFoundItem(def.model);
      res.json(rec);
    });

    const update = async (req: Request, res: import('express').Response) => {
      const id = parseId(req, def.model);
      const body = bodyObject(req.body);
      const unknown = Object.keys(body).filter((k) => !updatable.has(k));
      if (unknown.length > 0) {
        throw new ApiError(400, `wu_rest_${def.model}_invalid_set_method`, `Cannot set ${unknown.join(', ')} on a ${def.model}: no such field, or it cannot be changed.`, {
          params: Object.fromEntries(unknown.map((k) => [k, `${k} is not a field of ${def.model} that can be set.`])),
        });
      }
      const input = parseOrThrow(def.updateSchema, body);
      const rec = await def.service.update(id, input);
      if (!rec) throw notFoundItem(def.model);
      res.json(rec);
    };
    router.put(`${base}/:id`, update);
    router.patch(`${base}/:id`, update);
    router.post(`${base}/:id`, update);

    router.delete(`${base}/:id`, async (req, res) => {
      const id = parseId(req, def.model);
      if (!(await def.service.remove(id))) throw notFoundItem(def.model);
      res.json(true);
    });
  }
}
