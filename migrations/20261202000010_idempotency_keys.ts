import type { Knex } from 'knex';

/**
 * The Idempotency-Key of every wu/v2 write (src/http/idempotency.ts; /register keeps its own in
 * `registrations`): the key's SHA-256, an HMAC of the request it came with, and the answer
 * given, replayed to a retry until `expires_at` (IDEMPOTENCY_KEY_TTL_HOURS). `running` while
 * the first request is under way (`locked_until` bounds how long a duplicate takes it for live).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE idempotency_keys (
    key_sha256 text PRIMARY KEY,
    request_hmac text NOT NULL,
    method text NOT NULL,
    path text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'done')),
    locked_until timestamptz NOT NULL,
    status integer,
    headers jsonb,
    body bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
  )`);
  await knex.raw('CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE idempotency_keys');
}
