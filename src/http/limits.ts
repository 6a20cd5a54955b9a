import crypto from 'node:crypto';
import net from 'node:net';
import { RateLimiterCompatibleAbstract, RateLimiterPostgres, RateLimiterRes, RLWrapperTimeouts } from 'rate-limiter-flexible';
import type { Db } from '../db/knex';
import { logger } from '../logger';

/** The table of the shared counters (migrations/20261130000030_rate_limits.ts). */
export const RATE_LIMITS_TABLE = 'rate_limits';

/**
 * The stored key of a client address: an IP address as it is (readable, at most 45 characters
 * plus a short zone), anything else (an X-Forwarded-For value a client made up: any length,
 * any character, NUL included) as its SHA-256, so a key always fits the varchar(255) column
 * and every address has exactly one key.
 */
export function addressKey(address: string): string {
  if (address.length <= 64 && net.isIP(address) !== 0 && /^[0-9A-Za-z.:%_-]+$/.test(address)) return address;
  return `sha256:${crypto.createHash('sha256').update(address, 'utf8').digest('hex')}`;
}

/**
 * Counts events per key in a fixed window, in this process's memory, bounded: at most
 * `maxTracked` keys are kept (expired windows are swept first, then the oldest dropped, which
 * forgets some counts rather than grow without bound). The insurance of AddressLimiter while
 * PostgreSQL does not answer; per process, so with N replicas a client gets up to N times the
 * limit during an outage (the behaviour every replica had before the counters moved to PostgreSQL).
 */
export class MemoryAddressLimiter {
  private readonly counts = new Map<string, { count: number; resetAt: number }>();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly maxTracked = 100_000,
  ) {}

  /** Counts one event of the key: 0 while within the limit, otherwise the milliseconds until its window ends. */
  hit(key: string, now = Date.now()): number {
    let entry = this.counts.get(key);
    if (!entry || entry.resetAt <= now) {
      if (this.counts.size >= this.maxTracked) this.sweep(now);
      entry = { count: 0, resetAt: now + this.windowMs };
      this.counts.set(key, entry);
    }
    entry.count += 1;
    return entry.count > this.limit ? entry.resetAt - now : 0;
  }

  /** How many keys are tracked now (bounded by maxTracked). */
  get tracked(): number {
    return this.counts.size;
  }

  private sweep(now: number): void {
    for (const [k, v] of this.counts) if (v.resetAt <= now) this.counts.delete(k);
    // Still full of live entries: drop the oldest rather than grow without bound.
    while (this.counts.size >= this.maxTracked) {
      const first = this.counts.keys().next().value;
      if (first === undefined) break;
      this.counts.delete(first);
    }
  }
}

/**
 * MemoryAddressLimiter in the shape rate-limiter-flexible takes as an `insuranceLimiter` (its own
 * RateLimiterMemory keeps every key of the window, unbounded). Only `consume` is ever called:
 * the limiters below do nothing else. Says, at most once a minute, that it is standing in.
 */
class Insurance extends RateLimiterCompatibleAbstract {
  // Own fields (class fields are defined, not assigned): the base class's accessors throw.
  // The library copies blockDuration and execEvenly in from the limiter it insures; windows
  // here are fixed, so they are not read.
  override readonly keyPrefix: string;
  override blockDuration = 0;
  override execEvenly = false;
  private readonly memory: MemoryAddressLimiter;
  private warnedAt = 0;

  constructor(name: string, limit: number, windowMs: number) {
    super();
    this.keyPrefix = name;
    this.memory = new MemoryAddressLimiter(limit, windowMs);
  }

  override consume(key: string | number): Promise<RateLimiterRes> {
    const now = Date.now();
    if (now - this.warnedAt > 60_000) {
      this.warnedAt = now;
      logger.warn({ limiter: this.keyPrefix }, 'rate limit store unreachable: counting in this process only');
    }
    const wait = this.memory.hit(String(key), now);
    return wait > 0 ? Promise.reject(new RateLimiterRes(0, wait)) : Promise.resolve(new RateLimiterRes(1, 0));
  }
}

export interface AddressLimit {
  /** Names the counters in the table (the key prefix) and in logs: one name per limiter. */
  name: string;
  limit: number;
  windowSeconds: number;
}

/**
 * The limiters of one app, all in the one table. Built once per app (createApp); hands out one
 * AddressLimiter per name. `storeTimeoutMs`: how long a count may wait for PostgreSQL before
 * the process counts on its own.
 */
export class RateLimits {
  private readonly names = new Set<string>();

  constructor(
    private readonly db: Db,
    private readonly storeTimeoutMs: number,
  ) {}

  perAddress(limit: AddressLimit): AddressLimiter {
    if (this.names.has(limit.name)) throw new Error(`rate limiter ${limit.name} is built twice: its counters would be shared`);
    // One limiter per app runs the library's removal of expired rows (they all share the table).
    const clearsExpired = this.names.size === 0;
    this.names.add(limit.name);
    return new AddressLimiter(this.db, limit, this.storeTimeoutMs, clearsExpired);
  }
}

/**
 * Counts events per client address in a fixed window, in PostgreSQL, so every API replica
 * enforces one limit (rate-limiter-flexible's RateLimiterPostgres: one atomic
 * INSERT … ON CONFLICT DO UPDATE per event, which starts a new window once the stored one has
 * expired). When PostgreSQL fails or does not answer within the store timeout, the event is
 * counted in this process's bounded memory instead: the limit still holds per process, and no
 * request fails because of the limiter.
 *
 * With `clearsExpired`, rows expired over an hour ago are removed every 5 minutes (the library's
 * timer, unref'd): with N replicas, N run the same idempotent DELETE, served by the index on
 * `expire`. Windows are measured with the replicas' clocks (Date.now()): keep them in sync (NTP).
 */
export class AddressLimiter {
  private readonly limiter: RLWrapperTimeouts;

  constructor(db: Db, readonly options: AddressLimit, storeTimeoutMs: number, clearsExpired: boolean) {
    const { name, limit, windowSeconds } = options;
    const store = new RateLimiterPostgres({
      storeClient: db,
      storeType: 'knex',
      tableName: RATE_LIMITS_TABLE,
      tableCreated: true,
      clearExpiredByTimeout: clearsExpired,
      keyPrefix: name,
      points: limit,
      duration: windowSeconds,
    });
    // Errors and timeouts of the store, and only they, fall back to the insurance.
    this.limiter = new RLWrapperTimeouts({ limiter: store, timeoutMs: storeTimeoutMs, insuranceLimiter: new Insurance(name, limit, windowSeconds * 1000) });
  }

  /**
   * Counts one event of the address: 0 while it is within the limit, otherwise the seconds until
   * its window ends (for Retry-After, at least 1). Every event counts, refused ones included
   * (they do not move the window's end).
   */
  async take(address: string): Promise<number> {
    try {
      await this.limiter.consume(addressKey(address));
      return 0;
    } catch (err) {
      if (err instanceof RateLimiterRes) return Math.max(1, Math.ceil(err.msBeforeNext / 1000));
      throw err;
    }
  }
}
