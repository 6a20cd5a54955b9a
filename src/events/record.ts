import type { Knex } from 'knex';
import { statementRows } from '../db/transaction';
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
  await statementRows(trx, INSERT_EVENT, [event.authorId ?? null, event.initiator ?? 'system', event.objectId, type.objectType, JSON.stringify(event.payload), event.severity ?? type.severity, event.slug]);
}

/** The event's insert, compiled once: in a write's transaction it skips Knex's builder (statementRows). */
const INSERT_EVENT = 'insert into "events" ("author_id", "initiator", "object_id", "object_type", "payload", "severity", "slug") values (?, ?, ?, ?, ?, ?, ?)';
