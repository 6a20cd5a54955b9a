/**
 * The all-in-one service (`npm start`'s src/main.ts, in a process of its own) with only
 * Temporal embedded (DATABASE_URL is the test database): /register answers 503 within
 * TEMPORAL_CALL_TIMEOUT_MS while the dev server is paused, and when the dev server is killed (SIGKILL) the service
 * starts it again on the same SQLite file, the worker and the API reconnect, /register works
 * again within 15 s, and a workflow started before the kill still completes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import request from 'supertest';
import { freePort } from '../src/infra/temporal-server';
import { CHAT, makeAgent } from './chat-helpers';
import { API_KEY, API_SECRET, BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';
import { until } from './worker-process';

const root = path.resolve(__dirname, '..');
const CALL_TIMEOUT_MS = 1000;
// What /register may add to the deadline on a loaded CI machine (validation, reads, the answer);
// without the deadline it would wait for the paused server until the test's own timeout.
const SLACK_MS = 2500;

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

describe('the embedded Temporal dev server goes away (npm start, external PostgreSQL)', () => {
  jest.setTimeout(180_000);
  let ctx: TestContext;
  let child: ChildProcess | undefined;
  let out = '';
  // Under the project (as start.e2e.test.ts): the service writes its key, pid and SQLite files here.
  const dataDir = path.join(root, '.tmp', `outages-temporal-${process.pid}`);
  const ports = { PORT: 0, TEMPORAL_DEV_PORT: 0, TEMPORAL_UI_PORT: 0 };
  let api: ReturnType<typeof request>;

  const register = () => api.post(`${BASE}/register`).auth(API_KEY, API_SECRET).send({ customer: newCustomerBody(), products: ['outage-plan'] });
  const devServerPid = () => Number(fs.readFileSync(path.join(dataDir, 'temporal.pid'), 'utf8'));

  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.db('products').insert({ slug: 'outage-plan', name: 'Outage Plan', type: 'plan', amount: '5' });
    // An agent online: a new chat session waits for one (its chatFollowUp workflow) instead of becoming a ticket at once.
    await makeAgent(ctx, { online: true });
    for (const k of Object.keys(ports) as (keyof typeof ports)[]) ports[k] = await freePort();
    fs.rmSync(dataDir, { recursive: true, force: true });
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      DATA_DIR: dataDir,
      DATABASE_URL: ctx.dbUrl,
      WU_API_KEY: API_KEY,
      WU_API_SECRET: API_SECRET,
      LOG_LEVEL: 'info',
      // The deadline the paused test measures against (below): each Temporal call gives up after it.
      TEMPORAL_CALL_TIMEOUT_MS: String(CALL_TIMEOUT_MS),
      CHAT_WAIT_BEFORE_TICKET_SECONDS: '8',
      CHAT_SESSION_CREATE_LIMIT: '1000',
      ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
    };
    delete env.TEMPORAL_ADDRESS;
    delete env.TEMPORAL_TASK_QUEUE;
    child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src', 'main.ts')], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    await until(async () => out.includes('Press Ctrl-C to stop.') || child!.exitCode !== null, 120_000).catch(() => undefined);
    if (!out.includes('Press Ctrl-C to stop.')) throw new Error(`the service did not start:\n${out}`);
    api = request(`http://127.0.0.1:${ports.PORT}`);
  }, 150_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const pid = fs.existsSync(path.join(dataDir, 'temporal.pid')) ? devServerPid() : 0;
      if (pid) process.kill(pid, 'SIGCONT');
      const gone = new Promise((r) => child!.once('exit', r));
      process.kill(-child.pid!, 'SIGKILL');
      await gone;
      if (pid) process.kill(pid, 'SIGKILL');
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
    await ctx?.close();
  });

  test('paused (SIGSTOP): /register answers 503 within TEMPORAL_CALL_TIMEOUT_MS (plus slack), and works again after SIGCONT', async () => {
    expect((await register()).status).toBe(200);
    const pid = devServerPid();
    process.kill(pid, 'SIGSTOP');
    try {
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        const res = await register();
        expect(Date.now() - started).toBeLessThan(CALL_TIMEOUT_MS + SLACK_MS);
        expect(res.status).toBe(503);
        expect(res.body).toMatchObject({ code: 'wu_rest_temporal_unavailable', data: { status: 503 } });
      }
      // CRUD is unaffected.
      expect((await api.get(`${BASE}/customers?per_page=1`).auth(API_KEY, API_SECRET)).status).toBe(200);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    await until(async () => (await register()).status === 200, 10_000);
  });

  test('killed (SIGKILL): restarted on the same SQLite file; /register works within 15 s and the running workflow completes', async () => {
    // A workflow that is surely still running at the kill: the chat follow-up waits 8 s for an agent.
    const session = await api.post(`${CHAT}/chat/sessions`).send({ customer_name: 'Outage Visitor', customer_email: 'outage@example.com', page_url: 'https://shop.example.com/' });
    expect(session.status).toBe(201);
    expect(session.body.session.fallback_reason).toBeNull();
    const sessionId = Number(session.body.session.id);
    expect((await ctx.db('chat_sessions').where({ id: sessionId }).first()).follow_up_workflow_id).toMatch(/\S/);

    const killed = devServerPid();
    process.kill(killed, 'SIGKILL');
    const killedAt = Date.now();

    // Until it is back, each /register is a quick 503; then a 200 (user, customer, membership, payment written).
    const answers: { status: number; ms: number }[] = [];
    for (;;) {
      const started = Date.now();
      const res = await register();
      answers.push({ status: res.status, ms: Date.now() - started });
      if (res.status === 200) break;
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('wu_rest_temporal_unavailable');
      if (Date.now() - killedAt > 15_000) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(answers[answers.length - 1].status).toBe(200);
    expect(Date.now() - killedAt).toBeLessThan(15_000);
    for (const a of answers.filter((x) => x.status === 503)) expect(a.ms).toBeLessThan(2000);

    // A new server process on the same port, found through the pid file.
    expect(devServerPid()).not.toBe(killed);
    expect(out).toContain('temporal dev server exited; restarting it');

    // No lost workflow: the follow-up started before the kill fires its timer after the restart and turns the session into a ticket.
    await until(async () => (await ctx.db('chat_sessions').where({ id: sessionId }).first()).ticket_id !== null, 30_000);
    const ready = await api.get('/readyz');
    expect(ready.body.checks.temporal).toMatchObject({ ok: true });
    expect(ready.body.checks.temporal.workers_polling).toBeGreaterThanOrEqual(1);
  });

  test('a clean stop (SIGINT) still stops the service and its dev server, which is not restarted', async () => {
    const code = new Promise<number | null>((r) => child!.once('exit', (c) => r(c)));
    process.kill(-child!.pid!, 'SIGINT');
    expect(await code).toBe(0);
    expect(await portOpen(ports.TEMPORAL_DEV_PORT)).toBe(false);
    expect(fs.existsSync(path.join(dataDir, 'temporal.pid'))).toBe(false);
  });
});
