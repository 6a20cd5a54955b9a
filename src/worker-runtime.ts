/**
 * What only a worker process runs (`npm run start:worker`, and `npm start` beside its API): the
 * Temporal workers with this service's activities, and the relays. Kept apart from runtime.ts so
 * that the API process never loads @temporalio/worker (with its native core bridge), the
 * activities or the relays.
 */
import { createActivities } from '../activities';
import type { Config } from './config';
import type { Db } from './db/knex';
import { startEventRetention } from './events/retention';
import { lifecycleHorizonMs, MembershipLifecycles, startLifecycleSweep } from './memberships/lifecycle';
import type { TemporalHandle } from './temporal/client';
import { TemporalGateway } from './temporal/gateway';
import { startWorkflowRelay } from './temporal/starts';
import { startQueueWorkers } from './temporal/worker';
import { WorkflowIds } from './temporal/workflow-ids';
import { startTenantPushRelay } from './tenants/push-relay';
import { startWebhookRelay } from './webhooks/dispatch';

/** The process's workers (temporal/worker.ts) running this service's activities. */
export function startWorker(opts: Omit<Parameters<typeof startQueueWorkers>[0], 'createActivities'>) {
  return startQueueWorkers({ ...opts, createActivities });
}

/**
 * The relays a worker process runs beside its worker (every replica: row locks and workflow ids
 * keep their starts single): the workflow start outbox, the tenant push outbox and the webhook
 * dispatch (events to deliveries, deliveries to their workflows); the sweep that deletes
 * events past EVENT_RETENTION_DAYS, and the one that starts the membership lifecycles deferred
 * to BILLING_LIFECYCLE_HORIZON_HOURS. Their calls
 * have a background job's deadline (10 s), not the API's. `webhooks: false` leaves the webhook
 * relay out (bench:events measures the event writes without the passes they wake).
 */
export function startRelays(
  db: Db,
  temporal: TemporalHandle,
  config: Pick<
    Config,
    | 'WORKFLOW_ID_PREFIX'
    | 'EVENT_RETENTION_DAYS'
    | 'WEBHOOK_RETRY_INITIAL_MS'
    | 'WEBHOOK_RETRY_MAX_MS'
    | 'WEBHOOK_RETRY_HOURS'
    | 'WEBHOOK_TIMEOUT_MS'
    | 'WEBHOOK_DELIVERY_SHARDS'
    | 'WEBHOOK_SHARD_MAX_QUEUED'
    | 'BILLING_LIFECYCLE_HORIZON_HOURS'
  >,
  opts: { webhooks?: boolean } = {},
): { stop(): Promise<void> } {
  const gateway = new TemporalGateway(temporal, null, { callTimeoutMs: 10_000, ids: new WorkflowIds(db, config.WORKFLOW_ID_PREFIX) });
  const relays = [
    startWorkflowRelay({ db, temporal: gateway }),
    startTenantPushRelay({ db, temporal: gateway }),
    startEventRetention({ db, days: config.EVENT_RETENTION_DAYS }),
    startLifecycleSweep(db, new MembershipLifecycles(gateway.ids, null, undefined, lifecycleHorizonMs(config))),
    ...(opts.webhooks === false
      ? []
      : [startWebhookRelay({ db, temporal: gateway, retry: webhookRetry(config), shards: config.WEBHOOK_DELIVERY_SHARDS, maxQueued: config.WEBHOOK_SHARD_MAX_QUEUED })]),
  ];
  return {
    async stop() {
      await Promise.all(relays.map((relay) => relay.stop()));
      gateway.close();
    },
  };
}

/** The delivery workflows' backoff and attempt deadline (the HTTP timeout, and 5 s for the database), from the configuration. */
export function webhookRetry(config: Pick<Config, 'WEBHOOK_RETRY_INITIAL_MS' | 'WEBHOOK_RETRY_MAX_MS' | 'WEBHOOK_RETRY_HOURS' | 'WEBHOOK_TIMEOUT_MS'>) {
  return {
    initialMs: config.WEBHOOK_RETRY_INITIAL_MS,
    maxMs: config.WEBHOOK_RETRY_MAX_MS,
    forMs: Math.round(config.WEBHOOK_RETRY_HOURS * 3_600_000),
    attemptTimeoutMs: config.WEBHOOK_TIMEOUT_MS + 5000,
  };
}

