import type { Router } from 'express';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import { createPaymentSchema, updatePaymentSchema } from './schema';
import { createPaymentService } from './store';

export function mountPayments(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createPaymentService(db);
  mountResource(router, registry, namespace, tableResource(service, service.cfg, { plural: 'payments', createSchema: createPaymentSchema, updateSchema: updatePaymentSchema }));
  return service;
}
