import type { Request, Response, Router } from 'express';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { ApiError } from '../http/errors';
import type { Metrics } from '../http/metrics';
import { publicBase } from '../http/public-url';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject } from '../http/validation';
import type { MembershipLifecycles } from '../memberships/lifecycle';
import type { SettingsStore } from '../settings/store';
import type { TemporalGateway } from '../temporal/gateway';
import { registerSchema } from './schema';
import { RegisterService, type RegisterOutcome } from './service';

/** POST /register, GET /register (open or closed), GET /register/{workflow_id}. */
export function mountRegister(
  router: Router,
  registry: RouteRegistry,
  namespace: string,
  deps: { db: Db; settings: SettingsStore; temporal: TemporalGateway; metrics: Metrics; config: Config; lifecycles: MembershipLifecycles },
): RegisterService {
  const service = new RegisterService(deps.db, deps.settings, deps.temporal, deps.metrics, deps.config, deps.lifecycles);
  documentRegister(registry, namespace);

  const statusUrl = (req: Request, workflowId: string) => {
    return `${publicBase(req)}${req.baseUrl}/register/${workflowId}`;
  };
  const send = (req: Request, res: Response, out: RegisterOutcome) => {
    if (out.status === 200) {
      res.status(200).json(out.body);
      return;
    }
    const url = statusUrl(req, out.workflowId);
    res.setHeader('Location', url);
    res.setHeader('Retry-After', '1');
    res.status(202).json({ workflow_id: out.workflowId, status: 'running', status_url: url });
  };

  router.get('/register', async (_req, res) => {
    res.json({ registration_status: (await service.isOpen()) ? 'open' : 'closed' });
  });

  router.post('/register', async (req, res) => {
    if (!(await service.isOpen())) {
      throw new ApiError(403, 'wu_rest_registration_closed', 'Registration is closed on this network (setting enable_registration).');
    }
    const out = await service.register(bodyObject(req.body), req.get('idempotency-key') ?? undefined, req.log);
    send(req, res, out);
  });

  router.get('/register/:workflow', async (req, res) => {
    send(req, res, await service.status(String(req.params.workflow)));
  });
  return service;
}

/** The operations in the route index and the OpenAPI document. */
function documentRegister(registry: RouteRegistry, namespace: string): void {
  const tags = ['register'];
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
  const result = {
    type: 'object',
    required: ['customer', 'membership', 'payment', 'site'],
    properties: {
      customer: ref('Customer'),
      membership: ref('Membership'),
      payment: ref('Payment'),
      site: { oneOf: [ref('Site'), { type: 'object', required: ['id'], properties: { id: { const: 0 } }, additionalProperties: false }] },
    },
    additionalProperties: false,
  };
  const running = {
    type: 'object',
    required: ['workflow_id', 'status', 'status_url'],
    properties: { workflow_id: { type: 'string' }, status: { const: 'running' }, status_url: { type: 'string', format: 'uri' } },
    additionalProperties: false,
  };
  const accepted = {
    description: 'Still running after REGISTER_WAIT_SECONDS: poll status_url (also in Location).',
    schema: running,
    headers: { Location: { description: 'The status URL', schema: { type: 'string' } }, 'Retry-After': { description: 'Seconds', schema: { type: 'integer' } } },
  };
  registry.operation(namespace, 'GET', '/register', {
    summary: 'Whether registration is open (setting enable_registration)',
    tags,
    responses: { 200: { description: 'open or closed.', schema: { type: 'object', required: ['registration_status'], properties: { registration_status: { enum: ['open', 'closed'] } }, additionalProperties: false } } },
  });
  registry.operation(namespace, 'POST', '/register', {
    summary: 'One-call checkout: user, customer, membership, payment and site (one transaction, run by a durable Temporal workflow)',
    description:
      'Validated in full before anything starts; the records are written in one transaction and answered as soon as it commits. ' +
      'Send an Idempotency-Key header to make retries safe (same key and body: the first answer; ' +
      'same key, other body: 409 wu_rest_idempotency_key_reused; the body is compared without the password). No products: 400 invalid_cart; unknown customer_id: 400 customer_not_found; ' +
      'registration closed: 403 wu_rest_registration_closed; Temporal unreachable: 503 wu_rest_temporal_unavailable within TEMPORAL_CALL_TIMEOUT_MS (nothing is written); ' +
      'the database unreachable while writing: 503 wu_rest_registration_unavailable. A 503 is never the final answer of an Idempotency-Key: sending it again tries again. ' +
      'The customer: customer_id of an existing customer, or customer.user_id of a user that has no customer yet, or customer.username, email and password (not taken). ' +
      'An id of 0 or null (customer_id, customer.user_id, site.template_id) is none, as in the original: the same as leaving it out. ' +
      'products: ids or slugs of existing active products, exactly one of them a plan, all priced in one currency (currency, if given). ' +
      'site.site_url must be free on the network; site.template_id must be a site of type site_template. ' +
      'discount_code (any case; empty is none) must be a discount code that is active, within its dates, not used up, and for at least one of the products; ' +
      'it takes its value off the lines of the products it applies to (rounded per line to the currency\'s minor unit, never below zero), the payment records discount_code and discount_total, the membership discount_code (and its amount keeps the discount when the code applies to renewals); ' +
      'a registration written counts one use, one that is not written none. Each problem is a 400 naming the field.',
    tags,
    body: registerSchema,
    responses: { 200: { description: 'The records created, as their resources return them (site {"id":0} without a site).', schema: result }, 202: accepted },
  });
  registry.operation(namespace, 'GET', '/register/:workflow', {
    summary: 'Status of a registration by its workflow id',
    description: 'Read from the registration\'s row: 202 until its records are committed, then 200; a refused registration answers its error (400), one that could not be written its 503; an unknown id is 404 wu_rest_registration_not_found.',
    tags,
    responses: { 200: { description: 'Completed: the same body as the POST.', schema: result }, 202: accepted },
  });
}
