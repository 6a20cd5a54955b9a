import { startWorker, type RunningWorker } from '../src/temporal/worker';
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
    const { createApp } = await import('../src/http/app');
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
});
