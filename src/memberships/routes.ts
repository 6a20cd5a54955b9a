import type { Router } from 'express';
import type { Db } from '../db/knex';
import { recordSchema } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import { createMembershipSchema, updateMembershipSchema } from './schema';
import { createMembershipService, membershipListSpec } from './store';

export function mountMemberships(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createMembershipService(db);
  mountResource(router, registry, namespace, {
    model: 'membership',
    plural: 'memberships',
    listSpec: membershipListSpec,
    createSchema: createMembershipSchema,
    recordSchema: recordSchema(service.cfg, createMembershipSchema, []),
    updateSchema: updateMembershipSchema,
    service,
  });
  return service;
}
