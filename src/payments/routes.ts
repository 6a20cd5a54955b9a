import type { Router } from 'express';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import { z } from 'zod';
import { paymentExamples } from './examples';
import { createPaymentSchema, lineItemRecord, updatePaymentSchema } from './schema';
import { createPaymentService } from './store';

export function mountPayments(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createPaymentService(db);
  mountResource(
    router,
    registry,
    namespace,
    tableResource(service, service.cfg, {
      plural: 'payments',
      description:
        "membership_id must be a membership of the payment's customer; line_items[].product_id must name existing products; parent_id must not be the payment itself. Without subtotal the line items make it, without total subtotal - discount_total + tax_total does; neither may exceed 99999999999.9999.",
      createSchema: createPaymentSchema,
      updateSchema: updatePaymentSchema,
      json: { line_items: z.array(lineItemRecord) },
      links: {
        customer: { field: 'customer_id', model: 'customer', embeddable: true },
        membership: { field: 'membership_id', model: 'membership', embeddable: true },
        product: { field: 'product_id', model: 'product', embeddable: true },
        parent: { field: 'parent_id', model: 'payment' },
      },
      examples: paymentExamples,
    }),
  );
  return service;
}
