import type { Router } from 'express';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import { productExamples } from './examples';
import { createProductSchema, updateProductSchema } from './schema';
import { createProductService } from './store';

export function mountProducts(router: Router, registry: RouteRegistry, namespace: string, db: Db) {
  const service = createProductService(db);
  mountResource(router, registry, namespace, tableResource(service, service.cfg, { plural: 'products', createSchema: createProductSchema, updateSchema: updateProductSchema, examples: productExamples }));
  return service;
}
