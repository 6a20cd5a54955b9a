/** PostgreSQL error codes the stores translate into API errors. */
export const PG_UNIQUE_VIOLATION = '23505';
export const PG_FOREIGN_KEY_VIOLATION = '23503';
export const PG_CHECK_VIOLATION = '23514';

export interface PgError {
  code?: string;
  constraint?: string;
}

export function isPgError(err: unknown, code: string): err is PgError {
  return typeof err === 'object' && err !== null && (err as PgError).code === code;
}
