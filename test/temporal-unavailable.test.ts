import crypto from 'node:crypto';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import request from 'supertest';
import { createApp, type AppWithRegistry } from '../src/http/app';
import { findTemporalBinary, freePort, startTemporalDevServer, type DevServer } from '../src/infra/temporal-server';
import { connectTemporal, type TemporalHandle } from '../src/temporal/client';
import { taskQueues } from '../src/temporal/task-queues';
import { startWorker, type RunningWorker } from '../src/temporal/worker';
import { CHAT, makeAgent } from './chat-helpers';
import { BASE, createTestContext, type TestContext } from './helpers';
import { makeSite, tenantEnv } from './tenant-helpers';
import { samplePot } from './translation-servers';

/**
 * Every route that starts a workflow answers within 2 s when Temporal is away, paused
 * (SIGSTOP: the connection stays open, nothing answers) or refusing connections; CRUD routes
 * answer as usual. A Temporal dev server of this file's own is paused, so no other test file
 * sees it.
 */
describe('Temporal away: routes that start workflows fail fast, CRUD is unaffected', () => {
  let ctx: TestContext;
  let server: DevServer;
  let own: TemporalHandle;
  let worker: RunningWorker;
  let siteId: number;
  let seq = 0;
  const tag = () => `${++seq}${crypto.randomBytes(3).toString('hex')}`;
  const auth = { Authorization: '' };

  /** Each route with the answer it gives when its workflow cannot be started. */
  const routes: { name: string; call: (http: ReturnType<typeof request>) => Promise<request.Response>; expectAnswer: (res: request.Response) => void }[] = [
    {
      name: 'POST /register',
      call: (http) => {
        const t = tag();
        return http.post(`${BASE}/register`).set(auth).send({ customer: { username: `away${t}`, password: 'secret123', email: `away${t}@example.com` }, products: ['away-plan'] });
      },
      expectAnswer: (res) => expect(res.body).toMatchObject({ code: 'wu_rest_temporal_unavailable', data: { status: 503 } }),
    },
    {
      name: 'POST /tenants/{site_id}/bootstrap',
      call: (http) => http.post(`${BASE}/tenants/${siteId}/bootstrap`).set(auth).send({}),
      expectAnswer: (res) => expect(res.body).toMatchObject({ code: 'wu_rest_temporal_unavailable', data: { status: 503 } }),
    },
    {
      name: 'GET /translations/check (first check of a package starts its pipeline)',
      call: (http) => http.get(`${BASE}/translations/check`).query({ slug: 'away-plugin', type: 'plugin', locale: ['de_DE', 'fr_FR', 'ja', 'es_ES', 'it_IT', 'nl_NL'][seq++ % 6] }).set(auth),
      expectAnswer: (res) => expect(res.body).toMatchObject({ code: 'wu_rest_temporal_unavailable', data: { status: 503 } }),
    },
    {
      name: 'POST /domains (checking-dns starts the domain check)',
      call: (http) => http.post(`${BASE}/domains`).set(auth).send({ domain: `away${tag()}.example.org` }),
      expectAnswer: (res) => expect(res.body).toMatchObject({ code: 'wu_rest_domain_checks_unavailable', data: { status: 503 } }),
    },
    {
      // The chat never refuses a visitor: without its follow-up workflow the session becomes a ticket at once.
      name: 'POST /chat/sessions (starts the chat follow-up)',
      call: (http) => http.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Away Visitor', customer_email: `v${tag()}@example.com`, page_url: 'https://shop.example.com/' }),
      expectAnswer: (res) => {
        expect(res.status).toBe(201);
        expect(res.body.session).toMatchObject({ fallback_reason: 'follow_up_unavailable', ticket_id: expect.any(Number) });
      },
    },
  ];

  const apps: AppWithRegistry[] = [];
  const appOn = async (temporal: TemporalHandle) => {
    const app = createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal, metrics: ctx.metrics, observeResponse: (r) => ctx.contract.check(r) });
    await app.locals.chat.realtime.ready();
    apps.push(app);
    return app;
  };

  /** The route answers within `firstMs` (2 s) as `expectAnswer` says; a second call on the same app, with the circuit open, at once; CRUD as usual. */
  const checkRoutes = (temporal: () => TemporalHandle, firstMs = 2000) => {
    for (const route of routes) {
      test(route.name, async () => {
        const http = request(await appOn(temporal()));
        let started = Date.now();
        const res = await route.call(http);
        expect(Date.now() - started).toBeLessThan(firstMs);
        if (res.status !== 201) expect(res.status).toBe(503);
        route.expectAnswer(res);
        started = Date.now();
        route.expectAnswer(await route.call(http));
        expect(Date.now() - started).toBeLessThan(500);
        started = Date.now();
        const crud = await http.get(`${BASE}/customers?per_page=5`).set(auth);
        expect(crud.status).toBe(200);
        expect(Date.now() - started).toBeLessThan(1000);
      });
    }
  };

  beforeAll(async () => {
    // A short wait: a refused connection's retries inside the client end with it (before the connections close).
    ctx = await createTestContext(tenantEnv({ REGISTER_WAIT_SECONDS: '3' }));
    auth.Authorization = ctx.basic;
    const binary = findTemporalBinary(process.env.TEMPORAL_CLI, path.resolve(__dirname, '..'))!;
    server = await startTemporalDevServer({ binary, port: await freePort(), timeoutMs: 90_000 });
    own = await connectTemporal(server.address, 'default', ctx.config.TEMPORAL_TASK_QUEUE);
    worker = await startWorker({ address: server.address, namespace: 'default', taskQueue: ctx.config.TEMPORAL_TASK_QUEUE, db: ctx.db, config: ctx.config });
    await ctx.db('products').insert({ slug: 'away-plan', name: 'Away Plan', type: 'plan', amount: '5' });
    siteId = (await makeSite(ctx)).siteId;
    const project = await ctx.http.post(`${BASE}/translations/projects`).set(auth).send({ slug: 'away-plugin', type: 'plugin', name: 'Away', version: '1.0.0', pot: samplePot(), po_files: { de_DE: 'msgid "Settings"\nmsgstr "Einstellungen"\n' } });
    expect(project.status).toBe(200);
    await makeAgent(ctx, { online: true });
  }, 120_000);

  afterAll(async () => {
    if (server?.pid) process.kill(server.pid, 'SIGCONT');
    for (const app of apps) {
      await app.locals.chat.close();
      app.locals.temporal.close();
    }
    await worker?.shutdown();
    await own?.connection.close();
    await server?.stop();
    await ctx?.close();
  });

  describe('the server paused (SIGSTOP)', () => {
    beforeAll(() => process.kill(server.pid!, 'SIGSTOP'));
    afterAll(() => process.kill(server.pid!, 'SIGCONT'));
    checkRoutes(() => own);
  });

  describe('the connection refused', () => {
    const refused: TemporalHandle[] = [];
    const handle = () => refused[refused.length - 1];
    beforeEach(async () => {
      const connection = Connection.lazy({ address: `127.0.0.1:${await freePort()}`, connectTimeout: '1s' });
      refused.push({ connection, client: new Client({ connection }), namespace: 'default', taskQueue: ctx.config.TEMPORAL_TASK_QUEUE, taskQueues: taskQueues(ctx.config) });
    });
    afterAll(async () => {
      for (const app of apps) app.locals.temporal.close();
      // The client's own retries of a refused connection go on until their deadline (REGISTER_WAIT_SECONDS at most).
      await new Promise((r) => setTimeout(r, 3500));
      for (const h of refused) await h.connection.close().catch(() => undefined);
    });
    // A refused connection is seen in the channel's state, without waiting for the call deadline (1.5 s).
    checkRoutes(handle, 1000);
  });

  test('the readiness check opens the circuit: the next workflow start answers at once', async () => {
    const http = request(await appOn(own));
    process.kill(server.pid!, 'SIGSTOP');
    try {
      const ready = await http.get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks.temporal.ok).toBe(false);
      const started = Date.now();
      expect((await routes[3].call(http)).status).toBe(503);
      expect(Date.now() - started).toBeLessThan(200);
      expect(await ctx.metrics.registry.getSingleMetricAsString('temporal_unreachable')).toMatch(/temporal_unreachable 1/);
    } finally {
      process.kill(server.pid!, 'SIGCONT');
    }
  }, 30_000);

  test('back again: the circuit closes by itself and a registration goes through', async () => {
    const app = await appOn(own);
    const http = request(app);
    process.kill(server.pid!, 'SIGSTOP');
    try {
      expect((await routes[0].call(http)).status).toBe(503);
      expect(await ctx.metrics.registry.getSingleMetricAsString('temporal_unreachable')).toMatch(/temporal_unreachable 1/);
    } finally {
      process.kill(server.pid!, 'SIGCONT');
    }
    // The probe closes the circuit within about a second.
    let res = await routes[0].call(http);
    for (let i = 0; i < 30 && res.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 200));
      res = await routes[0].call(http);
    }
    expect(res.status).toBe(200);
    expect(res.body.customer).toMatchObject({ model: 'customer' });
    expect(await ctx.metrics.registry.getSingleMetricAsString('temporal_unreachable')).toMatch(/temporal_unreachable 0/);
  }, 60_000);
});
