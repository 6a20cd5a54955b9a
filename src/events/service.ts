import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { TableService } from '../db/table-service';
import { EVENT_SLUGS } from './catalogue';

export const EVENT_INITIATORS = ['system', 'manual'] as const;

/** The list: filters by slug, by object (object_type with object_id) and by date (date_created[after]/[before]), newest first by default. */
export const eventListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.slug', 't.object_type'],
  sortable: { id: 't.id', date_created: 't.date_created', slug: 't.slug', severity: 't.severity' },
  filters: {
    slug: { column: 't.slug', type: { enum: EVENT_SLUGS } },
    object_type: { column: 't.object_type', type: 'string' },
    object_id: { column: 't.object_id', type: 'int' },
    // 1 to 5 only: an enumeration, so any other value is a 400 naming them (never a smallint overflow).
    severity: { column: 't.severity', type: { enum: ['1', '2', '3', '4', '5'] } },
    initiator: { column: 't.initiator', type: { enum: EVENT_INITIATORS } },
    author_id: { column: 't.author_id', type: 'int' },
  },
};

/** Reads of the event log (rows are written by recordEvent, in the transaction of their change). */
export function createEventService(db: Db): TableService {
  return new TableService(db, {
    table: 'events',
    model: 'event',
    columns: { slug: 'text', severity: 'int', initiator: 'text', author_id: 'int', object_type: 'text', object_id: 'int', payload: 'json' },
    listSpec: eventListSpec,
  });
}

/**
 * Deletes events older than `before`, oldest first, at most `batch` rows (one short
 * transaction each, so retention never holds a long lock); answers how many went.
 */
export async function pruneEvents(db: Db, before: Date, batch: number): Promise<number> {
  const res = await db.raw(
    'DELETE FROM events WHERE id IN (SELECT id FROM events WHERE date_created < ? ORDER BY date_created, id LIMIT ? FOR UPDATE SKIP LOCKED)',
    [before, batch],
  );
  return res.rowCount ?? 0;
}
