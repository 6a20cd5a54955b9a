import fs from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startHttp } from '../src/runtime';
import type { RunningWorker } from '../src/temporal/worker';
import { startWorker } from '../src/worker-runtime';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

describe('service routes', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  test('GET / advertises the REST index with a Link header (node-wpapi discovery)', async () => {
    const res = await ctx.http.get('/');
    expect(res.status).toBe(200);
    expect(res.headers.link).toMatch(/<http:\/\/[^>]+\/wp-json\/>; rel="https:\/\/api\.w\.org\/"/);
    const head = await ctx.http.head('/');
    expect(head.headers.link).toMatch(/rel="https:\/\/api\.w\.org\/"/);
  });

  test('GET /wp-json/ lists namespaces and routes without auth', async () => {
    const res = await ctx.http.get('/wp-json/');
    expect(res.status).toBe(200);
    expect(res.body.namespaces).toContain('wu/v2');
    expect(res.body.routes['/wu/v2/customers'].methods).toEqual(expect.arrayContaining(['GET', 'POST']));
    expect(res.body.routes['/wu/v2/customer/(?P<id>[\\d]+)'].methods).toEqual(expect.arrayContaining(['GET', 'PUT', 'PATCH', 'POST', 'DELETE']));
    expect(res.body.routes['/wu/v2/settings']).toBeDefined();
  });

  test('GET /wp-json/wu/v2 is the namespace index, without auth', async () => {
    for (const path of ['/wp-json/wu/v2', '/wp-json/wu/v2/']) {
      const res = await ctx.http.get(path);
      expect(res.status).toBe(200);
      expect(res.body.namespace).toBe('wu/v2');
      expect(Object.keys(res.body.routes)).toEqual(expect.arrayContaining(['/wu/v2/auth', '/wu/v2/customers', '/wu/v2/customers/(?P<id>[\\d]+)']));
    }
  });

  test('the index describes every argument as WordPress does (required, type, description, enum, default…), from the schemas of the OpenAPI document', async () => {
    const index = (await ctx.http.get('/wp-json/wu/v2')).body;
    const root = (await ctx.http.get('/wp-json/')).body;
    const doc = (await ctx.http.get(`${BASE}/openapi.json`)).body;
    const endpoint = (route: string, method: string) => index.routes[route].endpoints.find((e: { methods: string[] }) => e.methods.includes(method));

    const list = endpoint('/wu/v2/customers', 'GET').args;
    expect(list.per_page).toEqual({ description: 'Items per page.', type: 'integer', minimum: 1, maximum: 100, default: 20, required: false });
    expect(list.orderby).toMatchObject({ type: 'string', enum: expect.arrayContaining(['id', 'email', 'date_created']), required: false });
    expect(list.vip).toMatchObject({ type: 'boolean', required: false });
    expect(list.email__in).toMatchObject({ type: 'array', maxItems: 100, required: false });
    expect(list._fields).toMatchObject({ type: 'array', required: false, description: expect.stringContaining('billing_address') });
    // Customers link to nothing embeddable; memberships do.
    expect(list._embed).toBeUndefined();
    expect(endpoint('/wu/v2/memberships', 'GET').args._embed).toMatchObject({ type: 'array', description: expect.stringContaining('customer, plan') });

    const create = endpoint('/wu/v2/customers', 'POST').args;
    expect(create.username).toEqual({ type: 'string', minLength: 4, maxLength: 60, pattern: expect.any(String), required: false });
    expect(create.email).toMatchObject({ type: 'string', format: 'email', required: false });
    const membership = endpoint('/wu/v2/memberships', 'POST').args;
    expect(membership.customer_id).toMatchObject({ type: 'integer', required: true });
    expect(membership.plan_id).toMatchObject({ type: 'integer', required: true });
    expect(membership.status).toEqual({ type: 'string', enum: ['pending', 'active', 'trialing', 'expired', 'on-hold', 'cancelled'], required: false });
    expect(membership.addon_products.items.properties).toMatchObject({ product_id: { type: 'integer' }, quantity: { type: 'integer', minimum: 1 } });
    // An object argument says which of its fields are required, as WordPress (required: true on each).
    expect(endpoint('/wu/v2/register', 'POST').args.customer.properties).toBeDefined();
    expect(endpoint('/wu/v2/translations/check/batch', 'POST').args.packages).toMatchObject({ type: 'array', required: true });

    // One endpoint per handler: update answers PUT, PATCH and POST with the same arguments.
    const byId = index.routes['/wu/v2/customers/(?P<id>[\\d]+)'];
    expect(byId.endpoints.map((e: { methods: string[] }) => e.methods)).toEqual([['GET'], ['PUT', 'PATCH', 'POST'], ['DELETE']]);
    expect(byId.endpoints[0].args.id).toMatchObject({ type: 'integer', minimum: 1, required: true });
    expect(byId.endpoints[1].args.vip).toEqual({ type: 'boolean', required: false });
    // A route without parameters links to itself; the index is plain JSON Schema, no $ref.
    expect(index.routes['/wu/v2/customers']._links.self[0].href).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/wp-json\/wu\/v2\/customers$/);
    expect(byId._links).toBeUndefined();
    expect(JSON.stringify(index)).not.toContain('$ref');

    // It cannot drift: every operation's arguments are the document's parameters and body fields, on both indexes.
    let checked = 0;
    for (const [route, info] of Object.entries(root.routes) as [string, any][]) {
      for (const e of info.endpoints) {
        for (const method of e.methods) {
          const path = `/wp-json${route.replace(/\(\?P<(\w+)>[^)]+\)/g, '{$1}')}`;
          const op = doc.paths[path]?.[method.toLowerCase()];
          expect({ route, method, documented: Boolean(op) }).toEqual({ route, method, documented: true });
          const body = op.requestBody?.content['application/json']?.schema;
          const bodyNames = body?.properties ? Object.keys(body.properties) : (body?.anyOf ?? body?.oneOf ?? []).flatMap((b: any) => Object.keys(b.properties ?? {}));
          const expected = new Set([...(op.parameters ?? []).map((p: { name: string }) => p.name), ...bodyNames]);
          expect({ route, method, args: Object.keys(e.args).sort() }).toEqual({ route, method, args: [...expected].sort() });
          checked += 1;
        }
      }
      if (info.namespace === 'wu/v2') expect(index.routes[route].endpoints).toEqual(info.endpoints);
    }
    expect(checked).toBeGreaterThan(100);
  });

  test('the REST prefix is configurable', async () => {
    const other = await createTestContext({ REST_PREFIX: '/api' });
    try {
      expect((await other.http.get('/api/wu/v2/auth').set('Authorization', other.basic)).status).toBe(200);
      expect((await other.http.get('/wp-json/wu/v2/auth').set('Authorization', other.basic)).status).toBe(404);
      expect((await other.http.get('/')).headers.link).toMatch(/\/api\/>; rel=/);
    } finally {
      await other.close();
    }
  });

  test('GET /healthz answers without auth', async () => {
    const res = await ctx.http.get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  test('GET /readyz checks the database and Temporal, and counts polling workers', async () => {
    const before = await ctx.http.get('/readyz');
    expect(before.status).toBe(200);
    expect(before.body.checks.database.ok).toBe(true);
    expect(before.body.checks.temporal).toMatchObject({ ok: true, workers_polling: 0 });
    expect(before.body.checks.storage).toEqual({ ok: true, driver: 'local' });

    let worker: RunningWorker | undefined;
    try {
      worker = await startWorker({ address: process.env.HF_TEST_TEMPORAL_ADDRESS!, namespace: 'default', taskQueue: ctx.config.TEMPORAL_TASK_QUEUE, db: ctx.db, config: ctx.config });
      let polling = 0;
      for (let i = 0; i < 40 && polling === 0; i++) {
        polling = (await ctx.http.get('/readyz')).body.checks.temporal.workers_polling;
        if (polling === 0) await new Promise((r) => setTimeout(r, 250));
      }
      expect(polling).toBeGreaterThanOrEqual(1);
    } finally {
      await worker?.shutdown();
    }
  });

  test('GET /readyz is 503 when the database is unreachable', async () => {
    const broken = await createTestContext({});
    await broken.db.destroy();
    const { createDb } = await import('../src/db/knex');
    const { createApp } = await import('../src/app');
    const { Metrics } = await import('../src/http/metrics');
    const deadDb = createDb('postgres://postgres:x@127.0.0.1:1/none', 1);
    const app = createApp({ config: broken.config, db: deadDb, settings: broken.settings, temporal: broken.temporal, metrics: new Metrics() });
    const request = (await import('supertest')).default;
    const res = await request(app).get('/readyz');
    expect(res.status).toBe(503);
    expect(res.body.status).toBe('not_ready');
    expect(res.body.checks.database.ok).toBe(false);
    await deadDb.destroy();
    broken.db = createDb(broken.dbUrl, 1);
    await broken.close();
  });

  test('GET /readyz is 503 when the file store cannot be used, and says why', async () => {
    const { createApp } = await import('../src/app');
    const { Metrics } = await import('../src/http/metrics');
    const { LocalObjectStorage } = await import('../src/infra/object-storage');
    const file = path.join(os.tmpdir(), `hostflow-not-a-folder-${process.pid}`);
    fs.writeFileSync(file, 'x');
    const storage = new LocalObjectStorage(path.join(file, 'objects'));
    try {
      const app = createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal: ctx.temporal, metrics: new Metrics(), storage });
      const request = (await import('supertest')).default;
      const res = await request(app).get('/readyz');
      expect(res.status).toBe(503);
      expect(res.body.status).toBe('not_ready');
      expect(res.body.checks.database.ok).toBe(true);
      expect(res.body.checks.storage).toMatchObject({ ok: false, driver: 'local', error: expect.stringMatching(/ENOTDIR/) });
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  test('GET /metrics: Prometheus text with requests by route and status, latency, pool use, workflows started', async () => {
    await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).send(newCustomerBody());
    await ctx.http.get(`${BASE}/customers/42`).set('Authorization', ctx.basic);
    const res = await ctx.http.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    expect(res.text).toMatch(/http_requests_total\{method="POST",route="\/wp-json\/wu\/v2\/customers",status="200"\} 1/);
    expect(res.text).toMatch(/http_requests_total\{method="GET",route="\/wp-json\/wu\/v2\/customers\/:id",status="404"\} 1/);
    expect(res.text).toMatch(/http_request_duration_seconds_bucket\{le="[0-9.]+",method="POST",route="\/wp-json\/wu\/v2\/customers"\}/);
    expect(res.text).toMatch(/db_pool_connections_max 5/);
    expect(res.text).toMatch(/db_pool_connections_used \d+/);
    expect(res.text).toMatch(/# TYPE temporal_workflows_started_total counter/);
  });

  describe('absolute links and the Host header', () => {
    const CHAT = '/wp-json/ultimate-multisite-support-tickets/v1';
    const links = async (t: TestContext, host: string) => {
      const root = await t.http.get('/').set('Host', host);
      const index = await t.http.get('/wp-json/').set('Host', host);
      await t.http.post(`${BASE}/customers`).set('Authorization', t.basic).send(newCustomerBody());
      await t.http.post(`${BASE}/customers`).set('Authorization', t.basic).send(newCustomerBody());
      const page = await t.http.get(`${BASE}/customers?per_page=1`).set('Authorization', t.basic).set('Host', host);
      if (page.status !== 200) throw new Error(`${page.status} ${JSON.stringify(page.body)}`);
      const session = await t.http.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Ada' });
      const token = await t.http.post(`${CHAT}/chat/sessions/${session.body.session.id}/token`).set('Host', host).set('Authorization', `Bearer ${session.body.token}`).send({});
      return { root: root.headers.link, url: index.body.url, home: index.body.home, page: page.headers.link, realtime: token.body.realtime.url as string };
    };

    test('a hostile Host never reaches a link: the listening address is used instead', async () => {
      const got = await links(ctx, 'evil.example.net');
      expect(got.root).toBe('<http://127.0.0.1:8080/wp-json/>; rel="https://api.w.org/"');
      expect(got.url).toBe('http://127.0.0.1:8080');
      expect(got.home).toBe('http://127.0.0.1:8080');
      expect(got.page).toMatch(/^<http:\/\/127\.0\.0\.1:8080\/wp-json\/wu\/v2\/customers\?per_page=1&page=2&cursor=[\w-]+\.[\w-]+>; rel="next"$/);
      expect(got.realtime).toMatch(/^ws:\/\/127\.0\.0\.1:8080\/wp-json\/ultimate-multisite-support-tickets\/v1\/chat\/realtime\?token=/);
      expect(JSON.stringify(got)).not.toContain('evil');
    });

    test('loopback names with any port are allowed by default', async () => {
      const got = await links(ctx, 'localhost:3000');
      expect(got.url).toBe('http://localhost:3000');
      expect(got.page).toContain('<http://localhost:3000/wp-json/wu/v2/customers?');
      expect(got.realtime).toMatch(/^ws:\/\/localhost:3000\//);
    });

    test('ALLOWED_HOSTS lists the names (and *.subdomains) whose Host is used; PUBLIC_URL wins over any Host', async () => {
      const listed = await createTestContext({ ALLOWED_HOSTS: 'api.example.com,*.example.org' });
      try {
        expect((await links(listed, 'api.example.com')).url).toBe('http://api.example.com');
        expect((await links(listed, 'eu.example.org:8443')).url).toBe('http://eu.example.org:8443');
        expect((await links(listed, 'example.org')).url).toBe('http://127.0.0.1:8080');
        expect((await links(listed, 'localhost')).url).toBe('http://127.0.0.1:8080');
      } finally {
        await listed.close();
      }
      const fixed = await createTestContext({ PUBLIC_URL: 'https://api.example.com/' });
      try {
        const got = await links(fixed, 'evil.example.net');
        expect(got.url).toBe('https://api.example.com');
        expect(got.page).toContain('<https://api.example.com/wp-json/wu/v2/customers?');
      } finally {
        await fixed.close();
      }
    });
  });

  describe('requests Node cannot parse, over a real socket', () => {
    let server: Awaited<ReturnType<typeof startHttp>>;
    let port: number;
    beforeAll(async () => {
      server = await startHttp({ ...ctx.config, PORT: 0 }, ctx.db, ctx.settings, ctx.temporal, ctx.metrics);
      port = (server.server.address() as AddressInfo).port;
    });
    afterAll(() => server.close());

    /** Sends raw bytes; answers the status line, headers and body, and whether the server closed the connection. */
    const raw = (text: string) =>
      new Promise<{ status: number; headers: Record<string, string>; body: string }>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1');
        let data = '';
        socket.on('data', (d) => (data += d.toString('utf8')));
        socket.on('error', reject);
        socket.on('end', () => {
          const [head, ...rest] = data.split('\r\n\r\n');
          const [statusLine, ...lines] = head.split('\r\n');
          const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
          resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
        });
        socket.write(text);
      });

    test('a URL over 16 KiB: 431 with a JSON error in the contract shape saying where long inputs go, and the connection closed', async () => {
      const res = await raw(`GET ${BASE}/customers?search=${'x'.repeat(20_000)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      expect(res.status).toBe(431);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.headers.connection).toBe('close');
      const body = JSON.parse(res.body);
      expect(body).toMatchObject({ code: 'rest_request_header_too_large', data: { status: 431 } });
      expect(body.message).toMatch(/16 KiB/);
      expect(body.message).toMatch(/translations\/check\/batch/);
    });

    test('a malformed request (a header name with a space, a NUL in a header value): 400 in the contract shape', async () => {
      for (const bad of ['Bad Header: x', 'X-Ok: a\u0000b']) {
        const res = await raw(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n${bad}\r\n\r\n`);
        expect(res.status).toBe(400);
        expect(res.headers.connection).toBe('close');
        expect(JSON.parse(res.body)).toMatchObject({ code: 'rest_bad_request', data: { status: 400 } });
      }
    });

    test('an ordinary request on the same server still works', async () => {
      const res = await raw('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual({ status: 'ok' });
    });
  });
});
