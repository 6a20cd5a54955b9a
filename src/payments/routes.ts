import type { Router } from 'express';
import type { Db } from '../db/knex';
import { recordSchema } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import { createPaymentSchema, updatePaymentSchema } from './schema';
import { createPaymentService, paymentListSpec } from './store';

export function mountPayments(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createPaymentService(db);
  mountResource(router, registry, namespace, {
    model: 'payment',
    plural: 'payments',
    listSpec: paymentListSpec,
    createSchema: createPaymentSchema,
    recordSchema: recordSchema(service.cfg, createPaymentSchema, []),
    updateSchema: updatePaymentSchema,
    service,
  });
  return service;
}
