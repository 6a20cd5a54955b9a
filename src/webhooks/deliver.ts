import type { Knex } from 'knex';
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

interface DeliveryRow {
  id: string;
  status: string;
  webhook_id: string;
  active: boolean;
  webhook_url: string;
  secret: string;
  event_id: string;
  slug: string;
  object_type: string;
  object_id: string | null;
  payload: Record<string, unknown>;
  date_created: Date;
}

/** What the receiver did with one attempt. */
interface Sent {
  row: DeliveryRow;
  status: number | null;
  error: OutboundError | null;
  answer: string;
  latency: number;
}

/** Signs the delivery's body (Standard Webhooks) and POSTs it; a failure is part of the answer. */
async function send(settings: DeliverySettings, row: DeliveryRow): Promise<Sent> {
  const body = webhookBody({ id: row.event_id, slug: row.slug, object_type: row.object_type, object_id: row.object_id, payload: row.payload, date_created: row.date_created });
  const started = Date.now();
  try {
    const res = await outboundFetch(settings.policy, row.webhook_url, {
      method: 'POST',
      headers: signedHeaders(row.secret, messageId(Number(row.id)), Math.floor(started / 1000), body),
      body,
      maxBytes: MAX_ANSWER_BYTES,
      timeoutMs: settings.timeoutMs,
    });
    return { row, status: res.status, error: null, answer: excerpt(res.body), latency: Date.now() - started };
  } catch (err) {
    const error = err instanceof OutboundError ? err : new OutboundError('connect', 'the request failed.');
    return { row, status: null, error, answer: '', latency: Date.now() - started };
  }
}

const delivered = (s: Sent) => s.status !== null && s.status >= 200 && s.status < 300;

/**
 * One attempt of each of these deliveries (of one webhook, in practice; each of a different
 * object): reads the deliveries, their events and webhooks in one query (the secret is read
 * here, by the webhook's id: it never travels through a workflow), signs each body (Standard
 * Webhooks), POSTs them concurrently, and logs every attempt with its effects in one
 * transaction. Per delivery:
 * - 2xx: delivered, the webhook's event_count grows by one (the first time the event is);
 * - 410: the delivery failed and the webhook is disabled (webhook_disabled);
 * - a refused address or URL: failed (the policy will not change its mind);
 * - anything else: date_last_failed is set, and `retry`; a webhook failing for more than
 *   disableAfterDays is disabled instead.
 * A delivery already delivered (a retry of an attempt whose answer was lost) is not sent again,
 * nor one that failed already; one whose webhook is off or gone fails without a request. Answers the outcomes in the order
 * of the ids.
 */
export async function attemptDeliveries(db: Db, settings: DeliverySettings, deliveryIds: number[]): Promise<AttemptOutcome[]> {
  const rows: DeliveryRow[] = await db('webhook_deliveries as d')
    .join('webhooks as w', 'w.id', 'd.webhook_id')
    .join('events as e', 'e.id', 'd.event_id')
    .whereIn('d.id', deliveryIds)
    .select('d.id', 'd.status', 'd.webhook_id', 'w.active', 'w.webhook_url', 'w.secret', 'e.id as event_id', 'e.slug', 'e.object_type', 'e.object_id', 'e.payload', 'e.date_created');
  const byId = new Map(rows.map((r) => [Number(r.id), r]));
  const outcomes = new Map<number, AttemptOutcome>();
  const inactive: number[] = [];
  const toSend: DeliveryRow[] = [];
  for (const id of deliveryIds) {
    const row = byId.get(id);
    if (!row) outcomes.set(id, 'failed');
    else if (row.status === 'delivered') outcomes.set(id, 'delivered');
    // Failed already (given up, refused, its webhook disabled): a late signal or a shard's read
    // of before that does not send it again (a retry or a replay makes it pending first).
    else if (row.status === 'failed') outcomes.set(id, 'failed');
    else if (!row.active) {
      inactive.push(id);
      outcomes.set(id, 'failed');
    } else toSend.push(row);
  }
  if (inactive.length) {
    await db('webhook_deliveries').whereIn('id', inactive).where({ status: 'pending' }).update({ status: 'failed', last_error: 'the webhook is not active', date_modified: db.fn.now() });
  }
  if (toSend.length === 0) return deliveryIds.map((id) => outcomes.get(id)!);
  const sent = await Promise.all(toSend.map((row) => send(settings, row)));

  await db.transaction(async (trx) => {
    await trx('webhook_delivery_attempts').insert(
      sent.map((s) => ({ delivery_id: s.row.id, status_code: s.status, error: s.error?.kind ?? null, latency_ms: s.latency, response_excerpt: s.answer })),
    );
    // The deliveries that succeeded, in one statement per webhook: delivered, and event_count
    // grown by those delivered for the first time (a redelivery, by retry or replay, is not
    // another event).
    const ok = sent.filter(delivered);
    for (const webhookId of new Set(ok.map((s) => Number(s.row.webhook_id)))) {
      const ids = ok.filter((s) => Number(s.row.webhook_id) === webhookId).map((s) => Number(s.row.id));
      const { rows: changed } = await trx.raw(
        `UPDATE webhook_deliveries d SET status = 'delivered', attempts = d.attempts + 1, last_error = NULL, date_delivered = now(), date_modified = now()
           FROM (SELECT id, date_delivered FROM webhook_deliveries WHERE id = ANY(?::bigint[]) AND status <> 'delivered' ORDER BY id FOR UPDATE) before
          WHERE d.id = before.id
          RETURNING before.date_delivered IS NULL AS first`,
        [ids],
      );
      const first = (changed as { first: boolean }[]).filter((r) => r.first).length;
      await trx('webhooks')
        .where({ id: webhookId })
        .update({ ...(first ? { event_count: trx.raw('event_count + ?', [first]) } : {}), failing_since: null });
    }
    for (const s of ok) outcomes.set(Number(s.row.id), 'delivered');
    for (const s of sent.filter((x) => !delivered(x))) outcomes.set(Number(s.row.id), await recordFailure(trx, settings, s));
  });
  return deliveryIds.map((id) => outcomes.get(id)!);
}

/** One attempt of one delivery (attemptDeliveries of one). */
export async function attemptDelivery(db: Db, settings: DeliverySettings, deliveryId: number): Promise<AttemptOutcome> {
  const [outcome] = await attemptDeliveries(db, settings, [deliveryId]);
  return outcome;
}

/** The effects of a failed attempt, in the attempts' transaction. */
async function recordFailure(trx: Knex.Transaction, settings: DeliverySettings, s: Sent): Promise<AttemptOutcome> {
  const deliveryId = Number(s.row.id);
  const webhookId = Number(s.row.webhook_id);
  const outcome: AttemptOutcome = s.status === 410 ? 'disabled' : s.error && FINAL_ERRORS.has(s.error.kind) ? 'failed' : 'retry';
  const lastError = s.error ? `${s.error.kind}: ${s.error.message.replace(/OUTBOUND_ALLOWED_HOSTS/g, 'WEBHOOK_ALLOWED_HOSTS')}` : `HTTP ${s.status}`;
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
}

/** The retries ran out (the workflow's window): the delivery failed. */
export async function giveUpDelivery(db: Db, deliveryId: number, retryHours: number): Promise<void> {
  await db('webhook_deliveries')
    .where({ id: deliveryId, status: 'pending' })
    .update({ status: 'failed', last_error: db.raw(`coalesce(last_error, '') || ?`, [` (gave up: no success within ${retryHours} hours)`]), date_modified: db.fn.now() });
}
