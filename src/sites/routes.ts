import type { Router } from 'express';
import type { Db } from '../db/knex';
import { tableResource, type TableService } from '../db/table-service';
import type { DomainChecks } from '../domains/checks';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { siteExamples } from './examples';
import { createSiteSchema, updateSiteSchema } from './schema';
import { createSiteService } from './service';
import { mountSiteUsers } from './users';

export function mountSites(router: Router, registry: RouteRegistry, namespace: string, db: Db, checks?: DomainChecks): TableService {
  const service = createSiteService(db, checks);
  mountSiteUsers(router, registry, namespace, db);
  mountResource(
    router,
    registry,
    namespace,
    tableResource(service, service.cfg, {
      plural: 'sites',
      description:
        "template_id must be a site of type site_template (not the site itself); membership_id must be a membership of the site's customer (on create without customer_id, the membership's customer becomes the site's).",
      createSchema: createSiteSchema,
      updateSchema: updateSiteSchema,
      links: {
        customer: { field: 'customer_id', model: 'customer', embeddable: true },
        membership: { field: 'membership_id', model: 'membership', embeddable: true },
        template: { field: 'template_id', model: 'site' },
      },
      examples: siteExamples,
    }),
  );
  return service;
}
