import crypto from 'node:crypto';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import request from 'supertest';
import { createApp, type AppWithRegistry } from '../src/app';
import { findTemporalBinary, freePort, startTemporalDevServer, type DevServer } from '../src/infra/temporal-server';
import { connectTemporal, lazyTemporal, type TemporalHandle } from '../src/temporal/client';
import { taskQueues } from '../src/temporal/task-queues';
import type { RunningWorker } from '../src/temporal/worker';
import { WORDPRESS_LOCALES } from '../src/translations/locales';
import { startWorker } from '../src/worker-runtime';
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
const CALL_TIMEOUT_MS = 1000;

describe('Temporal away: routes that start workflows fail fast, CRUD is unaffected', () => {
  let ctx: TestContext;
  let server: DevServer;
  let own: TemporalHandle;
  let worker: RunningWorker;
  // A site per call: an accepted bootstrap leaves its tenant (and its waiting start) behind.
  const siteIds: number[] = [];
  let seq = 0;
  const tag = () => `${++seq}${crypto.randomBytes(3).toString('hex')}`;
  const auth = { Authorization: '' };

  /**
   * Each route with the answer it gives when its workflow cannot be started. `accepted`: the
   * route writes its row and the workflow's start together (the start outbox), so the first
   * call, made before the process knows Temporal is away, may be accepted with its start left
   * waiting (the relay makes it later); once the circuit is open it is 503 and nothing is written.
   */
  const routes: {
    name: string;
    call: (http: ReturnType<typeof request>) => Promise<request.Response>;
    expectAnswer: (res: request.Response) => void;
    accepted?: (res: request.Response) => void;
  }[] = [
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
      call: (http) => http.post(`${BASE}/tenants/${siteIds.shift()}/bootstrap`).set(auth).send({}),
      expectAnswer: (res) => expect(res.body).toMatchObject({ code: 'wu_rest_temporal_unavailable', data: { status: 503 } }),
      accepted: (res) => {
        expect(res.status).toBe(202);
        expect(res.body).toMatchObject({ state: 'bootstrapping' });
      },
    },
    {
      name: 'GET /translations/check (first check of a package starts its pipeline)',
      // A locale of its own each time: an accepted first call leaves its job (and its waiting start) behind.
      call: (http) => http.get(`${BASE}/translations/check`).query({ slug: 'away-plugin', type: 'plugin', locale: WORDPRESS_LOCALES[seq++ % WORDPRESS_LOCALES.length] }).set(auth),
      expectAnswer: (res) => expect(res.body).toMatchObject({ code: 'wu_rest_temporal_unavailable', data: { status: 503 } }),
      accepted: (res) => {
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ status: 'importing', job_id: expect.any(Number) });
      },
    },
    {
      name: 'POST /domains (checking-dns starts the domain check)',
      call: (http) => http.post(`${BASE}/domains`).set(auth).send({ domain: `away${tag()}.example.org` }),
      expectAnswer: (res) => expect(res.body).toMatchObject({ code: 'wu_rest_domain_checks_unavailable', data: { status: 503 } }),
      accepted: (res) => {
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ stage: 'checking-dns' });
      },
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
  const appOn = async (temporal: TemporalHandle, callTimeoutMs = ctx.config.TEMPORAL_CALL_TIMEOUT_MS) => {
    const config = { ...ctx.config, TEMPORAL_CALL_TIMEOUT_MS: callTimeoutMs };
    const app = createApp({ config, db: ctx.db, settings: ctx.settings, temporal, metrics: ctx.metrics, observeResponse: (r) => ctx.contract.check(r) });
    await app.locals.chat.realtime.ready();
    apps.push(app);
    return app;
  };

  /**
   * The route answers within `firstMs` (2 s) as `expectAnswer` says (or, for an outbox route,
   * accepted with its start waiting in the outbox); a second call on the same app, with the
   * circuit open, at once; CRUD as usual.
   */
  const checkRoutes = (temporal: () => TemporalHandle, firstMs = 2000, callTimeoutMs?: number) => {
    for (const route of routes) {
      test(route.name, async () => {
        const http = request(await appOn(temporal(), callTimeoutMs));
        let started = Date.now();
        const waiting = async () => Number((await ctx.db('workflow_starts').whereNull('started_at').count({ n: '*' }))[0].n);
        const waitingBefore = await waiting();
        const res = await route.call(http);
        expect(Date.now() - started).toBeLessThan(firstMs);
        if (route.accepted && res.status !== 503) {
          route.accepted(res);
          expect(await waiting()).toBe(waitingBefore + 1);
        } else {
          if (res.status !== 201) expect(res.status).toBe(503);
          route.expectAnswer(res);
        }
        started = Date.now();
        const waitingNow = await waiting();
        route.expectAnswer(await route.call(http));
        expect(Date.now() - started).toBeLessThan(500);
        expect(await waiting()).toBe(waitingNow);
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
    for (let i = 0; i < 6; i++) siteIds.push((await makeSite(ctx)).siteId);
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
    // A paused server answers nothing: the route waits out the call deadline, here 1 s (the
    // default is 1.5 s), so the 2 s bound leaves a second for the request's own work on a loaded
    // machine and still fails if the deadline is not kept.
    checkRoutes(() => own, 2000, CALL_TIMEOUT_MS);
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

  test('the API starts while Temporal is down (lazy connection): /readyz says so, workflow routes answer 503 and write nothing; once Temporal is up they work', async () => {
    const port = await freePort();
    const lazy = lazyTemporal(`127.0.0.1:${port}`, 'default', ctx.config.TEMPORAL_TASK_QUEUE);
    let late: DevServer | undefined;
    try {
      const http = request(await appOn(lazy));
      const ready = await http.get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.checks.temporal.ok).toBe(false);
      const rows = async () => Promise.all(['registrations', 'tenants', 'translation_jobs', 'domains', 'workflow_starts'].map(async (t) => Number((await ctx.db(t).count({ n: '*' }))[0].n)));
      const before = await rows();
      for (const route of routes) {
        const res = await route.call(http);
        if (res.status !== 201) expect(res.status).toBe(503);
        route.expectAnswer(res);
      }
      expect(await rows()).toEqual(before);
      late = await startTemporalDevServer({ binary: findTemporalBinary(process.env.TEMPORAL_CLI, path.resolve(__dirname, '..'))!, port, timeoutMs: 90_000 });
      // The circuit's probe finds it; the channel connects by itself.
      let res = await routes[0].call(http);
      for (let i = 0; i < 60 && res.status === 503; i++) {
        await new Promise((r) => setTimeout(r, 500));
        res = await routes[0].call(http);
      }
      expect(res.status).toBe(200);
      expect((await http.get('/readyz')).body.checks.temporal.ok).toBe(true);
    } finally {
      await lazy.connection.close().catch(() => undefined);
      await late?.stop();
    }
  }, 150_000);

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
