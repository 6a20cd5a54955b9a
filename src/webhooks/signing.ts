import crypto from 'node:crypto';

/** The Standard Webhooks secret prefix (standardwebhooks.com): the key is the base64 after it. */
export const SECRET_PREFIX = 'whsec_';

/** A new signing secret: whsec_ and 32 random bytes in base64. */
export function newSecret(): string {
  return `${SECRET_PREFIX}${crypto.randomBytes(32).toString('base64')}`;
}

/** The delivery's `webhook-id`: the same on every attempt, so receivers can deduplicate. */
export function messageId(deliveryId: number): string {
  return `msg_${deliveryId}`;
}

/** `v1,` + base64(HMAC-SHA256(key, `${id}.${timestamp}.${body}`)), the Standard Webhooks signature. */
export function signature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  return `v1,${crypto.createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The headers of one attempt (`timestamp`: unix seconds of the attempt). */
export function signedHeaders(secret: string, id: string, timestamp: number, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature(secret, id, timestamp, body),
  };
}

/** An event as a webhook's body carries it. */
export interface EventRow {
  id: number | string;
  slug: string;
  object_type: string;
  object_id: number | string | null;
  payload: Record<string, unknown>;
  date_created: Date | string;
}

/** The body: { type, timestamp (the event's date), data (its payload), event_id, object_type, object_id }. */
export function webhookBody(event: EventRow): string {
  return JSON.stringify({
    type: event.slug,
    timestamp: new Date(event.date_created).toISOString(),
    data: event.payload,
    event_id: Number(event.id),
    object_type: event.object_type,
    object_id: event.object_id === null ? null : Number(event.object_id),
  });
}
