/**
 * An external PostgreSQL (DATABASE_URL) restarted under load: while it is down every answer is
 * a quick 503 hostflow_database_unavailable (never a 500, never a hang), requests succeed again
 * within 5 s of it being back, and the chat's LISTEN connection comes back (a NOTIFY published
 * after the restart reaches a WebSocket opened before it). The server is an embedded PostgreSQL
 * of this file's own (port and data folder), stopped as an operator's restart does (SIGINT:
 * fast shutdown, open connections terminated with 57P01).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import request from 'supertest';
import WebSocket from 'ws';
import { createApp, type AppWithRegistry } from '../src/app';
import { notifyChatEvent } from '../src/chat/realtime';
import { loadConfig } from '../src/config';
import { createDb, type Db } from '../src/db/knex';
import { Metrics } from '../src/http/metrics';
import { freePort } from '../src/infra/temporal-server';
import { buildOpenApiDocument } from '../src/openapi/document';
import { prepareDatabase } from '../src/runtime';
import { connectTemporal, type TemporalHandle } from '../src/temporal/client';
import { taskQueues } from '../src/temporal/task-queues';
import { CHAT } from './chat-helpers';
import { ContractChecker } from './contract';
import { API_KEY, API_SECRET, BASE } from './helpers';
import { until } from './worker-process';

const root = path.resolve(__dirname, '..');

/** An embedded PostgreSQL on `dir` and `port` (test/fixtures/postgres.ts); answers its process and hostflow's database URL. */
async function startPostgres(dir: string, port: number): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'fixtures', 'postgres.ts'), dir, String(port)], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await until(async () => out.includes('postgres ready') || child.exitCode !== null, 60_000);
  const url = /postgres ready (\S+)/.exec(out)?.[1];
  if (!url) throw new Error(`PostgreSQL did not start:\n${out}`);
  return { child, url };
}

/** SIGTERM: the server's fast shutdown; resolves once it has exited. */
async function stopPostgres(pg: { child: ChildProcess }): Promise<void> {
  if (pg.child.exitCode !== null) return;
  const exited = new Promise((r) => pg.child.once('exit', r));
  pg.child.kill('SIGTERM');
  await exited;
}

interface Answer {
  call: string;
  status: number;
  code?: string;
  retryAfter?: string;
  ms: number;
  at: number;
}

describe('external PostgreSQL restarted: 503 while it is down, back within 5 s, LISTEN reconnects', () => {
  jest.setTimeout(120_000);
  // Under the project (as global-setup's server): as root, PostgreSQL must reach its folder.
  const dir = path.join(root, '.tmp', `outages-pg-${process.pid}`);
  let port: number;
  let pgServer: { child: ChildProcess; url: string } | null = null;
  let db: Db;
  let temporal: TemporalHandle;
  let app: AppWithRegistry;
  let server: http.Server;
  let api: ReturnType<typeof request>;
  let contract: ContractChecker;
  let ws: WebSocket | undefined;

  beforeAll(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    port = await freePort();
    pgServer = await startPostgres(dir, port);
    const url = pgServer.url;
    const config = loadConfig({
      DATABASE_URL: url,
      TEMPORAL_ADDRESS: process.env.HF_TEST_TEMPORAL_ADDRESS,
      TEMPORAL_TASK_QUEUE: `hostflow-test-outages-pg-${process.pid}`,
      WU_API_KEY: API_KEY,
      WU_API_SECRET: API_SECRET,
      LOG_LEVEL: process.env.OUTAGES_LOG_LEVEL ?? 'silent',
      CHAT_SESSION_CREATE_LIMIT: '1000000',
      WORKER_METRICS_PORT: '0',
    });
    db = createDb(url, 5);
    const settings = await prepareDatabase(db, config);
    temporal = await connectTemporal(config.TEMPORAL_ADDRESS!, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, taskQueues(config).bulk);
    let document: Record<string, unknown> | undefined;
    contract = new ContractChecker(() => (document ??= buildOpenApiDocument(app.locals.registry, { version: 'test' })));
    app = createApp({ config, db, settings, temporal, metrics: new Metrics(db), observeResponse: (r) => contract.check(r) });
    server = http.createServer(app);
    app.locals.chat.attach(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    api = request(server);
    app.locals.chat.realtime.retryMs = 250;
    expect(await app.locals.chat.realtime.ready()).toBe(true);
  }, 120_000);

  afterAll(async () => {
    // The WebSocket first: an upgraded connection keeps server.close() waiting.
    ws?.terminate();
    await app?.locals.chat.close();
    if (server) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
    app?.locals.temporal.close();
    await temporal?.connection.close();
    await db?.destroy();
    if (pgServer) await stopPostgres(pgServer);
    fs.rmSync(dir, { recursive: true, force: true });
    expect([...new Set(contract.violations)]).toEqual([]);
  });

  test('a restart under load', async () => {
    // A session whose WebSocket stays open through the restart (the socket is to the API, not to PostgreSQL).
    const session = await api.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Restart Visitor', customer_email: 'restart@example.com', page_url: 'https://shop.example.com/' });
    expect(session.status).toBe(201);
    const sessionId = Number(session.body.session.id);
    const wsUrl = String(session.body.realtime.url).replace(/^ws:\/\/[^/]+/, `ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
    ws = new WebSocket(wsUrl);
    const events: { type: string; marker?: string }[] = [];
    ws.on('message', (d) => events.push(JSON.parse(String(d))));
    await new Promise<void>((resolve, reject) => {
      ws!.once('open', () => resolve());
      ws!.once('error', reject);
    });

    // Reads and writes from 6 callers, each with a 5 s timeout (a hang fails the test), until told to stop.
    const answers: Answer[] = [];
    let load = true;
    let n = 0;
    const calls: [string, () => request.Test][] = [
      ['GET /customers', () => api.get(`${BASE}/customers?per_page=5`).auth(API_KEY, API_SECRET)],
      ['POST /customers', () => api.post(`${BASE}/customers`).auth(API_KEY, API_SECRET).send({ username: `restart${++n}`, email: `restart${n}@example.com`, password: 'secret123' })],
      ['GET /products', () => api.get(`${BASE}/products`).auth(API_KEY, API_SECRET)],
      ['GET /chat/sessions/{id}/messages', () => api.get(`${CHAT}/chat/sessions/${sessionId}/messages`).set('Authorization', `Bearer ${session.body.token}`)],
    ];
    const caller = async (i: number) => {
      while (load) {
        const started = Date.now();
        const [call, send] = calls[i % calls.length];
        const res = await send().timeout(5000);
        answers.push({ call, status: res.status, code: res.body?.code, retryAfter: res.headers['retry-after'], ms: Date.now() - started, at: Date.now() });
      }
    };
    const callers = Promise.all([0, 1, 2, 3, 4, 5].map(caller));

    await new Promise((r) => setTimeout(r, 500));
    const stopping = Date.now();
    await stopPostgres(pgServer!);
    const down = Date.now();
    // Down for a while, under load.
    await new Promise((r) => setTimeout(r, 1500));
    expect(app.locals.chat.realtime.available()).toBe(false);
    const restarting = Date.now();
    pgServer = await startPostgres(dir, port);
    const up = Date.now();

    // Requests succeed again within 5 s of the server being back.
    await until(async () => answers.some((a) => a.at > up && a.status === 200) && (await api.get(`${BASE}/customers?per_page=1`).auth(API_KEY, API_SECRET)).status === 200, 5000);
    expect(Date.now() - up).toBeLessThan(5000);
    await new Promise((r) => setTimeout(r, 300));
    load = false;
    await callers;

    // Every answer: a success, or the database's 503 in the error shape with Retry-After; never a 500.
    const failures = answers.filter((a) => a.status >= 300);
    expect(failures.length).toBeGreaterThan(0);
    for (const a of failures) expect(a).toMatchObject({ status: 503, code: 'hostflow_database_unavailable', retryAfter: '2' });
    // While it was down (from the stop's end to the restart), each answer was a quick 503.
    const whileDown = answers.filter((a) => a.at - a.ms >= down && a.at <= restarting);
    expect(whileDown.length).toBeGreaterThan(0);
    for (const a of whileDown) {
      expect(a.status).toBe(503);
      expect(a.ms).toBeLessThan(1000);
    }
    // Requests in flight as it stopped failed cleanly too (the same check as above covers their status).
    expect(answers.some((a) => a.at >= stopping && a.status === 503)).toBe(true);
    expect(answers.filter((a) => a.at > up + 1000).every((a) => a.status < 300)).toBe(true);

    // The LISTEN connection is back: an event published by another process (a NOTIFY on the restarted server) reaches the socket.
    expect(await app.locals.chat.realtime.ready(5000)).toBe(true);
    const other = createDb(pgServer!.url, 1);
    try {
      await notifyChatEvent(other, { type: 'session', session_id: sessionId, marker: 'after-restart' });
    } finally {
      await other.destroy();
    }
    await until(async () => events.some((e) => e.marker === 'after-restart'), 5000);
  });
});
