import type { Knex } from 'knex';

/**
 * The workflow start outbox (src/temporal/starts.ts): a start is written in the same
 * transaction as the row it belongs to (a translation job, a tenant's state, a domain in a
 * checking stage), so the row and its start exist together or not at all. The relay (and the
 * API's fast path right after commit) starts pending rows with their stored workflow id and
 * marks them started; a start whose outcome was unknown is tried again with the same id, so
 * it joins the run instead of doubling it. An insert notifies `hostflow_workflow_starts` on
 * commit, which wakes the relays.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE workflow_starts (
    id bigserial PRIMARY KEY,
    workflow_type text NOT NULL,
    workflow_id text NOT NULL,
    args jsonb NOT NULL,
    summary text NOT NULL,
    search_attributes jsonb NOT NULL DEFAULT '[]',
    options jsonb NOT NULL DEFAULT '{}',
    attempts integer NOT NULL DEFAULT 0,
    last_error text,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz
  )`);
  await knex.raw('CREATE INDEX workflow_starts_pending_idx ON workflow_starts (next_attempt_at) WHERE started_at IS NULL');
  await knex.raw('CREATE INDEX workflow_starts_started_idx ON workflow_starts (started_at) WHERE started_at IS NOT NULL');
  await knex.raw(`CREATE FUNCTION workflow_starts_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('hostflow_workflow_starts', '');
  RETURN NULL;
END $$`);
  await knex.raw('CREATE TRIGGER workflow_starts_notify AFTER INSERT ON workflow_starts FOR EACH STATEMENT EXECUTE FUNCTION workflow_starts_notify()');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE workflow_starts');
  await knex.raw('DROP FUNCTION workflow_starts_notify()');
}
