import crypto from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Db } from '../db/knex';
import { logger } from '../logger';
import { ApiError, conflict } from './errors';

/** What an Idempotency-Key may be: 1 to 255 printable ASCII characters (as /register). */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
export const IDEMPOTENCY_KEY_PROBLEM = 'Idempotency-Key must be 1 to 255 printable ASCII characters.';

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** How long a first request is taken for live by its duplicates (then: interrupted). */
const LOCK_SECONDS = 600;
/** How long a duplicate waits for the first request's answer before a 409. */
const WAIT_MS = 5000;
const POLL_MS = 50;
/** Answers larger than this are not kept (a replay then says so). */
const MAX_BODY = 1024 * 1024;
/** Headers of the first answer that a replay does not repeat (per request or per connection). */
const NOT_REPLAYED = new Set(['x-request-id', 'date', 'connection', 'keep-alive', 'transfer-encoding', 'content-length', 'set-cookie', 'idempotent-replayed']);
const SWEEP_EVERY_MS = 60_000;
const SWEEP_ROWS = 1000;

interface KeyRow {
  request_hmac: string;
  method: string;
  path: string;
  state: 'running' | 'done';
  locked: boolean;
  expired: boolean;
  status: number | null;
  headers: Record<string, string | string[]> | null;
  body: Buffer | null;
}

export interface IdempotencyOptions {
  db: Db;
  /** How long a key and its answer are kept (IDEMPOTENCY_KEY_TTL_HOURS). */
  ttlHours: number;
  /** The key of the request fingerprint (an HMAC: bodies may hold passwords). */
  secret: () => Promise<Buffer>;
  /** Requests that handle the header themselves (/register). */
  skip?: (req: Request) => boolean;
}

/** JSON with the keys of every object sorted: two bodies that parse equal compare equal. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/**
 * Idempotency-Key on every write (POST, PUT, PATCH, DELETE) of the namespace: the first request
 * with a key runs and its answer is kept (PostgreSQL, every replica sees it) for `ttlHours`; a
 * retry with the same key and the same request (method, URL, body compared as parsed JSON)
 * gets that answer again, with `Idempotent-Replayed: true`, without running; with another
 * request, 409 wu_rest_idempotency_key_reused. A duplicate that arrives while the first is
 * running waits up to 5 s for its answer, then 409 wu_rest_idempotency_key_in_use. 2xx and 4xx
 * answers are final; a 5xx is not kept, so a retry runs again. A first request whose process
 * stopped before its answer was kept (a crash, not a deploy: a stopping API finishes its
 * requests) is 409 wu_rest_idempotency_key_interrupted: whether it took effect is unknown, and
 * running it again could do it twice.
 *
 * Runs after authentication and the body's checks: a request refused before it cannot use up a key.
 */
export function idempotencyKeys(opts: IdempotencyOptions) {
  const { db } = opts;
  let lastSweep = 0;
  const sweep = () => {
    if (Date.now() - lastSweep < SWEEP_EVERY_MS) return;
    lastSweep = Date.now();
    db.raw(`DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE expires_at < now() LIMIT ${SWEEP_ROWS})`).catch((err: Error) =>
      logger.warn({ err: err.message }, 'expired idempotency keys could not be removed'),
    );
  };

  const read = async (keySha: string): Promise<KeyRow | undefined> =>
    db('idempotency_keys')
      .where({ key_sha256: keySha })
      .first(
        'request_hmac',
        'method',
        'path',
        'state',
        'status',
        'headers',
        'body',
        db.raw('locked_until > now() AS locked'),
        db.raw('expires_at < now() AS expired'),
      );

  /** Inserts the key as running; false when it exists (an expired one is removed first). */
  const claim = async (keySha: string, hmac: string, req: Request): Promise<boolean> => {
    const insert = () =>
      db.raw(
        `INSERT INTO idempotency_keys (key_sha256, request_hmac, method, path, state, locked_until, expires_at)
         VALUES (?, ?, ?, ?, 'running', now() + make_interval(secs => ?), now() + make_interval(hours => ?))
         ON CONFLICT (key_sha256) DO NOTHING RETURNING key_sha256`,
        [keySha, hmac, req.method, req.originalUrl.slice(0, 2048), LOCK_SECONDS, opts.ttlHours],
      );
    if ((await insert()).rows.length > 0) return true;
    const removed = await db('idempotency_keys').where({ key_sha256: keySha }).where('expires_at', '<', db.fn.now()).delete();
    return removed > 0 && (await insert()).rows.length > 0;
  };

  const replay = (res: Response, row: KeyRow) => {
    if (row.body === null) {
      throw conflict(
        'wu_rest_idempotency_key_unreplayable',
        `The first request with this Idempotency-Key was answered ${row.status}, with a body too large to keep; it is not run again. Read the resource instead, or use a new key.`,
        { first_status: row.status },
      );
    }
    for (const [name, value] of Object.entries(row.headers ?? {})) res.setHeader(name, value);
    res.setHeader('Idempotent-Replayed', 'true');
    res.status(row.status!).end(row.body);
  };

  /** Keeps the answer (before it is sent), or forgets the key after a 5xx. */
  const keepAnswer = (res: Response, keySha: string) => {
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    let streamed = false;
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    res.write = ((...args: unknown[]) => {
      streamed = true;
      return write(...args);
    }) as Response['write'];
    res.end = ((...args: unknown[]) => {
      const [chunk, encoding] = args;
      const body = typeof chunk === 'string' ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8') : Buffer.isBuffer(chunk) ? chunk : typeof chunk === 'function' || chunk === undefined ? Buffer.alloc(0) : null;
      const status = res.statusCode;
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(res.getHeaders())) if (value !== undefined && !NOT_REPLAYED.has(name)) headers[name] = Array.isArray(value) ? value : String(value);
      const saved =
        status >= 500
          ? db('idempotency_keys').where({ key_sha256: keySha, state: 'running' }).delete()
          : db('idempotency_keys')
              .where({ key_sha256: keySha, state: 'running' })
              .update({ state: 'done', status, headers: JSON.stringify(headers), body: streamed || body === null || body.length > MAX_BODY ? null : body });
      saved.then(
        () => end(...args),
        (err: Error) => {
          // The answer goes out all the same; a retry will find the key running, then interrupted.
          logger.warn({ err: err.message }, 'the answer of an idempotent request could not be kept');
          end(...args);
        },
      );
      return res;
    }) as Response['end'];
  };

  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const key = req.get('idempotency-key');
    if (key === undefined || !WRITES.has(req.method) || opts.skip?.(req)) return next();
    try {
      if (!IDEMPOTENCY_KEY.test(key)) {
        throw new ApiError(400, 'wu_rest_invalid_parameter', 'Invalid parameter(s): Idempotency-Key', { params: { 'Idempotency-Key': IDEMPOTENCY_KEY_PROBLEM } });
      }
      sweep();
      const keySha = crypto.createHash('sha256').update(key).digest('hex');
      const hmac = crypto
        .createHmac('sha256', await opts.secret())
        .update(`${req.method}\n${req.originalUrl}\n${canonical(req.body ?? null)}`)
        .digest('hex');
      if (await claim(keySha, hmac, req)) {
        keepAnswer(res, keySha);
        return next();
      }
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        const row = await read(keySha);
        if (!row || row.expired) {
          // Removed (a 5xx) or expired meanwhile: this request is the first now.
          if (await claim(keySha, hmac, req)) {
            keepAnswer(res, keySha);
            return next();
          }
          continue;
        }
        if (row.request_hmac !== hmac) {
          throw conflict(
            'wu_rest_idempotency_key_reused',
            `This Idempotency-Key was already used with another request (${row.method} ${row.path.split('?')[0]}, or another body). Use a new key for a new request.`,
          );
        }
        if (row.state === 'done') return replay(res, row);
        if (!row.locked) {
          throw conflict(
            'wu_rest_idempotency_key_interrupted',
            'The first request with this Idempotency-Key was interrupted before its answer was kept (its process stopped), so whether it took effect is unknown and it is not run again. Read the resource to see, and use a new key to send it again.',
          );
        }
        if (Date.now() >= deadline) {
          throw new ApiError(409, 'wu_rest_idempotency_key_in_use', 'The first request with this Idempotency-Key is still running; try again shortly for its answer.', {}, { 'Retry-After': '1' });
        }
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    } catch (err) {
      next(err);
    }
  };
}
