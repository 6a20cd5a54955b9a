import type { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { productExamples } from './examples';
import { createProductSchema, priceVariationRecord, updateProductSchema } from './schema';
import { createProductService } from './service';

export function mountProducts(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createProductService(db);
  mountResource(router, registry, namespace, tableResource(service, service.cfg, {
      plural: 'products',
      description:
        "price_variations are prices for other billing periods than the product's own (duration, duration_unit): none for its own period, none on a free or contact_us product, amounts in the currency's minor unit; /register picks the price of the period it is asked for.",
      createSchema: createProductSchema,
      updateSchema: updateProductSchema,
      json: { price_variations: z.array(priceVariationRecord) },
      examples: productExamples,
    }));
  return service;
}
