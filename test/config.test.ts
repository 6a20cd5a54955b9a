import { ConfigError, loadConfig } from '../src/config';
import { AuthFailureLimiter, constantTimeEqual } from '../src/http/auth';

describe('configuration', () => {
  test('defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ PORT: 8080, REST_PREFIX: '/wp-json', DB_POOL_MAX: 10, TEMPORAL_NAMESPACE: 'default', TEMPORAL_TASK_QUEUE: 'hostflow', TEMPORAL_UI_PORT: 8233 });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.TEMPORAL_ADDRESS).toBeUndefined();
  });

  test('empty strings count as unset', () => {
    expect(loadConfig({ PORT: '', DATABASE_URL: '' }).PORT).toBe(8080);
  });

  test('every bad value is named in one clear message', () => {
    let err: unknown;
    try {
      loadConfig({ PORT: 'eighty', REST_PREFIX: 'wp-json/', DATABASE_URL: 'not a url', WU_API_SECRET: 'short', TRUST_PROXY: 'maybe' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    for (const name of ['PORT="eighty"', 'REST_PREFIX="wp-json/"', 'DATABASE_URL="not a url"', 'WU_API_SECRET="short"', 'TRUST_PROXY="maybe"']) {
      expect(msg).toContain(name);
    }
  });
});

describe('auth primitives', () => {
  test('constantTimeEqual compares values of any length', () => {
    expect(constantTimeEqual('abc', 'abc')).toBe(true);
    expect(constantTimeEqual('abc', 'abd')).toBe(false);
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
    expect(constantTimeEqual('', '')).toBe(true);
  });

  test('the failure limiter counts per address within a window and forgets after it', () => {
    const limiter = new AuthFailureLimiter(2, 1000);
    expect(limiter.retryAfter('a', 0)).toBe(0);
    limiter.recordFailure('a', 0);
    limiter.recordFailure('a', 10);
    expect(limiter.retryAfter('a', 20)).toBe(1);
    expect(limiter.retryAfter('b', 20)).toBe(0);
    expect(limiter.retryAfter('a', 1001)).toBe(0);
  });

  test('the failure limiter stays bounded in memory', () => {
    const limiter = new AuthFailureLimiter(1, 60_000, 100);
    for (let i = 0; i < 1000; i++) limiter.recordFailure(`addr${i}`, 0);
    expect((limiter as unknown as { failures: Map<string, unknown> }).failures.size).toBeLessThanOrEqual(100);
  });
});
