import crypto from 'node:crypto';
import type { Router } from 'express';
import { z } from 'zod';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { tableResource } from '../db/table-service';
import { toTimestamp } from '../db/timestamps';
import { invalidParams, notFoundItem } from '../http/errors';
import { mountResource, parseId } from '../http/resource';
import type { RouteRegistry } from '../http/route-registry';
import { bodyObject, parseOrThrow } from '../http/validation';
import { OutboundError, outboundFetch, OutboundPolicy } from '../infra/outbound-http';
import { replayDeliveries, retryDelivery } from './dispatch';
import { webhookExamples } from './examples';
import { createWebhookSchema, replaySchema, updateWebhookSchema } from './schema';
import { createWebhookService } from './service';
import { signedHeaders } from './signing';

/** Events a replay may cover at most. */
export const REPLAY_LIMIT = 10_000;
const EXCERPT_BYTES = 1024;

const attemptRecord = z.strictObject({
  date: z.iso.datetime({ offset: true }),
  status_code: z.int().nullable().describe("The receiver's HTTP status; null when there was no answer."),
  error: z.string().nullable().describe('Why there was no answer: timeout, connect, dns, refused, redirect, too_large, invalid_url.'),
  latency_ms: z.int(),
  response: z.string().describe("The answer's first 1 KB."),
});

const deliveryRecord = z.strictObject({
  id: z.int(),
  webhook_id: z.int(),
  message_id: z.string().describe('The webhook-id header of every attempt: msg_<id>.'),
  event_id: z.int(),
  event: z.string().describe("The event's slug."),
  object_type: z.string(),
  object_id: z.int().nullable(),
  status: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.int(),
  last_error: z.string().nullable(),
  date_created: z.iso.datetime({ offset: true }),
  date_delivered: z.iso.datetime({ offset: true }).nullable(),
  attempt_log: z.array(attemptRecord).describe('Every attempt, newest first (the 20 latest).'),
});

const pageQuery = z.strictObject({
  page: z.coerce.number().int().min(1).max(100_000).default(1),
  per_page: z.coerce.number().int().min(1).max(100).default(20),
});

const ATTEMPTS_SHOWN = 20;

/** A page of a webhook's deliveries with their attempts, newest first. */
async function deliveriesPage(db: Db, webhookId: number, page: number, perPage: number, only?: number) {
  const [{ n }] = await db('webhook_deliveries').where({ webhook_id: webhookId }).count({ n: '*' });
  const query = db('webhook_deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where('d.webhook_id', webhookId)
    .orderBy('d.id', 'desc')
    .limit(perPage)
    .offset((page - 1) * perPage)
    .select('d.*', 'e.slug');
  if (only !== undefined) query.andWhere('d.id', only);
  const rows = await query;
  const ids = rows.map((r) => r.id);
  const attempts = ids.length
    ? (
        await db.raw(
          `SELECT * FROM (SELECT a.*, row_number() OVER (PARTITION BY delivery_id ORDER BY id DESC) AS k FROM webhook_delivery_attempts a WHERE delivery_id = ANY(?::bigint[])) x WHERE k <= ? ORDER BY id DESC`,
          [ids, ATTEMPTS_SHOWN],
        )
      ).rows
    : [];
  const items = rows.map((r) => ({
    id: Number(r.id),
    webhook_id: Number(r.webhook_id),
    message_id: `msg_${r.id}`,
    event_id: Number(r.event_id),
    event: r.slug,
    object_type: r.object_type,
    object_id: r.object_id === null ? null : Number(r.object_id),
    status: r.status,
    attempts: Number(r.attempts),
    last_error: r.last_error,
    date_created: new Date(r.date_created).toISOString(),
    date_delivered: r.date_delivered ? new Date(r.date_delivered).toISOString() : null,
    attempt_log: attempts
      .filter((a: any) => String(a.delivery_id) === String(r.id))
      .map((a: any) => ({ date: new Date(a.date_created).toISOString(), status_code: a.status_code, error: a.error, latency_ms: a.latency_ms, response: a.response_excerpt })),
  }));
  return { total: Number(n), items };
}

/**
 * /webhooks and the original's singular /webhook through the shared resource machinery, and
 * their actions: rotate-secret, deliveries (the log), test (a ping now), retry of a delivery,
 * replay of a time range.
 */
export function mountWebhooks(router: Router, registry: RouteRegistry, namespace: string, db: Db, config: Pick<Config, 'WEBHOOK_ALLOWED_HOSTS' | 'WEBHOOK_TIMEOUT_MS'>) {
  const service = createWebhookService(db);
  const resource = tableResource(service, service.cfg, {
    plural: 'webhooks',
    description:
      'Deliveries are POSTed as JSON { type, timestamp, data, event_id, object_type, object_id }, signed as Standard Webhooks say (webhook-id, webhook-timestamp, webhook-signature). ' +
      'secret (whsec_…) is generated on create and answered only then (and by rotate-secret); event_count and date_last_failed are kept by the deliveries and cannot be set.',
    createSchema: createWebhookSchema,
    updateSchema: updateWebhookSchema,
    extra: { secret: z.string().optional().describe('The signing secret: only in the create answer.') },
    examples: webhookExamples,
  });
  mountResource(router, registry, namespace, resource);
  const record = { $ref: '#/components/schemas/Webhook' };
  const policy = new OutboundPolicy(config.WEBHOOK_ALLOWED_HOSTS);
  const tags = ['webhooks'];

  const webhookOf = async (id: number) => {
    const row = await db('webhooks').where({ id }).first();
    if (!row) throw notFoundItem('webhook');
    return row;
  };

  for (const base of ['/webhooks', '/webhook']) {
    registry.operation(namespace, 'POST', `${base}/:id/rotate-secret`, {
      summary: 'Give the webhook a new signing secret',
      description: 'The old secret stops signing at once. The answer is the webhook with its new secret, shown this once.',
      tags,
      bodyRequired: false,
      body: z.strictObject({}),
      responses: { 200: { description: 'The webhook with its new secret.', schema: record } },
    });
    router.post(`${base}/:id/rotate-secret`, async (req, res) => {
      const id = parseId(req, 'webhook');
      parseOrThrow(z.strictObject({}), bodyObject(req.body));
      const rec = await service.rotateSecret(id);
      if (!rec) throw notFoundItem('webhook');
      res.json(rec);
    });

    registry.operation(namespace, 'GET', `${base}/:id/deliveries`, {
      summary: "The webhook's deliveries and their attempts, newest first",
      description: 'One delivery per event sent to the webhook; every attempt is logged (time, status or error, latency, the first 1 KB of the answer).',
      tags,
      query: [
        { name: 'page', description: 'Page number (from 1).', schema: { type: 'integer', minimum: 1, maximum: 100000, default: 1 } },
        { name: 'per_page', description: 'Deliveries per page (1 to 100).', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
      ],
      responses: {
        200: {
          description: 'A page of deliveries.',
          schema: { type: 'array', items: registry.component('WebhookDelivery', deliveryRecord) },
          headers: { 'X-WP-Total': { description: 'Number of deliveries.', schema: { type: 'integer' } }, 'X-WP-TotalPages': { description: 'Number of pages.', schema: { type: 'integer' } } },
        },
      },
    });
    router.get(`${base}/:id/deliveries`, async (req, res) => {
      const id = parseId(req, 'webhook');
      const q = req.query as Record<string, unknown>;
      const { page, per_page } = parseOrThrow(pageQuery, { ...(q.page !== undefined ? { page: q.page } : {}), ...(q.per_page !== undefined ? { per_page: q.per_page } : {}) });
      await webhookOf(id);
      const { total, items } = await deliveriesPage(db, id, page, per_page);
      res.setHeader('X-WP-Total', String(total));
      res.setHeader('X-WP-TotalPages', String(Math.ceil(total / per_page)));
      res.json(items);
    });

    registry.operation(namespace, 'POST', `${base}/:id/test`, {
      summary: 'Send a ping to the webhook now',
      description:
        'A signed POST of { type: "ping", timestamp, data: { webhook_id }, event_id: null, object_type: "webhook", object_id }, made at once (WEBHOOK_TIMEOUT_MS at most) and not retried nor logged as a delivery. ' +
        'The answer says what the receiver did: delivered is true for a 2xx.',
      tags,
      bodyRequired: false,
      body: z.strictObject({}),
      responses: {
        200: {
          description: 'What happened.',
          schema: z.strictObject({
            delivered: z.boolean(),
            message_id: z.string(),
            status_code: z.int().nullable(),
            error: z.string().nullable(),
            latency_ms: z.int(),
            response: z.string(),
          }),
        },
      },
    });
    router.post(`${base}/:id/test`, async (req, res) => {
      const id = parseId(req, 'webhook');
      parseOrThrow(z.strictObject({}), bodyObject(req.body));
      const webhook = await webhookOf(id);
      const messageId = `msg_ping_${crypto.randomBytes(8).toString('hex')}`;
      const body = JSON.stringify({ type: 'ping', timestamp: new Date().toISOString(), data: { webhook_id: id }, event_id: null, object_type: 'webhook', object_id: id });
      const started = Date.now();
      let status: number | null = null;
      let error: string | null = null;
      let response = '';
      try {
        const answer = await outboundFetch(policy, webhook.webhook_url, {
          method: 'POST',
          headers: signedHeaders(webhook.secret, messageId, Math.floor(started / 1000), body),
          body,
          maxBytes: 1024 * 1024,
          timeoutMs: config.WEBHOOK_TIMEOUT_MS,
        });
        status = answer.status;
        response = answer.body.subarray(0, EXCERPT_BYTES).toString('utf8');
      } catch (err) {
        error = err instanceof OutboundError ? err.kind : 'connect';
      }
      res.json({ delivered: status !== null && status >= 200 && status < 300, message_id: messageId, status_code: status, error, latency_ms: Date.now() - started, response });
    });

    registry.operation(namespace, 'POST', `${base}/:id/deliveries/:delivery_id/retry`, {
      summary: 'Deliver one delivery again',
      description: 'The delivery goes back to pending and is sent again (with the same webhook-id), through its workflow, in its object\'s order.',
      tags,
      bodyRequired: false,
      body: z.strictObject({}),
      responses: { 200: { description: 'The delivery, pending again.', schema: { $ref: '#/components/schemas/WebhookDelivery' } } },
    });
    router.post(`${base}/:id/deliveries/:delivery_id/retry`, async (req, res) => {
      const id = parseId(req, 'webhook');
      const deliveryId = parseId(req, 'webhook_delivery', 'delivery_id');
      parseOrThrow(z.strictObject({}), bodyObject(req.body));
      await webhookOf(id);
      if (!(await retryDelivery(db, id, deliveryId))) throw notFoundItem('webhook_delivery');
      res.json((await deliveriesPage(db, id, 1, 1, deliveryId)).items[0]);
    });

    registry.operation(namespace, 'POST', `${base}/:id/replay`, {
      summary: 'Deliver again what the webhook missed in a time range',
      description:
        `Every delivery of an event of [after, before) that did not succeed is sent again (same webhook-id), and every event of the range that the webhook wants and never got is delivered. At most ${REPLAY_LIMIT} events: a larger range is a 400 naming before, and changes nothing.`,
      tags,
      body: replaySchema,
      responses: {
        200: {
          description: 'How many deliveries were sent again, and how many were created.',
          schema: z.strictObject({ redelivered: z.int(), created: z.int() }),
        },
      },
    });
    router.post(`${base}/:id/replay`, async (req, res) => {
      const id = parseId(req, 'webhook');
      const { after, before } = parseOrThrow(replaySchema, bodyObject(req.body));
      const from = toTimestamp(after)!;
      const to = toTimestamp(before)!;
      if (!(to > from)) throw invalidParams({ before: 'before must be after after.' });
      const out = await replayDeliveries(db, id, from, to, REPLAY_LIMIT);
      if (!out) throw invalidParams({ before: `The range holds more than ${REPLAY_LIMIT} events: replay it in smaller ranges.` });
      res.json(out);
    });
  }
  return service;
}
