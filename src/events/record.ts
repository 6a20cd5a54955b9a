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
 * `last`: the transaction's last statement (statementRows' `last`: it carries the COMMIT).
 */
export async function recordEvent(trx: Knex | Knex.Transaction, event: NewEvent, opts: { last?: boolean } = {}): Promise<void> {
  const type = EVENT_TYPES.get(event.slug);
  if (!type) throw new Error(`recordEvent: "${event.slug}" is not in the event catalogue (src/events/catalogue.ts)`);
  await statementRows(trx, INSERT_EVENT, [event.authorId ?? null, event.initiator ?? 'system', event.objectId, type.objectType, JSON.stringify(event.payload), event.severity ?? type.severity, event.slug], { last: opts.last, prepared: true });
}

/** Events of one record, in order, each with the record as its payload; with `last`, the final one is the transaction's last statement. */
export async function recordEvents(trx: Knex | Knex.Transaction, slugs: readonly string[], objectId: number, payload: Record<string, unknown>, last = false): Promise<void> {
  for (const [i, slug] of slugs.entries()) await recordEvent(trx, { slug, objectId, payload }, { last: last && i === slugs.length - 1 });
}

/** The event's insert, compiled once: in a write's transaction it skips Knex's builder (statementRows). */
const INSERT_EVENT = 'insert into "events" ("author_id", "initiator", "object_id", "object_type", "payload", "severity", "slug") values (?, ?, ?, ?, ?, ?, ?)';
