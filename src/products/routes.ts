import type { Router } from 'express';
import type { Db } from '../db/knex';
import { recordSchema } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import { createProductSchema, updateProductSchema } from './schema';
import { createProductService, productListSpec } from './store';

export function mountProducts(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createProductService(db);
  mountResource(router, registry, namespace, {
    model: 'product',
    plural: 'products',
    listSpec: productListSpec,
    createSchema: createProductSchema,
    recordSchema: recordSchema(service.cfg, createProductSchema, []),
    updateSchema: updateProductSchema,
    service,
  });
  return service;
}
