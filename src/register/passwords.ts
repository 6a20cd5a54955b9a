import type { Knex } from 'knex';
import type { Db } from '../db/knex';

/**
 * The scrypt hash of a new account's password, between POST /register and the saga step that
 * creates the user. It is kept in PostgreSQL (`registration_passwords`), never in Temporal: the
 * workflow input names the row only by its workflow id and keyed request fingerprint. The
 * step reads it and deletes the workflow's rows in its own transaction.
 *
 * Rows nobody takes (a start that failed or joined another body's workflow, a workflow that
 * never ran) are deleted by the next registration once they are HOLD_HOURS old, so they go
 * away without a timer in any process.
 */
export const HOLD_HOURS = 24;

type Conn = Db | Knex.Transaction;

export async function holdPassword(db: Db, workflowId: string, requestHmac: string, passwordHash: string): Promise<void> {
  await db('registration_passwords').where('date_created', '<', db.raw(`now() - interval '${HOLD_HOURS} hours'`)).delete();
  // A concurrent duplicate (same key, same body) already holds an equivalent hash.
  await db('registration_passwords').insert({ workflow_id: workflowId, request_hmac: requestHmac, password_hash: passwordHash }).onConflict(['workflow_id', 'request_hmac']).ignore();
}

/** The held hash of this workflow's request (null when there is none), and every row of the workflow deleted. */
export async function takePassword(trx: Knex.Transaction, workflowId: string, requestHmac: string): Promise<string | null> {
  const row = await trx('registration_passwords').where({ workflow_id: workflowId, request_hmac: requestHmac }).first('password_hash');
  await dropPasswords(trx, workflowId);
  return row?.password_hash ?? null;
}

/** Every held hash of a workflow (or of one of its requests only). */
export async function dropPasswords(db: Conn, workflowId: string, requestHmac?: string): Promise<void> {
  await db('registration_passwords')
    .where({ workflow_id: workflowId, ...(requestHmac === undefined ? {} : { request_hmac: requestHmac }) })
    .delete();
}
