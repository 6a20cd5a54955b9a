import crypto from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import { sha256 } from '../infra/digest';
import { ApiError } from './errors';
import type { AddressLimiter } from './limits';

const CREDENTIAL_KEYS = ['api_key', 'api_secret', 'api-key', 'api-secret'] as const;

/** Equal-length digests compared in constant time, whatever the inputs' lengths. */
export function constantTimeEqual(a: string, b: string): boolean {
  const da = crypto.createHash('sha256').update(a, 'utf8').digest();
  const db = crypto.createHash('sha256').update(b, 'utf8').digest();
  return crypto.timingSafeEqual(da, db);
}

interface Presented {
  key: string;
  secret: string;
}

/**
 * Basic wins when an Authorization: Basic header is present (even when wrong); otherwise
 * api_key/api_secret (or api-key/api-secret) from the query string or the body.
 */
export function presentedCredentials(req: Request): Presented | null {
  const header = req.headers.authorization;
  if (header && /^basic\s+/i.test(header)) {
    const decoded = Buffer.from(header.replace(/^basic\s+/i, '').trim(), 'base64').toString('utf8');
    const idx = decoded.indexOf(':');
    if (idx < 0) return { key: decoded, secret: '' };
    return { key: decoded.slice(0, idx), secret: decoded.slice(idx + 1) };
  }
  const pick = (name: 'key' | 'secret'): string | undefined => {
    for (const src of [req.query as Record<string, unknown>, (req.body ?? {}) as Record<string, unknown>]) {
      for (const k of [`api_${name}`, `api-${name}`]) {
        const v = src?.[k];
        if (typeof v === 'string') return v;
      }
    }
    return undefined;
  };
  const key = pick('key');
  const secret = pick('secret');
  if (key === undefined && secret === undefined) return null;
  return { key: key ?? '', secret: secret ?? '' };
}

/** Remove credential keys so they never reach a record or a log. */
export function stripCredentialKeys(obj: unknown): void {
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return;
  for (const k of CREDENTIAL_KEYS) delete (obj as Record<string, unknown>)[k];
}

/**
 * Counts a failed authentication of the request's client address (req.ip: TRUST_PROXY decides
 * whether X-Forwarded-For counts). Past the limit: 429 with Retry-After, instead of the caller's
 * 401. Only failures are counted: a request with the right credentials never gets here.
 */
export async function countAuthFailure(limiter: AddressLimiter, req: Request): Promise<void> {
  const wait = await limiter.take(req.ip ?? 'unknown');
  if (wait > 0) {
    throw new ApiError(429, 'rest_too_many_auth_failures', `Too many failed authentication attempts. Try again in ${wait} seconds.`, {}, { 'Retry-After': String(wait) });
  }
}

/**
 * Credentials verified lately, as SHA-256 digests of `key NUL secret`, so a caller that sends the
 * same credentials on every request costs one hash instead of the full check's five. Bounded
 * (MAX entries, each for TTL_MS) and tied to the stored credentials they matched: a rotation
 * empties it. The presented digest is compared with every entry in constant time.
 */
export class VerifiedCredentials {
  static readonly MAX = 16;
  static readonly TTL_MS = 60_000;
  private entries: { digest: Buffer; until: number }[] = [];
  private storedKey = '';
  private storedSecretSha256 = '';

  static digest(presented: Presented): Buffer {
    return crypto.createHash('sha256').update(presented.key, 'utf8').update('\u0000').update(presented.secret, 'utf8').digest();
  }

  has(digest: Buffer, stored: StoredCredentials, now = Date.now()): boolean {
    if (stored.key !== this.storedKey || stored.secretSha256 !== this.storedSecretSha256) {
      this.entries = [];
      this.storedKey = stored.key;
      this.storedSecretSha256 = stored.secretSha256;
      return false;
    }
    let found = false;
    for (const e of this.entries) {
      // No early exit: every live entry is compared.
      if (crypto.timingSafeEqual(e.digest, digest) && e.until > now) found = true;
    }
    return found;
  }

  add(digest: Buffer, now = Date.now()): void {
    this.entries = this.entries.filter((e) => e.until > now && !crypto.timingSafeEqual(e.digest, digest));
    if (this.entries.length >= VerifiedCredentials.MAX) this.entries.shift();
    this.entries.push({ digest, until: now + VerifiedCredentials.TTL_MS });
  }
}

/** No WWW-Authenticate (as WordPress): a Basic challenge makes browsers prompt for and then keep sending credentials, which cross-site forms could ride on. */
function forbidden(): ApiError {
  return new ApiError(401, 'rest_forbidden', 'Sorry, you are not allowed to do that.');
}

/** The stored API key pair: the key, and the SHA-256 (hex) of the secret. */
export interface StoredCredentials {
  key: string;
  secretSha256: string;
}

/** What the guard reads: the API switch and the stored key pair (the settings store, passed in by the app). */
export interface ApiAccessSource {
  get<T = unknown>(key: string): Promise<T | undefined>;
  credentials(): Promise<StoredCredentials | null>;
}

/**
 * Guards every wu/v2 route but the public index: the API switch first, then the credentials.
 * Runs before any parameter validation, so an anonymous caller learns nothing about them.
 */
export function requireApiAuth(settings: ApiAccessSource, limiter: AddressLimiter): RequestHandler {
  const verified = new VerifiedCredentials();
  return async (req, _res, next) => {
    try {
      const enabled = await settings.get<boolean>('enable_api');
      if (enabled === false) {
        throw new ApiError(
          403,
          'wu_rest_api_disabled',
          'The API is disabled. Enable it with `npm run cli -- settings set enable_api true` (or set enable_api to true in the settings).',
        );
      }
      const presented = presentedCredentials(req);
      const stored = await settings.credentials();
      let ok = false;
      if (presented !== null && stored !== null) {
        const digest = VerifiedCredentials.digest(presented);
        ok = verified.has(digest, stored);
        if (!ok) {
          // Both comparisons always run, so timing does not tell which part was wrong.
          ok = [constantTimeEqual(presented.key, stored.key), constantTimeEqual(sha256(presented.secret), stored.secretSha256)].every(Boolean);
          if (ok) verified.add(digest);
        }
      }
      if (!ok) {
        await countAuthFailure(limiter, req);
        throw forbidden();
      }
      stripCredentialKeys(req.body);
      next();
    } catch (err) {
      next(err);
    }
  };
}
