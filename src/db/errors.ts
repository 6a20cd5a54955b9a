/** PostgreSQL error codes the stores translate into API errors. */
export const PG_UNIQUE_VIOLATION = '23505';
export const PG_FOREIGN_KEY_VIOLATION = '23503';
export const PG_CHECK_VIOLATION = '23514';
/** ON DELETE RESTRICT (PostgreSQL 18 reports it apart from 23503). */
export const PG_RESTRICT_VIOLATION = '23001';

export interface PgError {
  code?: string;
  constraint?: string;
}

export function isPgError(err: unknown, code: string): err is PgError {
  return typeof err === 'object' && err !== null && (err as PgError).code === code;
}

/** A delete refused because other rows still reference the row. */
export function isStillReferenced(err: unknown): err is PgError & { table?: string } {
  return isPgError(err, PG_FOREIGN_KEY_VIOLATION) || isPgError(err, PG_RESTRICT_VIOLATION);
}

/**
 * Connection-level SQLSTATEs: the server is shutting down (57P01 admin_shutdown, 57P02
 * crash_shutdown), starting (57P03 cannot_connect_now), or the connection failed (class 08).
 */
const UNAVAILABLE_PG_CODES = new Set(['57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);
/** Socket errors of a connection attempt or of an open connection. */
const UNAVAILABLE_SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE']);
/** What pg and Knex say, without a code, when a connection drops or none can be had (Knex puts the SQL before it). */
const UNAVAILABLE_MESSAGES = [/Connection terminated/, /Client has encountered a connection error/, /Client was closed and is not queryable/, /timeout exceeded when trying to connect/, /Knex: Timeout acquiring a connection/];

/**
 * The database could not be reached (down, restarting, refusing connections, or the pool timed
 * out waiting for a connection), as opposed to a query it answered with an error. Trying again
 * later may succeed. Looks into AggregateError (Node's connect to every address of a name), not
 * into `cause`: an outbound HTTP failure wraps the same socket codes and is no database outage.
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 5) return false;
  const e = err as { code?: unknown; message?: unknown; name?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (UNAVAILABLE_PG_CODES.has(e.code) || UNAVAILABLE_SOCKET_CODES.has(e.code))) return true;
  if (e.name === 'KnexTimeoutError') return true;
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGES.some((re) => re.test(e.message as string))) return true;
  return Array.isArray(e.errors) && e.errors.some((x) => isDatabaseUnavailable(x, depth + 1));
}
