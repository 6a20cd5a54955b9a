import type { Config } from '../src/config';
import type { Db } from '../src/db/knex';
import { OutboundPolicy } from '../src/infra/outbound-http';
import { attemptDeliveries, attemptDelivery, giveUpDelivery, type AttemptOutcome } from '../src/webhooks/deliver';
import { pendingShardDeliveries } from '../src/webhooks/dispatch';

/** The webhook delivery workflows' activities (webhookShard, and webhookDelivery for its runs still in flight): ids in, an outcome out (no secret, no body in its history). */
export function createWebhookActivities(deps: { db: Db; config: Pick<Config, 'WEBHOOK_ALLOWED_HOSTS' | 'WEBHOOK_TIMEOUT_MS' | 'WEBHOOK_DISABLE_AFTER_DAYS' | 'WEBHOOK_RETRY_HOURS' | 'WEBHOOK_DELIVERY_SHARDS'> }) {
  const { db, config } = deps;
  const settings = { policy: new OutboundPolicy(config.WEBHOOK_ALLOWED_HOSTS), timeoutMs: config.WEBHOOK_TIMEOUT_MS, disableAfterDays: config.WEBHOOK_DISABLE_AFTER_DAYS };
  return {
    async attemptWebhookDelivery(input: { deliveryId: number }): Promise<AttemptOutcome> {
      return attemptDelivery(db, settings, input.deliveryId);
    },
    /** One attempt of each (webhookShard: the next delivery of several objects, sent concurrently). */
    async attemptWebhookDeliveries(input: { deliveryIds: number[] }): Promise<AttemptOutcome[]> {
      return attemptDeliveries(db, settings, input.deliveryIds);
    },
    /** A shard that let deliveries go (its bound): the oldest pending ones of its webhook and shard (ids only). */
    async pendingWebhookDeliveries(input: { webhookId: number; shard: number; limit: number; perObject: number }) {
      return pendingShardDeliveries(db, { ...input, shards: config.WEBHOOK_DELIVERY_SHARDS });
    },
    async giveUpWebhookDelivery(input: { deliveryId: number }): Promise<void> {
      await giveUpDelivery(db, input.deliveryId, config.WEBHOOK_RETRY_HOURS);
    },
  };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
