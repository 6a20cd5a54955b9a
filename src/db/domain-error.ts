/** What kind of refusal: http/errors.ts maps each kind to its status (400, 404, 409, 503). */
export type DomainErrorKind = 'invalid' | 'not_found' | 'conflict' | 'unavailable';

/**
 * What the db and temporal layers throw when a request cannot be done, without knowing HTTP:
 * the one error handler (src/http/errors.ts) answers it as an ApiError of the kind's status,
 * with `code`, the message, and `details` as the body's data (`params` for 'invalid').
 */
export class DomainError extends Error {
  constructor(
    readonly kind: DomainErrorKind,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }

  /** wu_rest_invalid_parameter with every offending parameter in `params`. */
  static invalid(params: Record<string, string>): DomainError {
    return new DomainError('invalid', 'wu_rest_invalid_parameter', `Invalid parameter(s): ${Object.keys(params).join(', ')}`, { params });
  }

  static conflict(code: string, message: string, details: Record<string, unknown> = {}): DomainError {
    return new DomainError('conflict', code, message, details);
  }
}
