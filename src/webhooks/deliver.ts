import type { Db } from '../db/knex';
import { OutboundError, outboundFetch, type OutboundPolicy } from '../infra/outbound-http';
import { disableWebhook } from './service';
import { messageId, signedHeaders, webhookBody } from './signing';

/** What one attempt came to: the workflow retries `retry` only. */
export type AttemptOutcome = 'delivered' | 'retry' | 'failed' | 'disabled';

export interface DeliverySettings {
  policy: OutboundPolicy;
  timeoutMs: number;
  /** Days of failed attempts after which the webhook is disabled. */
  disableAfterDays: number;
}

/** How much of a receiver's answer is kept in the log. */
const EXCERPT_BYTES = 1024;
/** The largest answer read (a bigger one is a failed attempt). */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** The first 1 KB of an answer, as text PostgreSQL can store. */
function excerpt(body: Buffer): string {
  return body.subarray(0, EXCERPT_BYTES).toString('utf8').replace(/\u0000/g, '');
}

/** Errors of the policy itself: asking again cannot succeed. */
const FINAL_ERRORS = new Set(['invalid_url', 'refused', 'redirect']);

/**
 * One attempt of one delivery: reads the delivery, its event and its webhook (the secret is read
 * here, by the webhook's id: it never travels through a workflow), signs the body (Standard
 * Webhooks), POSTs it, and logs the attempt with its effects in one transaction:
 * - 2xx: delivered, the webhook's event_count grows by one (the first time the event is);
 * - 410: the delivery failed and the webhook is disabled (webhook_disabled);
 * - a refused address or URL: failed (the policy will not change its mind);
 * - anything else: date_last_failed is set, and `retry`; a webhook failing for more than
 *   disableAfterDays is disabled instead.
 * A delivery already delivered (a retry of an attempt whose answer was lost) is not sent again;
 * one whose webhook is off or gone fails without a request.
 */
export async function attemptDelivery(db: Db, settings: DeliverySettings, deliveryId: number): Promise<AttemptOutcome> {
  const row = await db('webhook_deliveries as d')
    .join('webhooks as w', 'w.id', 'd.webhook_id')
    .join('events as e', 'e.id', 'd.event_id')
    .where('d.id', deliveryId)
    .first('d.id', 'd.status', 'd.webhook_id', 'w.active', 'w.webhook_url', 'w.secret', 'e.id as event_id', 'e.slug', 'e.object_type', 'e.object_id', 'e.payload', 'e.date_created');
  if (!row) return 'failed';
  if (row.status === 'delivered') return 'delivered';
  if (!row.active) {
    await db('webhook_deliveries').where({ id: deliveryId, status: 'pending' }).update({ status: 'failed', last_error: 'the webhook is not active', date_modified: db.fn.now() });
    return 'failed';
  }
  const body = webhookBody({ id: row.event_id, slug: row.slug, object_type: row.object_type, object_id: row.object_id, payload: row.payload, date_created: row.date_created });
  const id = messageId(deliveryId);
  const started = Date.now();
  let status: number | null = null;
  let error: OutboundError | null = null;
  let answer = '';
  try {
    const res = await outboundFetch(settings.policy, row.webhook_url, {
      method: 'POST',
      headers: signedHeaders(row.secret, id, Math.floor(started / 1000), body),
      body,
      maxBytes: MAX_ANSWER_BYTES,
      timeoutMs: settings.timeoutMs,
    });
    status = res.status;
    answer = excerpt(res.body);
  } catch (err) {
    error = err instanceof OutboundError ? err : new OutboundError('connect', 'the request failed.');
  }
  const latency = Date.now() - started;
  const ok = status !== null && status >= 200 && status < 300;
  const outcome: AttemptOutcome = ok ? 'delivered' : status === 410 ? 'disabled' : error && FINAL_ERRORS.has(error.kind) ? 'failed' : 'retry';
  const lastError = ok ? null : error ? `${error.kind}: ${error.message.replace(/OUTBOUND_ALLOWED_HOSTS/g, 'WEBHOOK_ALLOWED_HOSTS')}` : `HTTP ${status}`;

  return db.transaction(async (trx) => {
    await trx('webhook_delivery_attempts').insert({ delivery_id: deliveryId, status_code: status, error: error?.kind ?? null, latency_ms: latency, response_excerpt: answer });
    const webhookId = Number(row.webhook_id);
    if (ok) {
      const before = await trx('webhook_deliveries').where({ id: deliveryId }).forUpdate().first('status', 'date_delivered');
      if (!before || before.status === 'delivered') return 'delivered';
      await trx('webhook_deliveries')
        .where({ id: deliveryId })
        .update({ status: 'delivered', attempts: trx.raw('attempts + 1'), last_error: null, date_delivered: trx.fn.now(), date_modified: trx.fn.now() });
      // event_count counts events: a redelivery (retry, replay) of one delivered before is not another.
      await trx('webhooks')
        .where({ id: webhookId })
        .update({ ...(before.date_delivered ? {} : { event_count: trx.raw('event_count + 1') }), failing_since: null });
      return 'delivered';
    }
    await trx('webhook_deliveries')
      .where({ id: deliveryId })
      .update({ status: outcome === 'retry' ? 'pending' : 'failed', attempts: trx.raw('attempts + 1'), last_error: lastError, date_modified: trx.fn.now() });
    const [webhook] = await trx('webhooks')
      .where({ id: webhookId })
      .update({ date_last_failed: trx.fn.now(), failing_since: trx.raw('coalesce(failing_since, now())') })
      .returning(['failing_since']);
    if (outcome === 'disabled') {
      await disableWebhook(trx, webhookId);
      return 'disabled';
    }
    if (webhook && Date.now() - new Date(webhook.failing_since).getTime() > settings.disableAfterDays * 86_400_000) {
      await disableWebhook(trx, webhookId);
      await trx('webhook_deliveries').where({ id: deliveryId }).update({ status: 'failed' });
      return 'disabled';
    }
    return outcome;
  });
}

/** The retries ran out (the workflow's window): the delivery failed. */
export async function giveUpDelivery(db: Db, deliveryId: number, retryHours: number): Promise<void> {
  await db('webhook_deliveries')
    .where({ id: deliveryId, status: 'pending' })
    .update({ status: 'failed', last_error: db.raw(`coalesce(last_error, '') || ?`, [` (gave up: no success within ${retryHours} hours)`]), date_modified: db.fn.now() });
}
