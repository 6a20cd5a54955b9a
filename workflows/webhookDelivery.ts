import { condition, continueAsNew, defineSignal, proxyActivities, setHandler, setWorkflowOptions, sleep, workflowInfo } from '@temporalio/workflow';
import type { WebhookActivities } from '../activities/webhooks';

/** One delivery to make: ids only (the activity reads the body and the secret from the database). */
export interface QueuedDelivery {
  deliveryId: number;
  eventId: number;
}

export interface WebhookRetry {
  /** The first backoff; it doubles per attempt, up to maxMs, with jitter. */
  initialMs: number;
  maxMs: number;
  /** How long one delivery is retried before it fails (3 days by default). */
  forMs: number;
  /**
   * How long an attempt's activity may take (the HTTP timeout and a margin) before Temporal
   * tries it again: how soon a delivery whose worker was killed mid-request is sent again.
   */
  attemptTimeoutMs?: number;
}

export interface WebhookDeliveryInput {
  webhookId: number;
  objectType: string;
  objectId: number | null;
  retry: WebhookRetry;
  /** How long the workflow waits for more deliveries once it has none (default 1 minute). */
  idleMs?: number;
  /** Deliveries carried over a continue-as-new. */
  queued?: QueuedDelivery[];
}

/** New (or redelivered) deliveries of the workflow's webhook and object. */
export const deliveriesSignal = defineSignal<[QueuedDelivery[]]>('webhookDeliveries');

// An attempt's HTTP failures are its result ('retry'), backed off here; the activity's own
// retries only cover trouble of the worker itself (database down, worker killed mid-request:
// the same delivery, so the same webhook-id, is sent again).
function activities(retry: WebhookRetry) {
  return proxyActivities<WebhookActivities>({
    startToCloseTimeout: retry.attemptTimeoutMs ?? 120_000,
    retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute' },
  });
}

/** An idle workflow ends after this; the next delivery starts it again (signalWithStart). */
const IDLE_MS = 60_000;
/** Deliveries per run before it continues as new (keeps the history short). */
const PER_RUN = 200;

async function deliver(deliveryId: number, retry: WebhookRetry): Promise<void> {
  const { attemptWebhookDelivery, giveUpWebhookDelivery } = activities(retry);
  const first = Date.now();
  for (let attempt = 1; ; attempt++) {
    if ((await attemptWebhookDelivery({ deliveryId })) !== 'retry') return;
    // Exponential backoff with "equal jitter": half the delay fixed, half random (the workflow's
    // Math.random is seeded, so a replay computes the same delays).
    const backoff = Math.min(retry.initialMs * 2 ** (attempt - 1), retry.maxMs);
    const delay = Math.round(backoff / 2 + (Math.random() * backoff) / 2);
    if (Date.now() + delay - first > retry.forMs) {
      await giveUpWebhookDelivery({ deliveryId });
      return;
    }
    await sleep(delay);
  }
}

/**
 * The deliveries of one webhook for one object (workflow id <prefix>-webhook-<webhook>-<type>-<id>),
 * one at a time in event-id order: an event of the object is sent only once the earlier ones
 * are delivered or have failed, which is how each receiver gets an object's events in order.
 * Deliveries of other objects run in their own workflows, in parallel.
 */
export async function webhookDelivery(input: WebhookDeliveryInput): Promise<{ delivered: number }> {
  const queue: QueuedDelivery[] = [];
  const queued = new Set<number>();
  const add = (items: QueuedDelivery[]) => {
    for (const d of items) {
      if (queued.has(d.deliveryId)) continue;
      queued.add(d.deliveryId);
      queue.push(d);
    }
    queue.sort((a, b) => a.eventId - b.eventId || a.deliveryId - b.deliveryId);
  };
  add(input.queued ?? []);
  setHandler(deliveriesSignal, add);
  let handled = 0;
  for (;;) {
    if (!(await condition(() => queue.length > 0, input.idleMs ?? IDLE_MS))) return { delivered: handled };
    if (handled >= PER_RUN || workflowInfo().continueAsNewSuggested) await continueAsNew<typeof webhookDelivery>({ ...input, queued: queue });
    const next = queue.shift()!;
    await deliver(next.deliveryId, input.retry);
    queued.delete(next.deliveryId);
    handled++;
  }
}

// A delivery is retried for days: it moves to the current worker version at its next task, so a
// change to what it does goes behind patched() (README "Shipping a workflow change").
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, webhookDelivery);
