import crypto from 'node:crypto';
import { ConfigError, loadConfig } from '../src/config';
import { parseTenantHosts } from '../src/config/tenant-hosts';
import { constantTimeEqual } from '../src/http/auth';
import { MemoryAddressLimiter } from '../src/http/limits';
import { defaultPublicBase, hostAllowed } from '../src/http/public-url';
import { decryptSecret, encryptSecret, parseCredentialsKey } from '../src/tenants/crypto';
import { scramVerifier } from '../src/tenants/tenant-db';

describe('configuration', () => {
  test('defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({ PORT: 8080, REST_PREFIX: '/wp-json', DB_POOL_MAX: 10, TEMPORAL_NAMESPACE: 'default', TEMPORAL_TASK_QUEUE: 'hostflow', TEMPORAL_UI_PORT: 8233 });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.TEMPORAL_ADDRESS).toBeUndefined();
  });

  test('DOMAIN_MAPPING_TARGET: an IP address or a host name (normalized); anything else is named', () => {
    expect(loadConfig({ DOMAIN_MAPPING_TARGET: '203.0.113.10' }).DOMAIN_MAPPING_TARGET).toBe('203.0.113.10');
    expect(loadConfig({ DOMAIN_MAPPING_TARGET: '2001:db8::1' }).DOMAIN_MAPPING_TARGET).toBe('2001:db8::1');
    expect(loadConfig({ DOMAIN_MAPPING_TARGET: ' Sites.Example.COM. ' }).DOMAIN_MAPPING_TARGET).toBe('sites.example.com');
    for (const bad of ['http://sites.example.com', 'sites', '300.1.1.1', 'a_b.example.com']) {
      expect(() => loadConfig({ DOMAIN_MAPPING_TARGET: bad })).toThrow(`DOMAIN_MAPPING_TARGET="${bad}": must be an IP address or a host name`);
    }
  });

  test('worker versioning: on by default, deployment hostflow, a starting worker makes its version current; bad values named', () => {
    expect(loadConfig({})).toMatchObject({ WORKER_VERSIONING: true, TEMPORAL_DEPLOYMENT_NAME: 'hostflow', WORKER_VERSIONING_SET_CURRENT: 'always' });
    expect(loadConfig({ WORKER_VERSIONING: 'false', TEMPORAL_DEPLOYMENT_NAME: 'hostflow-eu_1', WORKER_VERSIONING_SET_CURRENT: 'if-unset' })).toMatchObject({
      WORKER_VERSIONING: false,
      TEMPORAL_DEPLOYMENT_NAME: 'hostflow-eu_1',
      WORKER_VERSIONING_SET_CURRENT: 'if-unset',
    });
    // The version's name is <deployment>.<build id>: no dot in the deployment's.
    expect(() => loadConfig({ TEMPORAL_DEPLOYMENT_NAME: 'hostflow.eu' })).toThrow('TEMPORAL_DEPLOYMENT_NAME="hostflow.eu": must be 1-200 letters, digits');
    expect(() => loadConfig({ WORKER_VERSIONING_SET_CURRENT: 'sometimes' })).toThrow('WORKER_VERSIONING_SET_CURRENT="sometimes"');
  });

  test('billing: dunning days 1,3,5 and 7 on-hold days by default; a schedule that is not increasing days is named', () => {
    expect(loadConfig({})).toMatchObject({ BILLING_DUNNING_DAYS: [1, 3, 5], BILLING_ON_HOLD_DAYS: 7, BILLING_HTTP_GATEWAY_TIMEOUT_MS: 10_000 });
    expect(loadConfig({ BILLING_DUNNING_DAYS: ' 0.5, 2 ,10', BILLING_HTTP_GATEWAY_URL: 'http://127.0.0.1:9000/pay' })).toMatchObject({ BILLING_DUNNING_DAYS: [0.5, 2, 10], BILLING_HTTP_GATEWAY_URL: 'http://127.0.0.1:9000/pay' });
    for (const bad of ['3,1', '1,1', '0', '-1,2', 'x', ',', '400', Array.from({ length: 21 }, (_, i) => i + 1).join(',')]) {
      expect(() => loadConfig({ BILLING_DUNNING_DAYS: bad })).toThrow(`BILLING_DUNNING_DAYS="${bad}": must be 1-20 increasing numbers of days`);
    }
    expect(() => loadConfig({ BILLING_ON_HOLD_DAYS: '0' })).toThrow('BILLING_ON_HOLD_DAYS="0"');
    expect(() => loadConfig({ BILLING_HTTP_GATEWAY_URL: 'gateway' })).toThrow('BILLING_HTTP_GATEWAY_URL="gateway"');
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

describe('TRUST_PROXY', () => {
  test('false by default; true; a hop count; a list of proxies; anything else refused naming the variable', () => {
    expect(loadConfig({}).TRUST_PROXY).toBe(false);
    for (const off of ['false', 'no', '0', 'FALSE']) expect(loadConfig({ TRUST_PROXY: off }).TRUST_PROXY).toBe(false);
    for (const on of ['true', 'yes']) expect(loadConfig({ TRUST_PROXY: on }).TRUST_PROXY).toBe(true);
    expect(loadConfig({ TRUST_PROXY: '1' }).TRUST_PROXY).toBe(1);
    expect(loadConfig({ TRUST_PROXY: '10' }).TRUST_PROXY).toBe(10);
    expect(loadConfig({ TRUST_PROXY: ' loopback, 10.0.0.0/8 ,fd00::/8,192.0.2.7 ' }).TRUST_PROXY).toEqual(['loopback', '10.0.0.0/8', 'fd00::/8', '192.0.2.7']);
    for (const bad of ['maybe', '11', '-1', '1.5', '10.0.0.0/33', 'fd00::/129', '10.0.0.0/8/1', 'example.com', 'loopback,', ',', 'x'.repeat(10_000), 'lo\u0000opback']) {
      expect(() => loadConfig({ TRUST_PROXY: bad })).toThrow(/TRUST_PROXY=/);
    }
  });
});

describe('ALLOWED_HOSTS and the Host allow-list', () => {
  test('default: the loopback names, any port; a list is lower-cased; junk is refused naming the variable', () => {
    expect(loadConfig({}).ALLOWED_HOSTS).toEqual(['localhost', '127.0.0.1', '[::1]']);
    expect(loadConfig({ ALLOWED_HOSTS: ' API.example.com , *.example.org:8443 ' }).ALLOWED_HOSTS).toEqual(['api.example.com', '*.example.org:8443']);
    expect(() => loadConfig({ ALLOWED_HOSTS: 'https://api.example.com' })).toThrow(/ALLOWED_HOSTS="https:\/\/api.example.com"/);
  });

  test('hostAllowed: exact names, a fixed port, *.subdomains; never a look-alike or a malformed Host', () => {
    const list = ['localhost', '[::1]', 'api.example.com:8443', '*.example.org'];
    for (const host of ['localhost', 'LOCALHOST:3000', '[::1]:8080', 'api.example.com:8443', 'eu.example.org', 'a.b.example.org:1']) expect([host, hostAllowed(host, list)]).toEqual([host, true]);
    for (const host of ['api.example.com', 'api.example.com:443', 'example.org', 'evilexample.org', 'localhost.evil.net', 'localhost@evil.net', 'localhost/x', '', `${'a'.repeat(300)}.example.org`]) {
      expect([host, hostAllowed(host, list)]).toEqual([host, false]);
    }
  });

  test('the default link base is the listening address (127.0.0.1 for a wildcard bind)', () => {
    expect(defaultPublicBase({ HOST: '0.0.0.0', PORT: 8080 })).toBe('http://127.0.0.1:8080');
    expect(defaultPublicBase({ HOST: '::', PORT: 80 })).toBe('http://127.0.0.1:80');
    expect(defaultPublicBase({ HOST: '10.0.0.5', PORT: 9000 })).toBe('http://10.0.0.5:9000');
    expect(defaultPublicBase({ HOST: 'fd00::5', PORT: 9000 })).toBe('http://[fd00::5]:9000');
  });
});

describe('auth primitives', () => {
  test('constantTimeEqual compares values of any length', () => {
    expect(constantTimeEqual('abc', 'abc')).toBe(true);
    expect(constantTimeEqual('abc', 'abd')).toBe(false);
    expect(constantTimeEqual('abc', 'abcd')).toBe(false);
    expect(constantTimeEqual('', '')).toBe(true);
  });

  test('the in-memory limiter (the insurance while PostgreSQL is down) counts per address within a window and forgets after it', () => {
    const limiter = new MemoryAddressLimiter(2, 1000);
    expect(limiter.hit('a', 0)).toBe(0);
    expect(limiter.hit('a', 10)).toBe(0);
    expect(limiter.hit('a', 20)).toBe(980);
    expect(limiter.hit('b', 20)).toBe(0);
    expect(limiter.hit('a', 1001)).toBe(0);
  });

  test('the in-memory limiter stays bounded in memory', () => {
    const limiter = new MemoryAddressLimiter(1, 60_000, 100);
    for (let i = 0; i < 1000; i++) limiter.hit(`addr${i}`, 0);
    expect(limiter.tracked).toBeLessThanOrEqual(100);
  });
});

describe('tenant configuration and credentials', () => {
  test('TENANT_DATABASE_HOSTS: named and bare URLs; bad entries named in the config error', () => {
    expect(parseTenantHosts('eu=postgres://a@db1:5432/postgres, postgres://a@db2/postgres')).toEqual([
      { name: 'eu', url: 'postgres://a@db1:5432/postgres' },
      { name: 'db2:5432', url: 'postgres://a@db2/postgres' },
    ]);
    expect(() => parseTenantHosts('eu=mysql://x@db/y')).toThrow(/not a postgres:\/\/ URL/);
    expect(() => parseTenantHosts('a=postgres://x@h/p,a=postgres://x@i/p')).toThrow(/listed twice/);
    expect(() => loadConfig({ TENANT_DATABASE_HOSTS: 'eu=nonsense' })).toThrow(/TENANT_DATABASE_HOSTS="eu=nonsense": "nonsense" is not a URL/);
    expect(() => loadConfig({ TENANT_CREDENTIALS_KEY: 'short' })).toThrow(/TENANT_CREDENTIALS_KEY="short": must be 32 bytes/);
    expect(loadConfig({ TENANT_CREDENTIALS_KEY: 'ab'.repeat(32) }).TENANT_CREDENTIALS_KEY).toBe('ab'.repeat(32));
  });

  test('credentials encryption: round trip, bound to the tenant, tampering detected', () => {
    const key = parseCredentialsKey(crypto.randomBytes(32).toString('base64'));
    const sealed = encryptSecret(key, 'p4ssw0rd', 'tenant-uid-1');
    expect(sealed).toMatch(/^v1:/);
    expect(sealed).not.toContain('p4ssw0rd');
    expect(encryptSecret(key, 'p4ssw0rd', 'tenant-uid-1')).not.toBe(sealed); // a fresh IV each time
    expect(decryptSecret(key, sealed, 'tenant-uid-1')).toBe('p4ssw0rd');
    expect(() => decryptSecret(key, sealed, 'tenant-uid-2')).toThrow();
    expect(() => decryptSecret(parseCredentialsKey('cd'.repeat(32)), sealed, 'tenant-uid-1')).toThrow();
    const parts = sealed.split(':');
    parts[3] = Buffer.from('x'.repeat(8)).toString('base64');
    expect(() => decryptSecret(key, parts.join(':'), 'tenant-uid-1')).toThrow();
  });

  test('the role password reaches PostgreSQL only as a SCRAM-SHA-256 verifier', () => {
    const v = scramVerifier('secret');
    expect(v).toMatch(/^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$/);
    expect(v).not.toContain('secret');
    expect(scramVerifier('secret')).not.toBe(v); // salted
  });
});
