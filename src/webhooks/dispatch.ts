import type { Knex } from 'knex';
import type { WebhookRetry } from '../../workflows/webhookDelivery';
import { shardDeliveriesSignal, webhookShard, type ShardDelivery } from '../../workflows/webhookShard';
import { DomainError } from '../db/domain-error';
import type { Db } from '../db/knex';
import { listen, relayLoop } from '../db/listen';
import { preparedRows } from '../db/prepared';
import { notFoundItem } from '../http/errors';
import { eachLimited } from '../infra/each-limited';
import type { TemporalGateway } from '../temporal/gateway';
import { ALL_EVENTS } from './schema';

/** Notified by the API when deliveries are to be sent again (retry, replay). */
export const DELIVERIES_CHANNEL = 'hostflow_webhook_deliveries';

const EVENT_BATCH = 1000;
const SIGNAL_BATCH = 500;
/** How often the webhook relay looks for new events (and how long an event waits for it at most, besides the pass). */
const RELAY_POLL_MS = 100;
/** The webhook relay's passes start at least this long after the previous one ended. */
const RELAY_MIN_GAP_MS = 50;
/** How often the relay reads the unsignalled deliveries again without being told to. */
const RELAY_SWEEP_MS = 2000;
/** signalWithStart calls in flight at once (each (webhook, shard) gets its own). */
const SIGNAL_CONCURRENCY = 16;

/**
 * One dispatch pass over at most EVENT_BATCH events, in one statement (one round trip, its own
 * transaction):
 * - the horizon: the transaction id below which every transaction that may write events has
 *   ended: the oldest one still running in the statement's snapshot, leaving out those
 *   positively known to be in another database of the server (so a long transaction elsewhere
 *   does not hold the webhooks back). Every event of a transaction below it is visible to the
 *   statement, so none is passed over when it commits late;
 * - the cursor's row, locked (FOR UPDATE) only when an event lies after it: with N relays each
 *   event is dispatched once, and a pass with nothing to do writes nothing (no transaction id,
 *   no WAL);
 * - the events after the cursor and below the horizon, in (txid, id) order;
 * - one webhook_deliveries row per (matching active webhook, event), existing ones kept; a
 *   webhook gets the events that happened once it existed (event date_created >= its own), not
 *   an older one that the relay reaches after it was created (replay asks for those);
 * - the cursor moved to the last event read.
 * Answers how many events it read and how many deliveries it created. A prepared statement
 * (preparedRows): it runs every RELAY_POLL_MS beside every worker, mostly finding nothing, and
 * planning its CTEs cost about ten times what running them does (pgbench on an empty events
 * table: 4.8 to 7.5 ms a pass unprepared, 0.3 to 0.6 ms prepared, on the shared 2-vCPU machine).
 */
const DISPATCH_SQL = `
WITH snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s),
horizon AS MATERIALIZED (
  SELECT coalesce(min(x), pg_snapshot_xmax((SELECT s FROM snap))) AS h
    FROM pg_snapshot_xip((SELECT s FROM snap)) x
   WHERE (x::text::bigint % 4294967296) NOT IN (
     SELECT backend_xid::text::bigint FROM pg_stat_activity
      WHERE backend_xid IS NOT NULL AND datid IS DISTINCT FROM (SELECT oid FROM pg_database WHERE datname = current_database()))),
cur AS MATERIALIZED (
  SELECT c.last_txid, c.last_event_id FROM webhook_dispatch c
   WHERE c.id = 1 AND EXISTS (SELECT 1 FROM events e WHERE (e.txid, e.id) > (c.last_txid, c.last_event_id))
   FOR UPDATE),
ev AS MATERIALIZED (
  SELECT e.id, e.txid, e.slug, e.object_type, e.object_id, e.date_created FROM cur, horizon, events e
   WHERE (e.txid, e.id) > (cur.last_txid, cur.last_event_id) AND e.txid < horizon.h
   ORDER BY e.txid, e.id LIMIT $1),
ins AS (
  INSERT INTO webhook_deliveries (webhook_id, event_id, object_type, object_id)
  SELECT w.id, ev.id, ev.object_type, ev.object_id FROM ev
    JOIN webhooks w ON w.active AND (w.event = ev.slug OR w.event = $2) AND ev.date_created >= w.date_created
   ORDER BY ev.id, w.id
  ON CONFLICT (webhook_id, event_id) DO NOTHING
  RETURNING 1),
last AS (SELECT txid, id FROM ev ORDER BY txid DESC, id DESC LIMIT 1),
moved AS (
  UPDATE webhook_dispatch c SET last_txid = last.txid, last_event_id = last.id, date_modified = now()
    FROM last WHERE c.id = 1
  RETURNING 1)
SELECT (SELECT count(*) FROM ev)::int AS events, (SELECT count(*) FROM ins)::int AS deliveries, (SELECT count(*) FROM moved)::int AS moved`;

async function dispatchOnce(db: Db): Promise<{ events: number; deliveries: number }> {
  const [row] = await preparedRows<{ events: number; deliveries: number }>(db, 'hostflow_webhook_dispatch', DISPATCH_SQL, [EVENT_BATCH, ALL_EVENTS]);
  return { events: row.events, deliveries: row.deliveries };
}

/**
 * Hands the committed events after the cursor to the active webhooks that want them (passes of
 * dispatchOnce until one reads less than a batch). Answers how many events it handled and how
 * many deliveries it created.
 */
async function dispatch(db: Db): Promise<{ events: number; deliveries: number }> {
  let events = 0;
  let deliveries = 0;
  for (;;) {
    const n = await dispatchOnce(db);
    events += n.events;
    deliveries += n.deliveries;
    if (n.events < EVENT_BATCH) return { events, deliveries };
  }
}

/** Dispatches the committed events after the cursor (see dispatch); answers how many it handled. */
export async function dispatchEvents(db: Db): Promise<number> {
  return (await dispatch(db)).events;
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

/** The object a delivery is of, as the shard workflow keys it. */
export function objectKey(objectType: string, objectId: string | number | null): string {
  return `${objectType}:${objectId ?? ''}`;
}

/** The shard (0 … shards-1) an object's deliveries go to: FNV-1a of its key, so every relay agrees. */
export function shardOf(object: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < object.length; i++) {
    h ^= object.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

/** Pending rows read per statement by pendingShardDeliveries. */
const PENDING_PAGE = 1000;
/** The most pending rows of a webhook one read goes through (of every shard, before it answers `more`). */
const PENDING_SCAN = 200_000;

/**
 * The oldest pending deliveries of one shard of a webhook, for its shard workflow when it let
 * some go (its bound, WEBHOOK_SHARD_MAX_QUEUED): the webhook's pending rows in (event id, id)
 * order (the partial index webhook_deliveries_pending_idx), those of the shard, at most
 * `perObject` of each object (its first ones, which the workflow may hold already), at most
 * `limit` in all, going through at most PENDING_SCAN rows. `more`: the shard may have pending
 * deliveries beyond those answered.
 */
export async function pendingShardDeliveries(
  db: Db,
  opts: { webhookId: number; shard: number; shards: number; limit: number; perObject: number },
): Promise<{ deliveries: ShardDelivery[]; more: boolean }> {
  const deliveries: ShardDelivery[] = [];
  const perObject = new Map<string, number>();
  let more = false;
  let after: [string, string] | undefined;
  for (let scanned = 0; scanned < PENDING_SCAN; ) {
    const page = db('webhook_deliveries').where({ webhook_id: opts.webhookId, status: 'pending' });
    if (after) page.whereRaw('(event_id, id) > (?, ?)', after);
    const rows: Omit<Unsignalled, 'webhook_id'>[] = await page.orderBy(['event_id', 'id']).limit(PENDING_PAGE).select('id', 'event_id', 'object_type', 'object_id');
    for (const r of rows) {
      const object = objectKey(r.object_type, r.object_id);
      if (shardOf(object, opts.shards) !== opts.shard) continue;
      const n = perObject.get(object) ?? 0;
      if (n >= opts.perObject) {
        more = true;
        continue;
      }
      perObject.set(object, n + 1);
      deliveries.push({ deliveryId: Number(r.id), eventId: Number(r.event_id), object });
      if (deliveries.length >= opts.limit) return { deliveries, more: true };
    }
    if (rows.length < PENDING_PAGE) return { deliveries, more };
    scanned += rows.length;
    after = [rows[rows.length - 1].event_id, rows[rows.length - 1].id];
  }
  return { deliveries, more: true };
}

export interface SignalSettings {
  retry: WebhookRetry;
  /** WEBHOOK_DELIVERY_SHARDS. */
  shards: number;
  /** How long a shard workflow without deliveries waits for more before it ends (tests: short). */
  idleMs?: number;
  /** Deliveries a shard run handles before it continues as new (tests: a few; default the workflow's). */
  perRun?: number;
  /** WEBHOOK_SHARD_MAX_QUEUED: the most deliveries a shard run holds (default the workflow's). */
  maxQueued?: number;
}

/**
 * Tells the shard workflows of these deliveries: one signalWithStart per (webhook, shard),
 * carrying the shard's deliveries, then their signalled_at set in one statement. A signal
 * repeated (two relays, a lost answer) is harmless: the workflow keeps one of each delivery
 * (one in flight it attempts once more, for a retry that came as its attempt ended) and the
 * activity does not send a delivered one again. A signal that fails leaves its deliveries
 * unsignalled, for the next pass.
 */
async function signalShards(db: Db, temporal: TemporalGateway, settings: SignalSettings, rows: Unsignalled[]): Promise<number> {
  const groups = new Map<string, { webhookId: number; shard: number; deliveries: (ShardDelivery & { id: string })[] }>();
  for (const r of rows) {
    const object = objectKey(r.object_type, r.object_id);
    const shard = shardOf(object, settings.shards);
    const key = `${r.webhook_id}|${shard}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { webhookId: Number(r.webhook_id), shard, deliveries: [] }));
    group.deliveries.push({ id: r.id, deliveryId: Number(r.id), eventId: Number(r.event_id), object });
  }
  const signalled: string[] = [];
  let failure: unknown;
  await eachLimited([...groups.values()], SIGNAL_CONCURRENCY, async (group) => {
    try {
      await temporal.signalWithStart(
        webhookShard,
        {
          workflowId: await temporal.ids.build('webhook', group.webhookId, 'shard', group.shard),
          args: [{ webhookId: group.webhookId, shard: group.shard, retry: settings.retry, ...(settings.idleMs !== undefined ? { idleMs: settings.idleMs } : {}), ...(settings.perRun !== undefined ? { perRun: settings.perRun } : {}), ...(settings.maxQueued !== undefined ? { maxQueued: settings.maxQueued } : {}) }],
          summary: `Webhook ${group.webhookId} deliveries, shard ${group.shard}`,
        },
        shardDeliveriesSignal,
        [group.deliveries.map(({ deliveryId, eventId, object }) => ({ deliveryId, eventId, object }))],
        (detail) => new DomainError('unavailable', 'temporal_unavailable', `webhook relay: ${detail ?? 'Temporal unreachable'}`),
      );
      signalled.push(...group.deliveries.map((d) => d.id));
    } catch (err) {
      failure ??= err;
    }
  });
  if (signalled.length) await db('webhook_deliveries').whereIn('id', signalled).whereNull('signalled_at').update({ signalled_at: db.fn.now() });
  if (failure) throw failure;
  return signalled.length;
}

/**
 * Tells the shard workflows of the pending deliveries not yet signalled (new ones a signal
 * missed, and those a retry or a replay made pending again), SIGNAL_BATCH at a time.
 */
export async function signalDeliveries(db: Db, temporal: TemporalGateway, settings: SignalSettings): Promise<number> {
  const rows: Unsignalled[] = await db('webhook_deliveries').whereNull('signalled_at').where({ status: 'pending' }).orderBy('id').limit(SIGNAL_BATCH).select('id', 'webhook_id', 'event_id', 'object_type', 'object_id');
  return rows.length ? signalShards(db, temporal, settings, rows) : 0;
}

export interface WebhookRelay {
  /** One pass now (tests, and the timers): events dispatched, deliveries signalled. */
  sweep(): Promise<{ dispatched: number; signalled: number }>;
  stop(): Promise<void>;
}

/**
 * The webhook relay, beside every worker. Every RELAY_POLL_MS a pass dispatches the events
 * committed since the last one (a statement that writes nothing when there are none); then,
 * when it created deliveries, when the API notified DELIVERIES_CHANNEL (a retry, a replay) and
 * at least every RELAY_SWEEP_MS, it signals the unsignalled deliveries to their shard workflows
 * (SIGNAL_BATCH at a time, the oldest first, pass after pass while batches come full). Always
 * the oldest unsignalled ones, whoever created them: a signal that failed, or one of another
 * relay still in flight, is repeated with the newer deliveries, so a shard never gets an
 * object's later event without the earlier ones (which would break its order). Events are found by polling, not by a
 * NOTIFY at their commit: a NOTIFY serializes the commits of every transaction that sends one
 * (PostgreSQL holds a database-wide lock from the notification queue's write through the
 * commit), which an event-writing request would pay on every write.
 */
export function startWebhookRelay(opts: SignalSettings & { db: Db; temporal: TemporalGateway; intervalMs?: number }): WebhookRelay {
  const { db } = opts;
  let lastSweep = 0;
  let notified = true;
  const pass = async () => {
    const { events, deliveries } = await dispatch(db);
    let signalled = 0;
    if (deliveries > 0 || notified || Date.now() - lastSweep >= RELAY_SWEEP_MS) {
      notified = false;
      lastSweep = Date.now();
      signalled = await signalDeliveries(db, opts.temporal, opts);
      // A full batch: more are waiting (a replay of many events); the next pass reads on.
      if (signalled === SIGNAL_BATCH) notified = true;
    }
    return [{ dispatched: events, signalled }];
  };
  const loop = relayLoop({ db, name: 'webhook-relay', channels: [], intervalMs: opts.intervalMs ?? RELAY_POLL_MS, pass, minGapMs: RELAY_MIN_GAP_MS });
  const listener = listen(
    db,
    DELIVERIES_CHANNEL,
    () => {
      notified = true;
      loop.wake();
    },
    { name: 'webhook-relay-deliveries' },
  );
  return {
    sweep: async () => {
      notified = true;
      return (await loop.sweep()).reduce((a, b) => ({ dispatched: a.dispatched + b.dispatched, signalled: a.signalled + b.signalled }));
    },
    stop: async () => {
      await listener.stop();
      await loop.stop();
    },
  };
}
