import type { Knex } from 'knex';

/**
 * Counters of the limiters every API replica shares (src/http/limits.ts): failed
 * authentications and chat session creation, per client address and fixed window. The columns
 * are the ones rate-limiter-flexible's RateLimiterPostgres reads and writes (its INSERT lists
 * no columns, so their order matters); it is created here, never by a replica at run time.
 * `expire` is in epoch milliseconds; its index serves the periodic removal of expired rows.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE rate_limits (
    key varchar(255) PRIMARY KEY,
    points integer NOT NULL DEFAULT 0,
    expire bigint
  )`);
  await knex.raw('CREATE INDEX rate_limits_expire_idx ON rate_limits (expire)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE rate_limits');
}
