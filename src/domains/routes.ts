import type { Router } from 'express';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import type { Metrics } from '../http/metrics';
import { recordSchema } from '../db/table-service';
import { mountResource } from '../http/resource';
import type { RouteRegistry } from '../http/routes';
import type { TemporalHandle } from '../temporal/client';
import { DomainChecks } from './checks';
import { createDomainSchema, updateDomainSchema } from './schema';
import { DomainService, domainListSpec } from './store';

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
  mountResource(router, registry, namespace, {
    model: 'domain',
    plural: 'domains',
    listSpec: domainListSpec,
    createSchema: createDomainSchema,
    recordSchema: recordSchema(service.table.cfg, createDomainSchema, ['workflow_id', 'last_error']),
    updateSchema: updateDomainSchema,
    service,
  });
  return service;
}
