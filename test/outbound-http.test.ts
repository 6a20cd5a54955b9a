import dns from 'node:dns';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig } from '../src/config';
import { OutboundError, outboundFetch, OutboundPolicy, refusedAddressKind, urlRefusal, type Lookup } from '../src/infra/outbound-http';
import { startDnsServer, type DnsServer } from './loopback-servers';

/**
 * The guarded client every server-side fetch goes through: the address table, the allow-list,
 * and fetches against real servers on loopback (with a real DNS server answering 127.0.0.1 for
 * public-looking names).
 */
describe('outbound address classification', () => {
  test.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['100.64.0.1', 'shared (CGNAT)'],
    ['100.127.255.255', 'shared (CGNAT)'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.251', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.10', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['2001::1', 'reserved'],
    ['100::1', 'reserved'],
    ['::127.0.0.1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback via IPv4-mapped'],
    ['::ffff:7f00:1', 'loopback via IPv4-mapped'],
    ['::ffff:a9fe:a9fe', 'link-local via IPv4-mapped'],
    ['::ffff:0:a00:1', 'private via IPv4-translated'],
    ['64:ff9b::a9fe:a9fe', 'link-local via NAT64'],
    ['64:ff9b::10.1.2.3', 'private via NAT64'],
    ['64:ff9b:1::1', 'private'],
    ['2002:7f00:1::1', 'loopback via 6to4'],
    ['2002:c0a8:101::1', 'private via 6to4'],
  ])('%s is refused (%s)', (ip, kind) => {
    expect(refusedAddressKind(ip)).toBe(kind);
  });

  test.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '100.128.0.1', '192.169.0.1', '2606:4700:4700::1111', '2a00:1450:4001::1', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1'])(
    '%s is public',
    (ip) => {
      expect(refusedAddressKind(ip)).toBeNull();
    },
  );

  test('the allow-list: networks and host names (with *. for subdomains) from OUTBOUND_ALLOWED_HOSTS', () => {
    const config = loadConfig({ OUTBOUND_ALLOWED_HOSTS: ' 10.0.0.0/8, fd00::/8 ,127.0.0.1, GlotPress.Internal, *.corp.example ' });
    expect(config.OUTBOUND_ALLOWED_HOSTS).toEqual({
      hosts: ['glotpress.internal', '*.corp.example'],
      networks: [
        { address: '10.0.0.0', prefix: 8, family: 'ipv4' },
        { address: 'fd00::', prefix: 8, family: 'ipv6' },
        { address: '127.0.0.1', prefix: 32, family: 'ipv4' },
      ],
    });
    const policy = new OutboundPolicy(config.OUTBOUND_ALLOWED_HOSTS);
    expect(policy.addressRefusal('10.20.30.40')).toBeNull();
    expect(policy.addressRefusal('::ffff:10.20.30.40')).toBeNull();
    expect(policy.addressRefusal('fd00::5')).toBeNull();
    expect(policy.addressRefusal('127.0.0.1')).toBeNull();
    expect(policy.addressRefusal('127.0.0.2')).toBe('loopback');
    expect(policy.addressRefusal('192.168.0.1')).toBe('private');
    expect(policy.addressRefusal('8.8.8.8')).toBeNull();
    expect(policy.hostAllowed('glotpress.internal')).toBe(true);
    expect(policy.hostAllowed('GLOTPRESS.internal.')).toBe(true);
    expect(policy.hostAllowed('a.b.corp.example')).toBe(true);
    expect(policy.hostAllowed('corp.example')).toBe(false);
    expect(policy.hostAllowed('evilcorp.example')).toBe(false);
    expect(loadConfig({}).OUTBOUND_ALLOWED_HOSTS).toEqual({ hosts: [], networks: [] });
    for (const bad of ['10.0.0.0/33', 'http://x', '1.2.3.4/8/1', 'under_score.example', '::1/200']) {
      expect(() => loadConfig({ OUTBOUND_ALLOWED_HOSTS: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ OUTBOUND_ALLOWED_HOSTS: bad })).toThrow(/OUTBOUND_ALLOWED_HOSTS/);
    }
  });

  test('URLs refused before any DNS: other schemes, literal internal addresses in any spelling, localhost', () => {
    const none = new OutboundPolicy();
    const kind = (u: string) => urlRefusal(none, u)?.kind ?? null;
    expect(kind('ftp://example.com/a.pot')).toBe('invalid_url');
    expect(kind('file:///etc/passwd')).toBe('invalid_url');
    expect(kind('gopher://127.0.0.1:6379/_INFO')).toBe('invalid_url');
    expect(kind('not a url')).toBe('invalid_url');
    for (const u of [
      'http://127.0.0.1:8080/metrics',
      'http://2130706433/', // 127.0.0.1 as one number
      'http://0x7f.1/',
      'http://017700000001/',
      'http://[::1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://169.254.169.254/latest/meta-data/',
      'https://10.1.2.3/a.pot',
      'http://localhost:8080/',
      'http://api.localhost/',
      'http://[fd00::1]/',
    ]) {
      expect({ u, kind: kind(u) }).toEqual({ u, kind: 'refused' });
    }
    expect(urlRefusal(none, 'http://169.254.169.254/')!.message).toBe('169.254.169.254 is a link-local address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).');
    expect(kind('https://translate.wordpress.org/projects/wp-plugins/x/stable/de/default/export-translations/?format=po')).toBeNull();
    expect(kind('http://8.8.8.8/')).toBeNull();
    const allowed = new OutboundPolicy({ hosts: ['localhost'], networks: [{ address: '127.0.0.0', prefix: 8, family: 'ipv4' }] });
    expect(urlRefusal(allowed, 'http://127.0.0.1:8080/metrics')).toBeNull();
    expect(urlRefusal(allowed, 'http://localhost/')).toBeNull();
    expect(urlRefusal(allowed, 'http://10.0.0.1/')?.kind).toBe('refused');
  });
});

interface TestServer {
  url: string;
  port: number;
  /** Requests received (method, path, headers). */
  seen: { method: string; path: string; headers: http.IncomingHttpHeaders }[];
  /** TCP connections accepted: 0 proves a refused fetch never connected. */
  connections: number;
  close(): Promise<void>;
}

async function serve(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<TestServer> {
  const t: TestServer = { url: '', port: 0, seen: [], connections: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    t.seen.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers });
    handler(req, res);
  });
  server.on('connection', () => (t.connections += 1));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.port = (server.address() as AddressInfo).port;
  t.url = `http://127.0.0.1:${t.port}`;
  t.close = () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return t;
}

/** dns.lookup's shape, answered by a real DNS server over UDP (instead of the system resolver). */
function lookupVia(dnsServer: DnsServer): { lookup: Lookup; calls: string[] } {
  const resolver = new dns.Resolver();
  resolver.setServers([dnsServer.address]);
  const calls: string[] = [];
  const lookup: Lookup = (hostname, options, callback) => {
    calls.push(hostname);
    resolver.resolve4(hostname, (err, addresses) => {
      if (err) return callback(err, []);
      if (options.all) return callback(null, addresses.map((address) => ({ address, family: 4 })));
      callback(null, addresses[0], 4);
    });
  };
  return { lookup, calls };
}

async function failure(p: Promise<unknown>): Promise<OutboundError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OutboundError);
  return err as OutboundError;
}

describe('outbound fetches against loopback servers', () => {
  const SECRET = 'hostflow_secret_metric_total{tenant="acme"} 42';
  let metrics: TestServer;
  let dnsServer: DnsServer;
  const none = new OutboundPolicy();
  const loopback = new OutboundPolicy({ hosts: [], networks: [{ address: '127.0.0.1', prefix: 32, family: 'ipv4' }] });
  const opts = { maxBytes: 1_000_000, timeoutMs: 5_000 };

  beforeAll(async () => {
    metrics = await serve((req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end(`# HELP hostflow_secret_metric_total Internal.\n# TYPE hostflow_secret_metric_total counter\n${SECRET}\n`);
    });
    dnsServer = await startDnsServer(['pot.example.com', 'gp.example.com', 'other.example.com', 'evil.example.com']);
  });
  afterAll(async () => {
    await metrics?.close();
    await dnsServer?.close();
  });

  test('a loopback server is refused by default, without a connection; allowed when allow-listed', async () => {
    const before = metrics.connections;
    const err = await failure(outboundFetch(none, `${metrics.url}/metrics`, opts));
    expect(err.kind).toBe('refused');
    expect(err.retryable).toBe(false);
    expect(err.message).toBe('127.0.0.1 is a loopback address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).');
    expect(err.message).not.toContain('hostflow_secret');
    expect(metrics.connections).toBe(before);

    const ok = await outboundFetch(loopback, `${metrics.url}/metrics`, opts);
    expect(ok.status).toBe(200);
    expect(ok.body.toString()).toContain(SECRET);
    expect(metrics.seen.at(-1)).toMatchObject({ method: 'GET', path: '/metrics', headers: { 'accept-encoding': 'identity' } });
  });

  test('a public-looking name that resolves to 127.0.0.1 is refused at the connection; allowed by its name', async () => {
    const { lookup, calls } = lookupVia(dnsServer);
    const before = metrics.connections;
    const err = await failure(outboundFetch(none, `http://pot.example.com:${metrics.port}/metrics`, { ...opts, lookup }));
    expect(err.kind).toBe('refused');
    expect(err.message).toBe('pot.example.com resolves to a loopback address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).');
    expect(metrics.connections).toBe(before);
    // The connection's own lookup did the check: one DNS answer, no second one to rebind.
    expect(calls).toEqual(['pot.example.com']);
    expect(dnsServer.queries).toContain('pot.example.com');

    const byName = new OutboundPolicy({ hosts: ['pot.example.com'], networks: [] });
    const ok = await outboundFetch(byName, `http://pot.example.com:${metrics.port}/metrics`, { ...opts, lookup });
    expect(ok.status).toBe(200);
    expect(metrics.seen.at(-1)?.headers.host).toBe(`pot.example.com:${metrics.port}`);
  });

  test('a name with one public and one internal address is refused (no choosing the good one to check)', async () => {
    const before = metrics.connections;
    const twoFaced: Lookup = (_host, options, callback) => {
      const list = [
        { address: '93.184.216.34', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ];
      if (options.all) callback(null, list);
      else callback(null, list[0].address, 4);
    };
    const err = await failure(outboundFetch(none, `http://mixed.example.com:${metrics.port}/`, { ...opts, lookup: twoFaced }));
    expect(err.message).toMatch(/^mixed\.example\.com resolves to a loopback address/);
    expect(metrics.connections).toBe(before);
  });

  test('redirects: followed between allowed hosts (credentials dropped across origins), every hop checked, a bounded number', async () => {
    const { lookup } = lookupVia(dnsServer);
    const hosts = new OutboundPolicy({ hosts: ['gp.example.com', 'other.example.com'], networks: [] });
    const redirector = await serve((req, res) => {
      const to: Record<string, string> = {
        '/to-metrics': `http://127.0.0.1:${metrics.port}/metrics`,
        '/to-evil': `http://evil.example.com:${metrics.port}/metrics`,
        '/to-metadata': 'http://169.254.169.254/latest/meta-data/',
        '/to-file': 'file:///etc/passwd',
        '/to-other': `http://other.example.com:${metrics.port}/metrics`,
        '/loop': '/loop',
      };
      res.writeHead(req.url === '/to-other' ? 307 : 302, { Location: to[req.url ?? ''] ?? '/' });
      res.end('moved');
    });
    try {
      const get = (p: string, policy = hosts) => outboundFetch(policy, `http://gp.example.com:${redirector.port}${p}`, { ...opts, lookup, headers: { Authorization: 'Bearer sk-secret' } });
      const before = metrics.connections;
      for (const [p, pattern] of [
        ['/to-metrics', /^a redirect was refused: 127\.0\.0\.1 is a loopback address/],
        ['/to-evil', /^evil\.example\.com resolves to a loopback address/],
        ['/to-metadata', /^a redirect was refused: 169\.254\.169\.254 is a link-local address/],
      ] as const) {
        const err = await failure(get(p));
        expect({ p, kind: err.kind }).toEqual({ p, kind: 'refused' });
        expect(err.message).toMatch(pattern);
      }
      expect(metrics.connections).toBe(before);
      expect((await failure(get('/to-file'))).message).toBe('a redirect was refused: must be an http or https URL.');

      // Allowed by address, the loopback redirect target is reached.
      const viaAddress = new OutboundPolicy({ hosts: ['gp.example.com'], networks: [{ address: '127.0.0.1', prefix: 32, family: 'ipv4' }] });
      expect((await get('/to-metrics', viaAddress)).body.toString()).toContain(SECRET);

      const moved = await get('/to-other');
      expect(moved.status).toBe(200);
      expect(metrics.seen.at(-1)?.headers.host).toBe(`other.example.com:${metrics.port}`);
      expect(metrics.seen.at(-1)?.headers.authorization).toBeUndefined();
      expect(redirector.seen.find((r) => r.path === '/to-other')?.headers.authorization).toBe('Bearer sk-secret');

      const served = redirector.seen.length;
      const loop = await failure(get('/loop'));
      expect(loop).toMatchObject({ kind: 'redirect', message: 'more than 5 redirects.' });
      expect(redirector.seen.length - served).toBe(6);
    } finally {
      await redirector.close();
    }
  });

  test('an oversized answer is cut while it streams (with or without Content-Length); a silent or stalling server times out', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'a');
    let written = 0;
    const big = await serve((req, res) => {
      if (req.url === '/declared') {
        res.writeHead(200, { 'Content-Length': String(50 * 1024 * 1024) });
        res.write(chunk);
        return; // never finishes: the client must not wait for it
      }
      if (req.url === '/silent') return; // never answers
      if (req.url === '/stall') {
        res.writeHead(200, { 'Content-Type': 'text/plain' });
        res.write('msgid "a"\n');
        return; // the body never ends
      }
      res.writeHead(200, { 'Content-Type': 'text/plain' }); // chunked, no length
      const pump = () => {
        while (written < 50 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    try {
      const streamed = await failure(outboundFetch(loopback, `${big.url}/stream`, { ...opts, maxBytes: 256 * 1024 }));
      expect(streamed).toMatchObject({ kind: 'too_large', message: 'the answer is larger than 262144 bytes.' });
      expect(streamed.retryable).toBe(false);
      // Cut early: far less than the 50 MB the server would have sent.
      expect(written).toBeLessThan(20 * 1024 * 1024);
      const declared = await failure(outboundFetch(loopback, `${big.url}/declared`, { ...opts, maxBytes: 256 * 1024 }));
      expect(declared.kind).toBe('too_large');

      const started = Date.now();
      const slow = await failure(outboundFetch(loopback, `${big.url}/silent`, { ...opts, timeoutMs: 300 }));
      expect(slow).toMatchObject({ kind: 'timeout', message: 'no complete answer within 0.3 s.' });
      expect(slow.retryable).toBe(true);
      expect(Date.now() - started).toBeLessThan(3_000);

      const stalled = await failure(outboundFetch(loopback, `${big.url}/stall`, { ...opts, timeoutMs: 300 }));
      expect(stalled.kind).toBe('timeout');

      const cancelled = new AbortController();
      setTimeout(() => cancelled.abort(), 100);
      expect((await failure(outboundFetch(loopback, `${big.url}/silent`, { ...opts, signal: cancelled.signal }))).kind).toBe('aborted');
    } finally {
      await big.close();
    }
  });

  test('network failures say what failed and are retryable', async () => {
    const gone = await serve(() => undefined);
    const url = gone.url;
    await gone.close();
    const refused = await failure(outboundFetch(loopback, `${url}/x`, opts));
    expect(refused).toMatchObject({ kind: 'connect', message: 'the connection failed (ECONNREFUSED).' });
    expect(refused.retryable).toBe(true);
    const { lookup } = lookupVia(dnsServer);
    const unknown = await failure(outboundFetch(none, 'http://nowhere.example.com/x', { ...opts, lookup }));
    expect(unknown.kind).toBe('dns');
    expect(unknown.retryable).toBe(true);
  });
});
