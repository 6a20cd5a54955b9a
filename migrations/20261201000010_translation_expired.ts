import type { Knex } from 'knex';

/**
 * `expired`: a translation job nobody approved within TRANSLATION_APPROVAL_TIMEOUT_DAYS (its
 * workflow's approval wait ran out). Like `failed`, it keeps failure_step and failure_reason.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE translation_jobs DROP CONSTRAINT translation_jobs_status_check');
  await knex.raw(
    "ALTER TABLE translation_jobs ADD CONSTRAINT translation_jobs_status_check CHECK (status IN ('importing','pending_approval','processing','packaging','ready','failed','expired'))",
  );
}

export async function down(knex: Knex): Promise<void> {
  // Back to the old states: an expired job is shown as failed at the approval step.
  await knex('translation_jobs').where({ status: 'expired' }).update({ status: 'failed' });
  await knex.raw('ALTER TABLE translation_jobs DROP CONSTRAINT translation_jobs_status_check');
  await knex.raw(
    "ALTER TABLE translation_jobs ADD CONSTRAINT translation_jobs_status_check CHECK (status IN ('importing','pending_approval','processing','packaging','ready','failed'))",
  );
}
