import type { Router } from 'express';
import type { Db } from '../db/knex';
import type { DomainChecks } from '../domains/checks';
import { recordSchema } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import { createSiteSchema, updateSiteSchema } from './schema';
import { SiteService, siteListSpec } from './store';

export function mountSites(router: Router, registry: RouteRegistry, namespace: string, db: Db, checks?: DomainChecks): SiteService {
  const service = new SiteService(db, checks);
  mountResource(router, registry, namespace, {
    model: 'site',
    plural: 'sites',
    listSpec: siteListSpec,
    createSchema: createSiteSchema,
    recordSchema: recordSchema(service.cfg, createSiteSchema, []),
    updateSchema: updateSiteSchema,
    service,
  });
  return service;
}
