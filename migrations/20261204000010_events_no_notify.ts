import type { Knex } from 'knex';

/**
 * Events no longer NOTIFY at commit: the webhook relay polls for them (src/webhooks/dispatch.ts,
 * every 100 ms, with a statement that writes nothing when there are none). A NOTIFY makes
 * PostgreSQL take a database-wide lock from the notification queue's write through the commit,
 * so every transaction that wrote an event committed one after the other (issue 19: the
 * customer create's overhead). The indexes stay: each serves a list filter (slug, object, date
 * range, which retention uses too) or the dispatch ((txid, id)).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER IF EXISTS events_notify ON events');
  await knex.raw('DROP FUNCTION IF EXISTS hostflow_events_notify()');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`CREATE FUNCTION hostflow_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_notify('hostflow_events', ''); RETURN NULL; END $$`);
  await knex.raw('CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION hostflow_events_notify()');
}
