import type { Db } from '../db/knex';
import { recordEvent } from '../events/record';
import type { ErrorBody, RegisterResult, RegistrationRequest } from './types';

/**
 * A new account's scrypt hash waits in its registration's row (never in Temporal) until the
 * records transaction takes it; a row nobody committed gives it up after HOLD_HOURS (swept by
 * the next registration, so no timer runs in any process).
 */
export const HOLD_HOURS = 24;

export interface RegistrationRow {
  id: number;
  workflow_id: string;
  idempotency_key_sha256: string | null;
  request_hmac: string | null;
  /** running: accepted, not committed yet; completed: the records exist; failed: `error` is the answer. */
  status: 'running' | 'completed' | 'failed';
  attempt: number;
  request: RegistrationRequest | null;
  error: ErrorBody | null;
  result: RegisterResult | null;
  customer_id: number | null;
  site_id: number | null;
  provisioning: 'running' | 'done' | 'compensated' | 'compensation_failed' | null;
  provisioning_error: ErrorBody | null;
  date_created: Date;
}

/** The `registrations` table: one row per registration, the source of every answer /register gives. */
export class RegistrationStore {
  constructor(private readonly db: Db) {}

  byKey(keySha256: string): Promise<RegistrationRow | undefined> {
    return this.db('registrations').where({ idempotency_key_sha256: keySha256 }).first();
  }

  byWorkflowId(workflowId: string): Promise<RegistrationRow | undefined> {
    return this.db('registrations').where({ workflow_id: workflowId }).first();
  }

  byId(id: number): Promise<RegistrationRow | undefined> {
    return this.db('registrations').where({ id }).first();
  }

  /**
   * Operators find a registration by e-mail here, not in Temporal (which holds no e-mail):
   * the account it created, or the customer or user it was for, has that address.
   */
  async findByEmail(email: string): Promise<RegistrationRow[]> {
    const e = email.trim().toLowerCase();
    return this.db('registrations as r')
      .leftJoin('users as u', 'u.id', 'r.user_id')
      .leftJoin('customers as c', 'c.id', 'r.customer_id')
      .leftJoin('users as cu', 'cu.id', 'c.user_id')
      .whereRaw("lower(r.request->'customer'->'account'->>'email') = ?", [e])
      .orWhereRaw('lower(u.email) = ?', [e])
      .orWhereRaw('lower(cu.email) = ?', [e])
      .orderBy('r.id')
      .select('r.*');
  }

  /**
   * Ids for the new customer and the new site, taken now (one query) so the workflow starts
   * with its search attributes set: nothing to upsert later.
   */
  async reserveIds(want: { customer: boolean; site: boolean }): Promise<{ customerId?: number; siteId?: number }> {
    if (!want.customer && !want.site) return {};
    const seq = (table: string) => `nextval(pg_get_serial_sequence('${table}', 'id'))`;
    const r = await this.db.raw(`SELECT ${want.customer ? seq('customers') : 'NULL'} AS customer_id, ${want.site ? seq('sites') : 'NULL'} AS site_id`);
    const { customer_id, site_id } = r.rows[0];
    return { customerId: customer_id === null ? undefined : Number(customer_id), siteId: site_id === null ? undefined : Number(site_id) };
  }

  /**
   * The row of a new registration. With an Idempotency-Key whose row failed for a reason of
   * the infrastructure (a 503) and holds the same request fingerprint, that row is taken over
   * for a new attempt. Null when another request holds the key (the caller reads that row).
   */
  async claim(r: { workflowId: string; keySha256: string | null; requestHmac: string; request: RegistrationRequest; passwordHash: string | null }): Promise<RegistrationRow | null> {
    // One round trip: held hashes nobody took within HOLD_HOURS are given up, then the row.
    const res = await this.db.raw(
      `WITH expired AS (
         UPDATE registrations SET password_hash = NULL
         WHERE password_hash IS NOT NULL AND date_modified < now() - interval '${HOLD_HOURS} hours'
       )
       INSERT INTO registrations (workflow_id, idempotency_key_sha256, request_hmac, request, password_hash, status)
       VALUES (?, ?, ?, ?::jsonb, ?, 'running')
       ON CONFLICT (idempotency_key_sha256) WHERE idempotency_key_sha256 IS NOT NULL
       DO UPDATE SET status = 'running', attempt = registrations.attempt + 1, request = EXCLUDED.request, password_hash = EXCLUDED.password_hash, error = NULL, date_modified = now()
         WHERE registrations.status = 'failed' AND registrations.request_hmac = EXCLUDED.request_hmac
           AND coalesce((registrations.error->'data'->>'status')::int, 500) >= 500
       RETURNING *`,
      [r.workflowId, r.keySha256, r.requestHmac, JSON.stringify(r.request), r.passwordHash],
    );
    return (res.rows[0] as RegistrationRow | undefined) ?? null;
  }

  /**
   * The API gave up on a registration it answered 503 (Temporal did not answer): marked failed
   * so the transaction, should the workflow still run, writes nothing. Returns the row as it is
   * now: `completed` when the transaction won the race (then that is the answer).
   */
  async abandon(id: number, body: ErrorBody): Promise<RegistrationRow> {
    await markRegistrationFailed(this.db, id, body);
    return (await this.byId(id))!;
  }
}

/**
 * A running registration decided as failed, with its answer, and its registration_failed event
 * in the same transaction. False when it was no longer running (decided meanwhile).
 */
export async function markRegistrationFailed(db: Db, id: number, body: ErrorBody): Promise<boolean> {
  return db.transaction(async (trx) => {
    const [row] = await trx('registrations')
      .where({ id, status: 'running' })
      .update({ status: 'failed', error: JSON.stringify(body), password_hash: null, date_modified: trx.fn.now() })
      .returning(['workflow_id']);
    if (!row) return false;
    await recordEvent(trx, { slug: 'registration_failed', objectId: id, payload: { workflow_id: row.workflow_id, ...body } });
    return true;
  });
}
