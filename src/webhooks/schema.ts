import { z } from 'zod';
import { EVENT_SLUGS } from '../events/catalogue';
import { allOptional, fields } from '../http/validation';

/** `event` of a webhook that receives every event type. */
export const ALL_EVENTS = '*';
export const WEBHOOK_EVENTS = [ALL_EVENTS, ...EVENT_SLUGS] as [string, ...string[]];

const webhookFields = {
  name: fields.label(250),
  description: fields.text(1000),
  webhook_url: z
    .url({ protocol: /^https?$/, error: () => 'must be an http or https URL.' })
    .max(2000)
    .describe('Where deliveries are POSTed. Addresses inside the network (loopback, private, link-local) are refused at delivery, after DNS and on every redirect, unless WEBHOOK_ALLOWED_HOSTS allows them.'),
  event: z.enum(WEBHOOK_EVENTS).describe('The event slug delivered (GET /hooks lists them), or * for every event.'),
  integration: z
    .string()
    .regex(/^[a-z0-9_-]{1,50}$/, 'must be 1 to 50 lower-case letters, digits, - and _ (e.g. manual, zapier).')
    .describe('Who set the webhook up, as the original names it (default manual).'),
  active: fields.flag().describe('Only active webhooks get deliveries; a 410 answer, or failures for WEBHOOK_DISABLE_AFTER_DAYS, turn it off.'),
};

export const createWebhookSchema = z.strictObject({
  ...allOptional(webhookFields),
  name: webhookFields.name,
  webhook_url: webhookFields.webhook_url,
  event: webhookFields.event,
});

export const updateWebhookSchema = z.strictObject(allOptional(webhookFields));

/** POST /webhooks/{id}/replay: the events' date range. */
export const replaySchema = z.strictObject({
  after: fields.datetime().describe('Events from this time (inclusive).'),
  before: fields.datetime().describe('Events before this time.'),
});
