import type { Knex } from 'knex';
import { deliveriesSignal, webhookDelivery, type WebhookRetry } from '../../workflows/webhookDelivery';
import { DomainError } from '../db/domain-error';
import type { Db } from '../db/knex';
import { relayLoop } from '../db/listen';
import { notFoundItem } from '../http/errors';
import { eachLimited } from '../infra/each-limited';
import type { TemporalGateway } from '../temporal/gateway';
import { ALL_EVENTS } from './schema';

/** Notified by a trigger of migration 20261203000080 when events commit. */
export const EVENTS_CHANNEL = 'hostflow_events';
/** Notified by the API when deliveries are to be sent again (retry, replay). */
export const DELIVERIES_CHANNEL = 'hostflow_webhook_deliveries';

const EVENT_BATCH = 1000;
const SIGNAL_BATCH = 500;
/** The webhook relay's passes start at least this long after the previous one ended. */
const RELAY_MIN_GAP_MS = 100;
/** signalWithStart calls in flight at once (each (webhook, object) gets its own). */
const SIGNAL_CONCURRENCY = 16;

/**
 * The transaction id below which every transaction that may write events has ended: the oldest
 * one still running, leaving out those positively known to be in another database of the server
 * (so a long transaction elsewhere does not hold the webhooks back). The snapshot is taken in a
 * statement before the activity is read: a transaction of this database running at the
 * snapshot is never mistaken for another database's, and one that ended in between only makes
 * the horizon older (later events wait a pass longer).
 */
async function dispatchHorizon(trx: Knex.Transaction): Promise<string> {
  const {
    rows: [{ snapshot }],
  } = await trx.raw('SELECT pg_current_snapshot()::text AS snapshot');
  const {
    rows: [{ horizon }],
  } = await trx.raw(
    `SELECT coalesce(min(x), pg_snapshot_xmax(?::pg_snapshot))::text AS horizon
       FROM pg_snapshot_xip(?::pg_snapshot) x
      WHERE (x::text::bigint % 4294967296) NOT IN (
        SELECT backend_xid::text::bigint FROM pg_stat_activity
         WHERE backend_xid IS NOT NULL AND datid IS DISTINCT FROM (SELECT oid FROM pg_database WHERE datname = current_database()))`,
    [snapshot, snapshot],
  );
  return horizon;
}

/**
 * Hands the committed events after the cursor to the active webhooks that want them: one
 * webhook_deliveries row per (webhook, event), and the cursor moved, in one transaction that
 * holds the cursor's row (FOR UPDATE), so with N relays each event is dispatched once. Events
 * are read in (txid, id) order and only from transactions older than every one of this database
 * still running (dispatchHorizon): an event whose transaction commits late is not passed over. Answers how many events
 * it handled.
 */
export async function dispatchEvents(db: Db): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await db.transaction(async (trx) => {
      // Taken before the lock: an older horizon only holds events back a little longer.
      const horizon = await dispatchHorizon(trx);
      const cursor = await trx('webhook_dispatch').where({ id: 1 }).forUpdate().first();
      const events: { id: string; txid: string; slug: string }[] = (
        await trx.raw(
          `SELECT id, txid, slug FROM events WHERE (txid, id) > (?::xid8, ?) AND txid < ?::xid8 ORDER BY txid, id LIMIT ?`,
          [cursor.last_txid, cursor.last_event_id, horizon, EVENT_BATCH],
        )
      ).rows;
      if (events.length === 0) return 0;
      await insertDeliveries(trx, events.map((e) => Number(e.id)));
      const last = events[events.length - 1];
      await trx('webhook_dispatch').where({ id: 1 }).update({ last_txid: last.txid, last_event_id: last.id, date_modified: trx.fn.now() });
      return events.length;
    });
    total += n;
    if (n < EVENT_BATCH) return total;
  }
}

/** The deliveries of these events to every active webhook whose `event` matches (existing ones kept). */
async function insertDeliveries(trx: Knex.Transaction, eventIds: number[], webhookId?: number): Promise<number> {
  const res = await trx.raw(
    `INSERT INTO webhook_deliveries (webhook_id, event_id, object_type, object_id)
     SELECT w.id, e.id, e.object_type, e.object_id
       FROM events e JOIN webhooks w ON w.active AND (w.event = e.slug OR w.event = ?)
      WHERE e.id = ANY(?::bigint[]) ${webhookId === undefined ? '' : 'AND w.id = ?'}
      ORDER BY e.id, w.id
     ON CONFLICT (webhook_id, event_id) DO NOTHING`,
    webhookId === undefined ? [ALL_EVENTS, eventIds] : [ALL_EVENTS, eventIds, webhookId],
  );
  return res.rowCount ?? 0;
}

/**
 * Replay: the webhook's deliveries of events in [after, before) that did not succeed go back to
 * pending, and the events of the range without a delivery to it get one; all of them are then
 * sent by the relay (same webhook-id for the existing ones). At most `limit` events: more is
 * null (nothing changed).
 */
export async function replayDeliveries(db: Db, webhookId: number, after: Date, before: Date, limit: number): Promise<{ redelivered: number; created: number } | null> {
  return db.transaction(async (trx) => {
    const webhook = await trx('webhooks').where({ id: webhookId }).forUpdate().first('id', 'event');
    if (!webhook) throw notFoundItem('webhook');
    const matching = trx('events').where('date_created', '>=', after).andWhere('date_created', '<', before);
    if (webhook.event !== ALL_EVENTS) matching.andWhere('slug', webhook.event);
    const ids: number[] = (await matching.clone().orderBy('id').limit(limit + 1).pluck('id')).map(Number);
    if (ids.length > limit) return null;
    const redelivered = await trx('webhook_deliveries')
      .where({ webhook_id: webhookId })
      .whereIn('event_id', ids)
      .whereNot({ status: 'delivered' })
      .update({ status: 'pending', signalled_at: null, last_error: null, date_modified: trx.fn.now() });
    const created = ids.length ? await insertDeliveriesForWebhook(trx, ids, webhookId) : 0;
    await trx.raw('SELECT pg_notify(?, ?)', [DELIVERIES_CHANNEL, '']);
    return { redelivered, created };
  });
}

/** Replayed events go to the webhook even when it is off now (an operator asked for them). */
async function insertDeliveriesForWebhook(trx: Knex.Transaction, eventIds: number[], webhookId: number): Promise<number> {
  const res = await trx.raw(
    `INSERT INTO webhook_deliveries (webhook_id, event_id, object_type, object_id)
     SELECT ?, e.id, e.object_type, e.object_id FROM events e WHERE e.id = ANY(?::bigint[]) ORDER BY e.id
     ON CONFLICT (webhook_id, event_id) DO NOTHING`,
    [webhookId, eventIds],
  );
  return res.rowCount ?? 0;
}

/** Retry of one delivery: pending again, sent by the relay with the same webhook-id. False: no such delivery of this webhook. */
export async function retryDelivery(db: Db, webhookId: number, deliveryId: number): Promise<boolean> {
  return db.transaction(async (trx) => {
    const n = await trx('webhook_deliveries')
      .where({ id: deliveryId, webhook_id: webhookId })
      .update({ status: 'pending', signalled_at: null, last_error: null, date_modified: trx.fn.now() });
    if (n) await trx.raw('SELECT pg_notify(?, ?)', [DELIVERIES_CHANNEL, '']);
    return n > 0;
  });
}

interface Unsignalled {
  id: string;
  webhook_id: string;
  event_id: string;
  object_type: string;
  object_id: string | null;
}

/**
 * Tells the delivery workflows of their pending deliveries not yet signalled: one
 * signalWithStart per (webhook, object), carrying the ids in event order. A signal repeated
 * (two relays, a lost answer) is harmless: the workflow keeps one of each delivery and the
 * activity does not send a delivered one again.
 */
export async function signalDeliveries(db: Db, temporal: TemporalGateway, retry: WebhookRetry, idleMs?: number): Promise<number> {
  const rows: Unsignalled[] = await db('webhook_deliveries').whereNull('signalled_at').where({ status: 'pending' }).orderBy('id').limit(SIGNAL_BATCH).select('id', 'webhook_id', 'event_id', 'object_type', 'object_id');
  const groups = new Map<string, Unsignalled[]>();
  for (const r of rows) {
    const key = `${r.webhook_id}|${r.object_type}|${r.object_id ?? ''}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  // The workflows of different objects are independent: signalled a few at a time, so a burst of
  // new objects is not one Temporal round trip after another.
  await eachLimited([...groups.values()], SIGNAL_CONCURRENCY, async (group) => {
    const first = group[0];
    const objectId = first.object_id === null ? null : Number(first.object_id);
    await temporal.signalWithStart(
      webhookDelivery,
      {
        workflowId: await temporal.ids.build('webhook', first.webhook_id, first.object_type, objectId ?? 'none'),
        args: [{ webhookId: Number(first.webhook_id), objectType: first.object_type, objectId, retry, ...(idleMs !== undefined ? { idleMs } : {}) }],
        summary: `Webhook ${first.webhook_id} deliveries, ${first.object_type} ${objectId ?? ''}`.trim(),
      },
      deliveriesSignal,
      [group.map((d) => ({ deliveryId: Number(d.id), eventId: Number(d.event_id) }))],
      (detail) => new DomainError('unavailable', 'temporal_unavailable', `webhook relay: ${detail ?? 'Temporal unreachable'}`),
    );
    await db('webhook_deliveries').whereIn('id', group.map((d) => d.id)).whereNull('signalled_at').update({ signalled_at: db.fn.now() });
  });
  return rows.length;
}

export interface WebhookRelay {
  /** One pass now (tests, and the timers): events dispatched, deliveries signalled. */
  sweep(): Promise<{ dispatched: number; signalled: number }>;
  stop(): Promise<void>;
}

/**
 * The webhook relay, beside every worker: dispatches new events to deliveries, then starts or
 * signals their delivery workflows. Woken by NOTIFY (events committed, deliveries to send
 * again), and by a sweep every `intervalMs` (what a lost listener missed, and events held back
 * behind a transaction that was still running).
 */
export function startWebhookRelay(opts: {
  db: Db;
  temporal: TemporalGateway;
  retry: WebhookRetry;
  intervalMs?: number;
  /** How long a delivery workflow without deliveries waits for more before it ends (tests: short). */
  idleMs?: number;
}): WebhookRelay {
  const { db } = opts;
  const pass = async () => {
    const dispatched = await dispatchEvents(db);
    const signalled = await signalDeliveries(db, opts.temporal, opts.retry, opts.idleMs);
    return [{ dispatched, signalled }];
  };
  // Every committed event wakes it: passes at least 100 ms apart, so a stream of writes (most
  // of them matching no webhook) costs a few passes a second, not one per commit.
  const loop = relayLoop({ db, name: 'webhook-relay', channels: [EVENTS_CHANNEL, DELIVERIES_CHANNEL], intervalMs: opts.intervalMs ?? 2000, pass, minGapMs: RELAY_MIN_GAP_MS });
  return {
    sweep: async () => (await loop.sweep()).reduce((a, b) => ({ dispatched: a.dispatched + b.dispatched, signalled: a.signalled + b.signalled })),
    stop: () => loop.stop(),
  };
}
