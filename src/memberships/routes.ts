import type { Router } from 'express';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import { createMembershipSchema, updateMembershipSchema } from './schema';
import { createMembershipService } from './store';

export function mountMemberships(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createMembershipService(db);
  mountResource(router, registry, namespace, tableResource(service, service.cfg, { plural: 'memberships', createSchema: createMembershipSchema, updateSchema: updateMembershipSchema }));
  return service;
}
