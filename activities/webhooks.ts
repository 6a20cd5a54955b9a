import type { Config } from '../src/config';
import type { Db } from '../src/db/knex';
import { OutboundPolicy } from '../src/infra/outbound-http';
import { attemptDelivery, giveUpDelivery, type AttemptOutcome } from '../src/webhooks/deliver';

/** The webhook delivery workflow's activities: ids in, an outcome out (no secret, no body in its history). */
export function createWebhookActivities(deps: { db: Db; config: Pick<Config, 'WEBHOOK_ALLOWED_HOSTS' | 'WEBHOOK_TIMEOUT_MS' | 'WEBHOOK_DISABLE_AFTER_DAYS' | 'WEBHOOK_RETRY_HOURS'> }) {
  const { db, config } = deps;
  const settings = { policy: new OutboundPolicy(config.WEBHOOK_ALLOWED_HOSTS), timeoutMs: config.WEBHOOK_TIMEOUT_MS, disableAfterDays: config.WEBHOOK_DISABLE_AFTER_DAYS };
  return {
    async attemptWebhookDelivery(input: { deliveryId: number }): Promise<AttemptOutcome> {
      return attemptDelivery(db, settings, input.deliveryId);
    },
    async giveUpWebhookDelivery(input: { deliveryId: number }): Promise<void> {
      await giveUpDelivery(db, input.deliveryId, config.WEBHOOK_RETRY_HOURS);
    },
  };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
