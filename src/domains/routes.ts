import type { Router } from 'express';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import type { Metrics } from '../http/metrics';
import { tableResource } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import type { TemporalHandle } from '../temporal/client';
import { DomainChecks } from './checks';
import { createDomainSchema, updateDomainSchema } from './schema';
import { DomainService } from './store';

export function mountDomains(
  router: Router,
  registry: RouteRegistry,
  namespace: string,
  db: Db,
  temporal: TemporalHandle | null,
  metrics: Metrics,
  config: Config,
): DomainService {
  const service = new DomainService(db, new DomainChecks(temporal, metrics, config));
  mountResource(router, registry, namespace, tableResource(service, service.table.cfg, { plural: 'domains', createSchema: createDomainSchema, updateSchema: updateDomainSchema, nullable: ['workflow_id', 'last_error'] }));
  return service;
}
