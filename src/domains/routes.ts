import type { Router } from 'express';
import { z } from 'zod';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { tableResource, type TableService } from '../db/table-service';
import { notFoundItem } from '../http/errors';
import { mountResource, parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, parseOrThrow } from '../http/validation';
import type { SettingsStore } from '../settings/store';
import type { TemporalGateway } from '../temporal/gateway';
import { DomainChecks } from './checks';
import { domainExamples } from './examples';
import { createDomainSchema, updateDomainSchema } from './schema';
import { createDomainService, retryDomainCheck } from './service';
import { MappingTarget } from './target';

const dnsRecordSchema = z
  .strictObject({
    type: z.enum(['A', 'AAAA', 'CNAME']),
    name: z.string(),
    value: z.string(),
  })
  .describe('The DNS record the domain needs: an A/AAAA record of DOMAIN_MAPPING_TARGET when that is an IP address, else a CNAME to it (or to the setting network_domain).');

export function mountDomains(
  router: Router,
  registry: RouteRegistry,
  namespace: string,
  db: Db,
  temporal: TemporalGateway,
  config: Config,
  settings: SettingsStore,
): { service: TableService; checks: DomainChecks } {
  const checks = new DomainChecks(db, temporal, config);
  const service = createDomainService(db, checks, new MappingTarget(config.DOMAIN_MAPPING_TARGET, settings));
  const resource = tableResource(service, service.cfg, {
    plural: 'domains',
    createSchema: createDomainSchema,
    updateSchema: updateDomainSchema,
    nullable: ['workflow_id', 'last_error'],
    extra: { dns_record: dnsRecordSchema },
    links: {
      site: { field: 'blog_id', model: 'site', embeddable: true },
      customer: { field: 'customer_id', model: 'customer', embeddable: true },
    },
    examples: domainExamples,
    description:
      'A domain in checking-dns is checked by a workflow: last_error says what failed (the record missing or pointing elsewhere, or the DNS resolver not answering), next_check_at when it tries again; POST …/domains/{id}/retry tries at once. ' +
      "The site blog_id names must belong to customer_id (on create without customer_id, the site's customer is taken); primary_domain needs blog_id.",
  });
  mountResource(router, registry, namespace, resource);

  for (const base of ['/domains', '/domain']) {
    router.post(`${base}/:id/retry`, async (req, res) => {
      const id = parseId(req, 'domain');
      parseOrThrow(z.strictObject({}), bodyObject(req.body));
      const rec = await retryDomainCheck(service, id);
      if (!rec) throw notFoundItem('domain');
      res.json(rec);
    });
    registry.operation(namespace, 'POST', `${base}/:id/retry`, {
      summary: `Check a domain again now${base === '/domain' ? ' (singular path)' : ''}`,
      description:
        'From the step that failed (failed: DNS, ssl-failed: the certificate) or the one waiting for its next try; the tries start over. Sending that stage with PUT/PATCH does the same. Other stages: 409 wu_rest_domain_not_retryable.',
      tags: ['domains'],
      body: z.strictObject({}),
      responses: { 200: { description: 'The domain, its check restarted.', schema: registry.component('Domain', resource.recordSchema) } },
    });
  }
  return { service, checks };
}
