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
