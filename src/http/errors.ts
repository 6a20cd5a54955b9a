import type { ErrorRequestHandler, RequestHandler } from 'express';
import { DomainError, type DomainErrorKind } from '../db/domain-error';
import { isDatabaseUnavailable } from '../db/errors';
import { logger } from '../logger';

/**
 * The error the HTTP layer and the features throw (db and temporal throw DomainError, answered
 * as one of these by fromDomainError). It becomes the contract's error body:
 * {"code": ..., "message": ..., "data": {"status": ..., ...extra}}.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  toBody() {
    return { code: this.code, message: this.message, data: { status: this.status, ...this.extra } };
  }
}

const STATUS_OF_KIND: Record<DomainErrorKind, number> = { invalid: 400, not_found: 404, conflict: 409, unavailable: 503 };

/** The answer of a DomainError (what the db and temporal layers throw): its kind's status, its code, message and details. */
export function fromDomainError(err: DomainError): ApiError {
  return new ApiError(STATUS_OF_KIND[err.kind], err.code, err.message, err.details);
}

/** An error as the answer it becomes (ApiError, or DomainError mapped); undefined for anything else (a fault). */
export function asApiError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) return fromDomainError(err);
  return undefined;
}

/** 400 wu_rest_invalid_parameter with every offending parameter in data.params. */
export function invalidParams(params: Record<string, string>): ApiError {
  return fromDomainError(DomainError.invalid(params));
}

export function notFoundItem(model: string): ApiError {
  return new ApiError(404, `wu_rest_${model}_invalid_id`, 'Item not found.');
}

export function noRoute(): ApiError {
  return new ApiError(404, 'rest_no_route', 'No route was found matching the URL and request method.');
}

export function conflict(code: string, message: string, extra: Record<string, unknown> = {}): ApiError {
  return fromDomainError(DomainError.conflict(code, message, extra));
}

/**
 * 503 wu_rest_temporal_unavailable: the workflow service could not be reached. `what` says
 * what could not be done, `advice` what else the caller should know; `detail` is what the
 * client library said. A feature passes it (as its `Unavailable`) to the Temporal gateway.
 */
export function temporalUnavailable(what: string, detail?: string, advice = ''): ApiError {
  return new ApiError(503, 'wu_rest_temporal_unavailable', `${what} (the workflow service is unreachable). Try again later.${advice ? ` ${advice}` : ''}`, detail ? { detail } : {});
}

/** PostgreSQL's "invalid byte sequence" (NUL in text) and "unsupported Unicode escape" (\u0000 in jsonb). */
const UNSTORABLE_PG_CODES = new Set(['22021', '22P05']);

/** Seconds a caller is told to wait (Retry-After) when the database cannot be reached. */
export const DATABASE_RETRY_AFTER_SECONDS = 2;

/** 503 hostflow_database_unavailable: the database is down, restarting, or no pooled connection came in time. */
export function databaseUnavailable(): ApiError {
  return new ApiError(503, 'hostflow_database_unavailable', 'The database is unreachable right now. Try again in a few seconds.', {}, { 'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS) });
}

export const notFoundHandler: RequestHandler = (_req, _res, next) => next(noRoute());

export const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  let apiError: ApiError;
  const answer = asApiError(err);
  if (answer) {
    apiError = answer;
  } else if (err?.type === 'entity.parse.failed') {
    apiError = new ApiError(400, 'rest_invalid_json', 'Invalid JSON body passed.');
  } else if (err?.type === 'entity.too.large') {
    apiError = new ApiError(413, 'rest_request_too_large', `Request body is larger than the limit of ${err.limit} bytes.`, {
      limit: err.limit,
    });
  } else if (UNSTORABLE_PG_CODES.has(err?.code) && typeof err?.severity === 'string') {
    // A safety net: http/input.ts refuses such strings, naming them, before they get here.
    apiError = invalidParams({ request: 'A value holds a character PostgreSQL cannot store (NUL, U+0000); remove it.' });
  } else if (isDatabaseUnavailable(err)) {
    // The one place a lost database becomes an answer: every route, whatever query failed.
    (req.log ?? logger).warn({ err: err?.message, code: err?.code, method: req.method, path: req.originalUrl.split('?')[0] }, 'database unavailable');
    apiError = databaseUnavailable();
  } else if (err?.type === 'encoding.unsupported' || err?.type === 'charset.unsupported') {
    apiError = new ApiError(415, 'rest_unsupported_encoding', String(err.message));
  } else {
    const requestId = String(res.getHeader('X-Request-Id') ?? '');
    (req.log ?? logger).error({ err, method: req.method, path: req.originalUrl.split('?')[0] }, 'unhandled error');
    apiError = new ApiError(500, 'internal_error', 'An unexpected error occurred. Quote the request id when reporting it.', {
      request_id: requestId,
    });
  }
  if (res.headersSent) return;
  for (const [k, v] of Object.entries(apiError.headers)) res.setHeader(k, v);
  res.status(apiError.status).json(apiError.toBody());
};
