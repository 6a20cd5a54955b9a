import type { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { discountCodeExamples } from './examples';
import { createDiscountCodeSchema, updateDiscountCodeSchema } from './schema';
import { createDiscountCodeService } from './service';

/** /discount-codes, and the original's singular /discount_code (the model's name). */
export function mountDiscountCodes(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createDiscountCodeService(db);
  mountResource(
    router,
    registry,
    namespace,
    tableResource(service, service.cfg, {
      plural: 'discount-codes',
      description:
        'code is 2 to 20 letters, digits, - and _, unique without regard to case (/register takes it in any case). value and setup_fee_value are at most 100 when their type (type, setup_fee_type) is percentage; date_expiration must be after date_start; allowed_products must name existing products (with limit_products the code applies to those only; empty means all). uses is counted by /register, once per registration written.',
      createSchema: createDiscountCodeSchema,
      updateSchema: updateDiscountCodeSchema,
      json: { allowed_products: z.array(z.int()) },
      examples: discountCodeExamples,
    }),
  );
  return service;
}
