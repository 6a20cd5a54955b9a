import { Router, type Request } from 'express';
import type { ResourceDefinition, ResourceExamples, ResourceService } from '../db/resource';
import { componentName, RecordPresenter, registerLinkedResource } from './embed';
import { ApiError, noRoute, notFoundItem } from './errors';
import { applyFields, parseView, parseWithView } from './fields';
import { LIST_HEADERS, listQueryParams, parseListQuery, setPagingHeaders } from './list';
import { RouteRegistry, type ExamplesDoc } from './route-registry';
import { bodyObject, parseOrThrow } from './validation';

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
  const links = def.links ?? {};
  const service = def.service as ResourceService<Record<string, any>>;
  registerLinkedResource(registry, { model: def.model, plural: def.plural, namespace, links, getMany: (ids, read) => service.getMany(ids, read) });
  const presenter = new RecordPresenter(registry, def.model);
  const writable = def.writable !== false;

  const tags = [def.plural];
  const name = componentName(def.model);
  const record = registry.component(name, def.recordSchema);
  registry.links(name, Object.fromEntries(Object.entries(links).map(([rel, l]) => [rel, { component: componentName(l.model), embeddable: Boolean(l.embeddable) }])));
  const fields = { embed: Object.entries(links).filter(([, l]) => l.embeddable).map(([rel]) => rel) };
  const ex = def.examples ? resourceExamples(def.examples) : undefined;
  for (const base of [`/${def.plural}`, `/${def.model}`]) {
    const alias = base === `/${def.model}` ? ' (singular path of the original)' : '';
    registry.operation(namespace, 'GET', base, {
      summary: `List ${def.plural}${alias}`,
      tags,
      query: listQueryParams(def.listSpec),
      fields,
      responses: { 200: { description: `A page of ${def.plural} (a bare array).`, schema: { type: 'array', items: record }, headers: LIST_HEADERS, examples: ex?.list } },
    });
    if (writable) registry.operation(namespace, 'POST', base, {
      summary: `Create a ${def.model}${alias}`,
      description: def.description,
      tags,
      body: def.createSchema,
      bodyExamples: ex?.createBody,
      responses: { 200: { description: `The created ${def.model}.`, schema: record, examples: ex?.created } },
    });
    registry.operation(namespace, 'GET', `${base}/:id`, {
      summary: `Get a ${def.model}${alias}`,
      tags,
      fields,
      responses: { 200: { description: `The ${def.model}.`, schema: record, examples: ex?.one } },
    });
    for (const method of writable ? (['PUT', 'PATCH', 'POST'] as const) : []) {
      registry.operation(namespace, method, `${base}/:id`, {
        summary: `Update a ${def.model}${alias}${method === 'POST' ? ' (POST on the id, as the original)' : ''}`,
        description: `${def.description ? `${def.description} ` : ''}A field that does not exist or cannot be set: 400 wu_rest_${def.model}_invalid_set_method.`,
        tags,
        body: def.updateSchema,
        bodyExamples: ex?.updateBody,
        responses: { 200: { description: `The updated ${def.model}.`, schema: record, examples: ex?.updated } },
      });
    }
    if (writable) registry.operation(namespace, 'DELETE', `${base}/:id`, {
      summary: `Delete a ${def.model}${alias}`,
      tags,
      responses: { 200: { description: 'Deleted: the literal true.', schema: { type: 'boolean', const: true } } },
    });

    router.get(base, async (req, res) => {
      const { q, view } = parseWithView(req.query as Record<string, unknown>, (query) => parseListQuery(query, def.listSpec));
      const page = await service.list(q, { fields: presenter.readFields(view) });
      setPagingHeaders(req, res, q, page);
      res.json(await presenter.present(req, page.rows, view));
    });

    if (writable) router.post(base, async (req, res) => {
      const input = parseOrThrow(def.createSchema, bodyObject(req.body));
      res.status(200).json(await presenter.presentOne(req, await service.create(input)));
    });

    router.get(`${base}/:id`, async (req, res) => {
      const id = parseId(req, def.model);
      const view = parseView(req.query as Record<string, unknown>);
      const rec = await service.get(id, { fields: presenter.readFields(view) });
      if (!rec) throw notFoundItem(def.model);
      res.json((await presenter.present(req, [rec], view))[0]);
    });

    if (!writable) continue;
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
      const rec = await service.update(id, input);
      if (!rec) throw notFoundItem(def.model);
      res.json(await presenter.presentOne(req, rec));
    };
    router.put(`${base}/:id`, update);
    router.patch(`${base}/:id`, update);
    router.post(`${base}/:id`, update);

    router.delete(`${base}/:id`, async (req, res) => {
      const id = parseId(req, def.model);
      if (!(await service.remove(id))) throw notFoundItem(def.model);
      res.json(true);
    });
  }
}

/** The document's examples of a resource's main routes, from one create and one update of a real run. */
function resourceExamples(ex: ResourceExamples): Record<'createBody' | 'created' | 'one' | 'list' | 'updateBody' | 'updated', ExamplesDoc> {
  const updated = { ...ex.record, ...ex.update };
  const picked = ['id', 'model', 'date_created'];
  return {
    createBody: { create: { summary: `A ${ex.record.model} to create`, value: ex.create } },
    created: { created: { summary: 'The record created', value: ex.record } },
    one: {
      record: { summary: 'The record (with its _links)', value: ex.record },
      fields: { summary: `?_fields=${picked.join(',')}`, value: applyFields(ex.record, new Map(picked.map((f) => [f, true as const]))) },
    },
    list: { page: { summary: 'A page of one record', value: [ex.record] } },
    updateBody: { update: { summary: 'Fields to change', value: ex.update } },
    updated: { updated: { summary: 'The record after the change', value: updated } },
  };
}
