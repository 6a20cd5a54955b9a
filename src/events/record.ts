import type { Knex } from 'knex';
import { EVENT_TYPES, type Severity } from './catalogue';

export interface NewEvent {
  slug: string;
  objectId: number | null;
  /** The record as the API shows it (without _links). */
  payload: Record<string, unknown>;
  /** Default: the event type's. */
  severity?: Severity;
  /** `system` (default) for the service's own work; `manual` for a change an admin made by hand. */
  initiator?: 'system' | 'manual';
  authorId?: number | null;
}

/**
 * Writes an event row in the caller's transaction (a transactional outbox): the change and its
 * event commit together or not at all. An unknown slug is a programming error, not a 400.
 */
export async function recordEvent(trx: Knex | Knex.Transaction, event: NewEvent): Promise<void> {
  const type = EVENT_TYPES.get(event.slug);
  if (!type) throw new Error(`recordEvent: "${event.slug}" is not in the event catalogue (src/events/catalogue.ts)`);
  await trx('events').insert({
    slug: event.slug,
    severity: event.severity ?? type.severity,
    initiator: event.initiator ?? 'system',
    author_id: event.authorId ?? null,
    object_type: type.objectType,
    object_id: event.objectId,
    payload: JSON.stringify(event.payload),
  });
}
