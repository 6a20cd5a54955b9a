import { condition, continueAsNew, defineSignal, patched, proxyActivities, setHandler, setWorkflowOptions, sleep, workflowInfo } from '@temporalio/workflow';
import type { WebhookActivities } from '../activities/webhooks';
import type { WebhookRetry } from './webhookDelivery';

/** One delivery to make, of one object of the shard: ids only (the activity reads the body and the secret). */
export interface ShardDelivery {
  deliveryId: number;
  eventId: number;
  /** The delivery's object (`<object_type>:<object_id>`): one at a time per object. */
  object: string;
}

/** A delivery carried over a continue-as-new, with its backoff when it had failed attempts. */
export interface CarriedDelivery extends ShardDelivery {
  /** Attempts that answered `retry`. */
  attempt?: number;
  /** Workflow time of its first attempt (its retry window starts there). */
  firstAt?: number;
  /** Workflow time before which it is not tried again. */
  notBefore?: number;
}

export interface WebhookShardInput {
  webhookId: number;
  /** Which of the webhook's WEBHOOK_DELIVERY_SHARDS shards this is (its objects hash to it). */
  shard: number;
  retry: WebhookRetry;
  /** How long the workflow waits for more deliveries once it has none (default 1 minute). */
  idleMs?: number;
  /** Deliveries (of different objects) sent by one activity (default 25). */
  batchSize?: number;
  /** Batches in flight at once (default 2). */
  batches?: number;
  /** Deliveries handled (delivered or failed) per run before it continues as new (default 500). */
  perRun?: number;
  /** Deliveries carried over a continue-as-new. */
  queued?: CarriedDelivery[];
  /** The most deliveries the run holds, queued and in flight (WEBHOOK_SHARD_MAX_QUEUED; default 2,000). */
  maxQueued?: number;
  /** The most deliveries of one object it holds (default a tenth of maxQueued), so a failing object cannot fill it. */
  perObject?: number;
  /** Carried over a continue-as-new: deliveries were let go (they wait in the table), the next run reads them. */
  overflow?: boolean;
}

/**
 * Changes shipped through patched() (README "Shipping a workflow change"): runs started by older
 * code replay without them. Once no such run is left, each becomes deprecatePatch(), then goes.
 */
export const SHARD_PATCHES = {
  /** At most maxQueued deliveries held (perObject of one object); the others are read from the table as it drains. */
  boundedQueue: 'webhook-shard-bounded-queue',
  /** A delivery signalled again while its attempt is in flight is attempted once more when that attempt ends. */
  againInFlight: 'webhook-shard-again-in-flight',
} as const;

/** New (or redelivered) deliveries of the shard's webhook and objects. */
export const shardDeliveriesSignal = defineSignal<[ShardDelivery[]]>('webhookShardDeliveries');

function activities(retry: WebhookRetry) {
  return proxyActivities<WebhookActivities>({
    startToCloseTimeout: retry.attemptTimeoutMs ?? 120_000,
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute' },
  });
}

const IDLE_MS = 60_000;
const BATCH_SIZE = 25;
const BATCHES = 2;
/**
 * A delivery costs at most about 12 history events (its signal, a batch of one, the idle timer
 * started and cancelled): 500 keep a run near 6,000, under the server's 10,240-event warning;
 * retries do not count as handled, so the server's continue-as-new suggestion bounds those.
 */
const PER_RUN = 500;
/** 65 to 140 bytes each in the continue-as-new input (with backoff): 2,000 keep it under 280 KB, far from the 2 MB limit. */
const MAX_QUEUED = 2000;

/** One object's deliveries: sorted by event id, and the one being attempted (at most one). */
interface Lane {
  items: CarriedDelivery[];
  current?: CarriedDelivery;
}

const byEvent = (a: ShardDelivery, b: ShardDelivery) => a.eventId - b.eventId || a.deliveryId - b.deliveryId;

/**
 * The deliveries of one webhook for the objects of one shard (workflow id
 * <prefix>-webhook-<webhook>-shard-<n>; an object goes to the shard its `<type>:<id>` hashes to).
 * Per object, one delivery at a time in event-id order: the object's next event is attempted
 * only once the earlier one was delivered or has failed, which is how each receiver gets an
 * object's events in order. Across objects, up to `batches` activities at once, each attempting
 * the next delivery of up to `batchSize` objects concurrently. A delivery answered `retry`
 * backs off on its own (exponential, with equal jitter) while the other objects go on. Continues
 * as new after `perRun` deliveries (or when the server suggests it): it waits for the batches in
 * flight, then carries every queued delivery with its backoff state. A delivery signalled again
 * while it is in flight (SHARD_PATCHES.againInFlight: a retry as its attempt ended) is
 * attempted once more when that attempt ends; one signalled again while queued is kept once.
 *
 * Bounded (SHARD_PATCHES.boundedQueue): the run holds at most `maxQueued` deliveries, and at
 * most `perObject` of one object. What it holds of an object is always that object's oldest
 * pending deliveries (a prefix in event-id order), so the order above holds. A delivery
 * signalled beyond a bound is let go: its row stays pending in webhook_deliveries, and the run
 * is in `overflow`, where it lets go of every signalled delivery it does not hold (a later one
 * of an object could otherwise overtake an earlier one left in the table). In overflow, once
 * it holds half of maxQueued or less (or nothing), it reads the oldest pending deliveries of its
 * webhook and shard (pendingWebhookDeliveries: per object its first ones, in event-id order),
 * keeps those that fit, and leaves overflow when that read found every pending one and no
 * signal was let go meanwhile.
 */
export async function webhookShard(input: WebhookShardInput): Promise<{ delivered: number }> {
  const { retry } = input;
  const { attemptWebhookDeliveries, giveUpWebhookDelivery, pendingWebhookDeliveries } = activities(retry);
  const bounded = patched(SHARD_PATCHES.boundedQueue);
  const againInFlight = patched(SHARD_PATCHES.againInFlight);
  const batchSize = input.batchSize ?? BATCH_SIZE;
  const maxBatches = input.batches ?? BATCHES;
  const perRun = input.perRun ?? PER_RUN;
  const maxQueued = bounded ? Math.max(1, input.maxQueued ?? MAX_QUEUED) : Infinity;
  const perObject = bounded ? Math.max(1, input.perObject ?? Math.ceil(maxQueued / 10)) : Infinity;
  /** Changes (deliveries let go or handled) that make a read worth it while more than nothing is held. */
  const readEvery = Math.max(1, Math.floor(perObject / 2));
  const lanes = new Map<string, Lane>();
  /** The deliveries the run holds: queued and in flight. */
  const known = new Set<number>();
  let changed = false;
  let running = 0;
  let handled = 0;
  let reading = false;
  /** A signalled delivery was let go while a read was in flight (the read may have missed it). */
  let missed = false;
  /**
   * Deliveries signalled again while their attempt was in flight (SHARD_PATCHES.againInFlight):
   * a retry through the API that came as the attempt was ending. That attempt may have read the
   * row before the retry made it pending again, so the delivery is attempted once more when it
   * ends, whatever it came to. A signal merely repeated (two relays, a lost answer) costs one
   * activity that sends nothing: it reads the row delivered or failed.
   */
  const again = new Set<number>();

  const held = (object: string) => {
    const lane = lanes.get(object);
    return lane ? lane.items.length + (lane.current ? 1 : 0) : 0;
  };
  /** Queues these (each object's in event-id order) as far as the bounds allow; answers how many it let go. */
  const add = (items: CarriedDelivery[]) => {
    let letGo = 0;
    for (const d of bounded ? [...items].sort(byEvent) : items) {
      if (known.has(d.deliveryId)) continue;
      if (known.size >= maxQueued || held(d.object) >= perObject) {
        letGo++;
        continue;
      }
      known.add(d.deliveryId);
      let lane = lanes.get(d.object);
      if (!lane) lanes.set(d.object, (lane = { items: [] }));
      lane.items.push(d);
      lane.items.sort(byEvent);
    }
    changed = true;
    return letGo;
  };
  // Carried by a run of before the bound, the queue may be longer: what does not fit waits in the table.
  let overflow = add(input.queued ?? []) > 0 || (bounded && input.overflow === true);
  /** Deliveries let go or handled since the last read began. */
  let sinceRead = overflow ? 1 : 0;
  setHandler(shardDeliveriesSignal, (items) => {
    if (againInFlight) for (const d of items) if (lanes.get(d.object)?.current?.deliveryId === d.deliveryId) again.add(d.deliveryId);
    const letGo = overflow ? items.filter((d) => !known.has(d.deliveryId)).length : add(items);
    if (letGo === 0) return;
    overflow = true;
    sinceRead += letGo;
    if (reading) missed = true;
    changed = true;
  });

  const done = (d: CarriedDelivery) => {
    const lane = lanes.get(d.object)!;
    lane.current = undefined;
    known.delete(d.deliveryId);
    handled++;
    sinceRead++;
    if (lane.items.length === 0) lanes.delete(d.object);
  };

  /** Overflow: the oldest pending deliveries of the shard, those that fit kept. */
  const read = async () => {
    missed = false;
    sinceRead = 0;
    const { deliveries, more } = await pendingWebhookDeliveries({ webhookId: input.webhookId, shard: input.shard, limit: maxQueued, perObject });
    const letGo = add(deliveries);
    overflow = more || letGo > 0 || missed;
  };
  const readWanted = () => overflow && !reading && sinceRead > 0 && (known.size === 0 || (known.size <= maxQueued / 2 && sinceRead >= readEvery));

  const attempt = async (batch: CarriedDelivery[]) => {
    const startedAt = Date.now();
    const outcomes = await attemptWebhookDeliveries({ deliveryIds: batch.map((d) => d.deliveryId) });
    const now = Date.now();
    for (const [i, d] of batch.entries()) {
      if (again.delete(d.deliveryId)) {
        // Queued afresh (no backoff): the retry asked for it now.
        const lane = lanes.get(d.object)!;
        lane.current = undefined;
        lane.items.push({ deliveryId: d.deliveryId, eventId: d.eventId, object: d.object });
        lane.items.sort(byEvent);
        continue;
      }
      if (outcomes[i] !== 'retry') {
        done(d);
        continue;
      }
      // Exponential backoff with "equal jitter": half the delay fixed, half random (the
      // workflow's Math.random is seeded, so a replay computes the same delays).
      const tries = (d.attempt ?? 0) + 1;
      const firstAt = d.firstAt ?? startedAt;
      const backoff = Math.min(retry.initialMs * 2 ** (tries - 1), retry.maxMs);
      const delay = Math.round(backoff / 2 + (Math.random() * backoff) / 2);
      if (now + delay - firstAt > retry.forMs) {
        await giveUpWebhookDelivery({ deliveryId: d.deliveryId });
        done(d);
        continue;
      }
      const lane = lanes.get(d.object)!;
      lane.current = undefined;
      lane.items.push({ ...d, attempt: tries, firstAt, notBefore: now + delay });
      lane.items.sort(byEvent);
      wakeAt(now + delay);
    }
  };

  // One durable timer for the earliest backoff that ends (a later one is armed when it fires).
  let timerAt: number | undefined;
  const wakeAt = (at: number) => {
    if (timerAt !== undefined && timerAt <= at) return;
    timerAt = at;
    void sleep(Math.max(1, at - Date.now())).then(() => {
      if (timerAt === at) timerAt = undefined;
      changed = true;
    });
  };

  for (;;) {
    if (handled >= perRun || workflowInfo().continueAsNewSuggested) {
      await condition(() => running === 0 && !reading);
      const queued = [...lanes.values()].flatMap((lane) => lane.items);
      await continueAsNew<typeof webhookShard>({ ...input, queued, ...(bounded ? { overflow } : {}) });
    }
    if (readWanted()) {
      reading = true;
      void read().finally(() => {
        reading = false;
        changed = true;
      });
    }
    const now = Date.now();
    const ready: CarriedDelivery[] = [];
    let next: number | undefined;
    for (const lane of lanes.values()) {
      if (lane.current || lane.items.length === 0) continue;
      const head = lane.items[0];
      if ((head.notBefore ?? 0) <= now) ready.push(head);
      else next = Math.min(next ?? Infinity, head.notBefore!);
    }
    while (ready.length > 0 && running < maxBatches) {
      const batch = ready.splice(0, batchSize);
      for (const d of batch) {
        const lane = lanes.get(d.object)!;
        lane.items.shift();
        lane.current = d;
      }
      running++;
      void attempt(batch).finally(() => {
        running--;
        changed = true;
      });
    }
    if (next !== undefined) wakeAt(next);
    if (lanes.size === 0 && running === 0 && !reading && !overflow) {
      // Ends when nothing came in time (a delivery signalled in the same task as the timeout is kept).
      await condition(() => lanes.size > 0, input.idleMs ?? IDLE_MS);
      if (lanes.size === 0) return { delivered: handled };
      continue;
    }
    changed = false;
    if (overflow && known.size === 0 && !reading) {
      // Nothing held, yet the last read answered `more`: none of the shard's deliveries were within
      // its reach (the rows of other shards' objects came first). It reads again after idleMs.
      if (!(await condition(() => changed, input.idleMs ?? IDLE_MS))) sinceRead++;
      continue;
    }
    await condition(() => changed);
  }
}

// Deliveries are retried for days: a run moves to the current worker version at its next task,
// so a change to what it does goes behind patched() (README "Shipping a workflow change").
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, webhookShard);
