import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { TableService, type Row, type Trx } from '../db/table-service';
import { recordEvent } from '../events/record';
import { WEBHOOK_EVENTS } from './schema';
import { newSecret } from './signing';

export const webhookListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.name', 't.description', 't.webhook_url'],
  sortable: { id: 't.id', name: 't.name', event: 't.event', event_count: 't.event_count', date_last_failed: 't.date_last_failed', date_created: 't.date_created', date_modified: 't.date_modified' },
  filters: {
    event: { column: 't.event', type: { enum: WEBHOOK_EVENTS } },
    integration: { column: 't.integration', type: 'string' },
    active: { column: 't.active', type: 'bool' },
  },
};

/**
 * The webhook resource. `secret` is a column but never part of a record (decorate drops it):
 * only the create and rotate-secret answers carry it, once; deliveries read it by the
 * webhook's id (src/webhooks/deliver.ts), so it never travels through a workflow's history.
 */
export class WebhookService extends TableService {
  constructor(db: Db) {
    super(db, {
      table: 'webhooks',
      model: 'webhook',
      columns: {
        name: 'text',
        description: 'text',
        webhook_url: 'text',
        event: 'text',
        integration: 'text',
        active: 'bool',
        event_count: 'int',
        date_last_failed: 'timestamp',
        secret: 'text',
      },
      listSpec: webhookListSpec,
      decorate: (_row, rec) => {
        delete rec.secret;
      },
    });
  }

  /** The created webhook, with its generated secret (the one answer that shows it). */
  override async create(input: Row, outer?: Trx): Promise<Row> {
    const secret = newSecret();
    const rec = await super.create({ ...input, secret }, outer);
    return { ...rec, secret };
  }

  /** A new secret for the webhook (the old one stops signing at once): the record with it, or null when there is no such webhook. */
  async rotateSecret(id: number): Promise<Row | null> {
    const secret = newSecret();
    const [row] = await this.db('webhooks').where({ id }).update({ secret, date_modified: this.db.fn.now() }).returning('*');
    return row ? { ...this.toRecord(row), secret } : null;
  }
}

export function createWebhookService(db: Db): WebhookService {
  return new WebhookService(db);
}

/** A webhook's record as events carry it: the API's record, without the secret. */
export function webhookPayload(rest: Row): Record<string, unknown> {
  return {
    id: Number(rest.id),
    model: 'webhook',
    name: rest.name,
    description: rest.description,
    webhook_url: rest.webhook_url,
    event: rest.event,
    integration: rest.integration,
    active: Boolean(rest.active),
    event_count: Number(rest.event_count),
    date_last_failed: rest.date_last_failed ? new Date(rest.date_last_failed).toISOString() : null,
    date_created: new Date(rest.date_created).toISOString(),
    date_modified: new Date(rest.date_modified).toISOString(),
  };
}

/**
 * Turns an active webhook off and records webhook_disabled, in the caller's transaction (the
 * row locked by it); false when it was already off.
 */
export async function disableWebhook(trx: Knex.Transaction, webhookId: number): Promise<boolean> {
  const [row] = await trx('webhooks').where({ id: webhookId, active: true }).update({ active: false, date_modified: trx.fn.now() }).returning('*');
  if (!row) return false;
  await recordEvent(trx, { slug: 'webhook_disabled', objectId: Number(row.id), payload: webhookPayload(row) });
  return true;
}
