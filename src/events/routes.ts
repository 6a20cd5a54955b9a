import type { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../db/knex';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { EVENT_SLUGS, EVENT_TYPES } from './catalogue';
import { createEventService, EVENT_INITIATORS, eventListSpec } from './service';

const eventRecord = z.strictObject({
  id: z.int(),
  model: z.literal('event'),
  slug: z.enum(EVENT_SLUGS as [string, ...string[]]),
  severity: z.int().min(1).max(5),
  initiator: z.enum(EVENT_INITIATORS),
  author_id: z.int().nullable(),
  object_type: z.string(),
  object_id: z.int().nullable(),
  payload: z.record(z.string(), z.unknown()),
  date_created: z.iso.datetime({ offset: true }),
});

const hookRecord = z.strictObject({
  id: z.string(),
  name: z.string(),
  desc: z.string(),
  object_type: z.string(),
  severity: z.int(),
  payload: z.record(z.string(), z.unknown()),
});

/**
 * /events and the original's singular /event: the log, read only (rows come from the changes
 * themselves), with the shared list machinery; /hooks: the catalogue of event types.
 */
export function mountEvents(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createEventService(db);
  mountResource(router, registry, namespace, {
    model: 'event',
    plural: 'events',
    listSpec: eventListSpec,
    createSchema: z.strictObject({}),
    updateSchema: z.strictObject({}),
    recordSchema: eventRecord,
    service,
    writable: false,
    description: 'Events are written by the service, in the same transaction as the change they record; the log is read only.',
  });

  const hooks = [...EVENT_TYPES.values()].map((t) => ({ id: t.slug, name: t.name, desc: t.desc, object_type: t.objectType, severity: t.severity, payload: t.example() }));
  registry.operation(namespace, 'GET', '/hooks', {
    summary: 'The catalogue of event types',
    description: 'Every event slug the service writes, with its description and an example payload (a record as the API answers it).',
    tags: ['events'],
    responses: { 200: { description: 'The event types.', schema: { type: 'array', items: registry.component('Hook', hookRecord) } } },
  });
  router.get('/hooks', (_req, res) => {
    res.json(hooks);
  });
  return service;
}
