import type { Request, Response, Router } from 'express';
import { z } from 'zod';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { publicBase } from '../http/public-url';
import { parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, fields, parseOrThrow } from '../http/validation';
import type { TemporalGateway } from '../temporal/gateway';
import { TenantService, type TenantOutcome } from './service';
import { CHECK_NAMES, CHECK_STATUSES, TENANT_STATES } from './store';

export const bootstrapSchema = z.object({
  database_host: fields.text(100, 1).optional().describe('Name of a configured tenant database host (TENANT_DATABASE_HOSTS; ask the operator); default: the least loaded. Another name: 400.'),
});

/** POST bootstrap, GET migration-status, POST verify, DELETE: isolated ("sovereign") tenants. */
export function mountTenants(router: Router, registry: RouteRegistry, namespace: string, deps: { db: Db; temporal: TemporalGateway; config: Config }): TenantService {
  const service = new TenantService(deps.db, deps.temporal, deps.config);
  documentTenants(registry, namespace);

  const statusUrl = (req: Request, siteId: number) => {
    return `${publicBase(req)}${req.baseUrl}/tenants/${siteId}/migration-status`;
  };
  const send = (req: Request, res: Response, siteId: number, out: TenantOutcome) => {
    const url = statusUrl(req, siteId);
    if (out.poll) {
      res.setHeader('Location', url);
      res.setHeader('Retry-After', '1');
    }
    res.status(out.status).json(out.poll || 'checks' in out.body ? { ...out.body, status_url: url } : out.body);
  };

  router.post('/tenants/:site_id/bootstrap', async (req, res) => {
    const siteId = parseId(req, 'site', 'site_id');
    const body = parseOrThrow(bootstrapSchema, bodyObject(req.body));
    send(req, res, siteId, await service.bootstrap(siteId, body.database_host, req.log));
  });
  router.get('/tenants/:site_id/migration-status', async (req, res) => {
    const siteId = parseId(req, 'site', 'site_id');
    res.json(await service.status(siteId));
  });
  router.post('/tenants/:site_id/verify', async (req, res) => {
    const siteId = parseId(req, 'site', 'site_id');
    send(req, res, siteId, await service.verify(siteId, req.log));
  });
  router.delete('/tenants/:site_id', async (req, res) => {
    const siteId = parseId(req, 'site', 'site_id');
    send(req, res, siteId, await service.teardown(siteId, req.log));
  });
  return service;
}

const checkSchema = {
  type: 'object',
  required: ['status', 'message', 'checked_at'],
  properties: {
    status: { enum: [...CHECK_STATUSES] },
    message: { type: 'string', description: 'What passed, or what failed and how to fix it.' },
    checked_at: { type: ['string', 'null'], format: 'date-time' },
  },
  additionalProperties: false,
};

export const tenantStatusSchema = {
  type: 'object',
  required: ['site_id', 'isolation_model', 'database_host', 'verification', 'ready', 'checks', 'state', 'step', 'workflow_id'],
  properties: {
    site_id: { type: 'integer' },
    isolation_model: { const: 'sovereign' },
    database_host: { type: ['string', 'null'], description: 'The database host the tenant is bound to (null until the registry step binds one).' },
    verification: {
      type: 'object',
      description: 'Result of each check: pending, running, passed or failed.',
      required: [...CHECK_NAMES],
      properties: Object.fromEntries(CHECK_NAMES.map((n) => [n, { enum: [...CHECK_STATUSES] }])),
      additionalProperties: false,
    },
    ready: { type: 'boolean', description: 'True only when all three checks passed; false is a pre-launch blocker.' },
    checks: {
      type: 'object',
      description: 'Each check with its message.',
      required: [...CHECK_NAMES],
      properties: Object.fromEntries(CHECK_NAMES.map((n) => [n, checkSchema])),
      additionalProperties: false,
    },
    state: { enum: TENANT_STATES.filter((s) => s !== 'torn_down') },
    step: { type: ['string', 'null'], description: 'The workflow step in progress (or where it stopped).' },
    workflow_id: { type: ['string', 'null'], description: 'The latest tenant workflow (search it in the Temporal UI).' },
    database_name: { type: ['string', 'null'] },
    hostname: { type: ['string', 'null'], description: 'Host name routed to the tenant database.' },
    path: { type: ['string', 'null'] },
    error: {
      description: 'Why the last operation stopped, when it did.',
      oneOf: [
        { type: 'null' },
        {
          type: 'object',
          required: ['operation', 'step', 'message', 'at'],
          properties: { operation: { type: 'string' }, step: { type: ['string', 'null'] }, message: { type: 'string' }, at: { type: 'string' } },
          additionalProperties: false,
        },
      ],
    },
    date_created: { type: ['string', 'null'], format: 'date-time' },
    date_modified: { type: ['string', 'null'], format: 'date-time' },
  },
  additionalProperties: false,
};

function documentTenants(registry: RouteRegistry, namespace: string): void {
  const tags = ['tenants'];
  const status = registry.component('TenantMigrationStatus', tenantStatusSchema);
  const reply = {
    type: 'object',
    required: [...tenantStatusSchema.required, 'message', 'status_url'],
    properties: { ...tenantStatusSchema.properties, message: { type: 'string' }, status_url: { type: 'string', format: 'uri' } },
    additionalProperties: false,
  };
  const pollHeaders = { Location: { description: 'The status URL', schema: { type: 'string' } }, 'Retry-After': { description: 'Seconds', schema: { type: 'integer' } } };
  registry.operation(namespace, 'POST', '/tenants/:site_id/bootstrap', {
    summary: 'Isolate a site into its own database (a Temporal workflow)',
    description:
      'Registry entry, database and role, schema, users, data push, files and routing, then verification. Answers 202 with the status URL; ' +
      'a second call while it runs joins it; an already ready tenant answers 200 and changes nothing. A failed or not ready tenant is bootstrapped again ' +
      '(finished steps are skipped). Unknown site: 404 wu_rest_site_invalid_id; unknown database_host: 400; verify or teardown running: 409 wu_rest_tenant_busy.',
    tags,
    body: bootstrapSchema,
    responses: {
      200: { description: 'Already isolated and verified: nothing was done.', schema: reply },
      202: { description: 'Bootstrap running: poll status_url (also in Location).', schema: reply, headers: pollHeaders },
    },
  });
  registry.operation(namespace, 'GET', '/tenants/:site_id/migration-status', {
    summary: 'The tenant migration status: binding, the three checks and readiness',
    description: '404 wu_rest_tenant_not_found when the site is not (or no longer) an isolated tenant.',
    tags,
    responses: { 200: { description: 'The status.', schema: status } },
  });
  registry.operation(namespace, 'POST', '/tenants/:site_id/verify', {
    summary: 'Run the verification checks again (a Temporal workflow)',
    description:
      'Changes nothing but the verification results. Waits up to TENANT_WAIT_SECONDS: 200 with the results, else 202 with the status URL. ' +
      '409 wu_rest_tenant_busy while bootstrap or teardown runs.',
    tags,
    responses: {
      200: { description: 'Verification finished; ready says whether all checks passed.', schema: reply },
      202: { description: 'Verification running: poll status_url.', schema: reply, headers: pollHeaders },
    },
  });
  registry.operation(namespace, 'DELETE', '/tenants/:site_id', {
    summary: 'Tear the tenant down (a Temporal workflow)',
    description:
      "The tenant's data goes back to the shared tables, then credentials, role and grants, database, files and route are removed and the registry entry is marked torn down. " +
      'Refused with 409 wu_rest_tenant_busy while bootstrap or verification runs. Waits up to TENANT_WAIT_SECONDS: 200 when gone, else 202. ' +
      'A teardown that gave up answers 503 wu_rest_tenant_teardown_incomplete; DELETE again resumes it.',
    tags,
    responses: {
      200: {
        description: 'Torn down; migration-status now answers 404.',
        schema: {
          type: 'object',
          required: ['site_id', 'deleted', 'state', 'message'],
          properties: { site_id: { type: 'integer' }, deleted: { const: true }, state: { const: 'torn_down' }, message: { type: 'string' } },
          additionalProperties: false,
        },
      },
      202: { description: 'Teardown running: poll status_url until it answers 404.', schema: reply, headers: pollHeaders },
    },
  });
}
