/**
 * Two API and two worker processes (the real entry points, src/api.ts and src/worker.ts) on one
 * database, one Temporal task queue and one S3 bucket (moto), each with a DATA_DIR of its own,
 * under concurrent bursts spread over both APIs: no double work, no lost message, no 5xx, and
 * every limit enforced once for both APIs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { freePort } from '../src/infra/temporal-server';
import { CHAT } from './chat-helpers';
import { waitFor } from './estate-helpers';
import { API_KEY, API_SECRET, BASE, createTestContext, type TestContext } from './helpers';
import { startMoto, type MotoServer } from './moto-server';
import { serverHas } from './tenant-helpers';
import { GERMAN_PO, samplePot } from './translation-servers';

const root = path.resolve(__dirname, '..');
const AUTH_FAILURE_LIMIT = 5;
const CHAT_SESSION_CREATE_LIMIT = 6;

interface Proc {
  name: string;
  child: ChildProcess;
  dataDir: string;
  output: () => string;
}
interface Api extends Proc {
  base: string;
}

interface Answer {
  status: number;
  headers: Headers;
  body: any;
  bytes: Buffer;
}

describe('replicas: 2 API and 2 worker processes on one database, task queue and bucket', () => {
  jest.setTimeout(180_000);
  const BUCKET = 'hostflow-replicas';
  let moto: MotoServer;
  let ctx: TestContext;
  const procs: Proc[] = [];
  let A: Api;
  let B: Api;
  let workers: Proc[] = [];
  /** Every HTTP answer of the test: `<api> <method> <path> <status>`. */
  const answers: { api: string; method: string; path: string; status: number }[] = [];
  const sockets: WebSocket[] = [];
  const basic = `Basic ${Buffer.from(`${API_KEY}:${API_SECRET}`).toString('base64')}`;
  let ipSeq = 0;
  /** A client address of its own (TRUST_PROXY is on), so each part's per-address limits are its own. */
  const clientIp = () => `198.51.100.${++ipSeq}`;

  /** One request through an API process; its status is recorded for the no-5xx check. */
  async function call(api: Api, method: string, p: string, opts: { headers?: Record<string, string>; json?: unknown; form?: FormData } = {}): Promise<Answer> {
    const headers: Record<string, string> = { 'X-Forwarded-For': '127.0.0.1', ...opts.headers };
    let body: string | FormData | undefined;
    if (opts.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.json);
    } else if (opts.form) body = opts.form;
    const res = await fetch(`${api.base}${p}`, { method, headers, body });
    const bytes = Buffer.from(await res.arrayBuffer());
    answers.push({ api: api.name, method, path: p, status: res.status });
    let parsed: any = null;
    if ((res.headers.get('content-type') ?? '').includes('json')) parsed = JSON.parse(bytes.toString('utf8'));
    return { status: res.status, headers: res.headers, body: parsed, bytes };
  }
  const admin = (api: Api, method: string, p: string, json?: unknown) => call(api, method, `${BASE}${p}`, { headers: { Authorization: basic }, json });

  function spawnProc(name: string, script: string, env: Record<string, string>, nodeFlags: string[] = []): Proc {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `hf-replicas-${name}-`));
    const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', path.join(root, 'src', script)], {
      cwd: root,
      env: { ...(process.env as Record<string, string>), ...env, DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    // The tail only: enough to say why a process failed.
    const keep = (d: Buffer) => (out = (out + String(d)).slice(-20_000));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const proc = { name, child, dataDir, output: () => out };
    procs.push(proc);
    return proc;
  }

  /** Pollers of the task queue (workflow or activity tasks), by identity (`<pid>@<host>`, the SDK's default). */
  async function pollers(type: 1 | 2): Promise<string[]> {
    const res = await ctx.temporal.client.workflowService.describeTaskQueue({
      namespace: ctx.config.TEMPORAL_NAMESPACE,
      taskQueue: { name: ctx.config.TEMPORAL_TASK_QUEUE },
      taskQueueType: type,
    });
    return (res.pollers ?? []).map((p) => p.identity ?? '');
  }
  const pidOf = (identity: string) => Number(identity.split('@')[0]);

  beforeAll(async () => {
    moto = await startMoto();
    await moto.createBucket(BUCKET);
    ctx = await createTestContext();
    const shared: Record<string, string> = {
      ...moto.env(BUCKET, 'replicas/'),
      DATABASE_URL: ctx.dbUrl,
      TEMPORAL_ADDRESS: process.env.HF_TEST_TEMPORAL_ADDRESS!,
      TEMPORAL_TASK_QUEUE: ctx.config.TEMPORAL_TASK_QUEUE,
      WU_API_KEY: API_KEY,
      WU_API_SECRET: API_SECRET,
      TENANT_CREDENTIALS_KEY: crypto.randomBytes(32).toString('hex'),
      TENANT_WAIT_SECONDS: '30',
      TRUST_PROXY: 'true',
      AUTH_FAILURE_LIMIT: String(AUTH_FAILURE_LIMIT),
      AUTH_FAILURE_WINDOW_SECONDS: '300',
      CHAT_SESSION_CREATE_LIMIT: String(CHAT_SESSION_CREATE_LIMIT),
      CHAT_SESSION_CREATE_WINDOW_SECONDS: '300',
      DB_POOL_MAX: '5',
      LOG_LEVEL: 'warn',
    };
    // The API with start:api's heap flags (package.json), as in production.
    const apiFlags = ['--max-semi-space-size=4', '--max-old-space-size=160'];
    const [portA, portB] = [await freePort(), await freePort()];
    A = { ...spawnProc('api-a', 'api.ts', { ...shared, PORT: String(portA), HOST: '127.0.0.1' }, apiFlags), base: `http://127.0.0.1:${portA}` };
    B = { ...spawnProc('api-b', 'api.ts', { ...shared, PORT: String(portB), HOST: '127.0.0.1' }, apiFlags), base: `http://127.0.0.1:${portB}` };
    workers = [spawnProc('worker-1', 'worker.ts', shared), spawnProc('worker-2', 'worker.ts', shared)];

    const failed = () => procs.find((p) => p.child.exitCode !== null);
    const health = (api: Api) =>
      fetch(`${api.base}/healthz`).then(
        (r) => r.status === 200,
        () => false,
      );
    const workerPids = new Set(workers.map((w) => w.child.pid!));
    await waitFor(
      async () => {
        const dead = failed();
        if (dead) throw new Error(`${dead.name} exited (${dead.child.exitCode}):\n${dead.output()}`);
        if (!(await health(A)) || !(await health(B))) return false;
        const polling = [...(await pollers(1)), ...(await pollers(2))].map(pidOf);
        return [...workerPids].every((pid) => polling.filter((p) => p === pid).length >= 2);
      },
      (ok) => ok,
      90_000,
    );

    // What the registrations buy.
    await ctx.db('products').insert([
      { slug: 'rep-plan', name: 'Replica Plan', type: 'plan', amount: '19.99', setup_fee: '0', duration: 1, duration_unit: 'month' },
      { slug: 'rep-addon', name: 'Replica Addon', type: 'service', amount: '0.5', setup_fee: '0' },
    ]);
  });

  afterAll(async () => {
    for (const ws of sockets) ws.terminate();
    // SIGTERM (each process stops in order), SIGKILL after 10 s: none is left behind, even when a test failed.
    await Promise.all(
      procs.map(async (p) => {
        if (p.child.exitCode !== null || p.child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => p.child.once('exit', () => resolve()));
        p.child.kill('SIGTERM');
        const killer = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(killer);
      }),
    );
    for (const p of procs) fs.rmSync(p.dataDir, { recursive: true, force: true });
    await ctx?.close();
    await moto?.stop();
  });

  test('registrations: pairs sharing an Idempotency-Key, sent to different APIs at once, make one set of records each', async () => {
    const TABLES = ['users', 'customers', 'memberships', 'payments', 'sites'] as const;
    const counts = async () => Object.fromEntries(await Promise.all(TABLES.map(async (t) => [t, Number((await ctx.db(t).count({ n: '*' }))[0].n)] as const)));
    const before = await counts();
    const KEYS = 8;
    const bodies = Array.from({ length: KEYS }, (_, i) => {
      const t = `${i}${crypto.randomBytes(3).toString('hex')}`;
      return {
        key: `replica-${t}`,
        body: {
          customer: { username: `rep${t}`, password: 'secret123', email: `rep${t}@example.com` },
          products: ['rep-plan', 'rep-addon'],
          duration: 1,
          duration_unit: 'month',
          site: { site_url: `repshop${t}`, site_title: 'Replica Shop' },
          payment: { status: 'completed' },
          membership: { status: 'active' },
        },
      };
    });
    const post = (api: Api, b: (typeof bodies)[number]) => call(api, 'POST', `${BASE}/register`, { headers: { Authorization: basic, 'Idempotency-Key': b.key }, json: b.body });
    // Each key twice at once, once through each API (in either order), all keys in one burst.
    const results = await Promise.all(bodies.flatMap((b, i) => (i % 2 ? [post(A, b), post(B, b)] : [post(B, b), post(A, b)])));
    for (let i = 0; i < KEYS; i++) {
      const [x, y] = [results[2 * i], results[2 * i + 1]];
      expect([x.status, y.status]).toEqual([200, 200]);
      expect(y.body).toEqual(x.body);
      expect(x.body.customer.username).toBe(bodies[i].body.customer.username);
    }
    expect(await counts()).toEqual(Object.fromEntries(TABLES.map((t) => [t, before[t] + KEYS])));
    for (const b of bodies) {
      const workflowId = `${await ctx.app.locals.temporal.ids.prefix()}-register-${crypto.createHash('sha256').update(b.key).digest('hex')}`;
      const rows = await ctx.db('registrations').where({ workflow_id: workflowId }).select('status', 'attempt');
      expect(rows).toEqual([{ status: 'completed', attempt: 1 }]);
      const customer = await ctx.db('customers').join('users', 'users.id', 'customers.user_id').where('users.username', b.body.customer.username).count({ n: '*' });
      expect(Number(customer[0].n)).toBe(1);
    }
    // Replays, again through both APIs at once, answer the same bodies and write nothing.
    const replays = await Promise.all(bodies.flatMap((b) => [post(A, b), post(B, b)]));
    replays.forEach((r, j) => {
      expect(r.status).toBe(200);
      expect(r.body).toEqual(results[j - (j % 2)].body);
    });
    expect(await counts()).toEqual(Object.fromEntries(TABLES.map((t) => [t, before[t] + KEYS])));
  });

  test('translations: checks of one package from both APIs at once make one job and one pipeline; the pack built by a worker is served by both', async () => {
    const slug = `rep-${crypto.randomBytes(3).toString('hex')}`;
    const created = await admin(A, 'POST', '/translations/projects', { slug, type: 'plugin', name: 'Replica Plugin', version: '2.0.0', pot: samplePot(), glotpress_url_template: null, po_files: { de_DE: GERMAN_PO }, auto_approve: true });
    expect(created.status).toBe(200);
    const q = `/translations/check?slug=${slug}&type=plugin&locale=de_DE`;
    const checks = await Promise.all(Array.from({ length: 12 }, (_, i) => admin(i % 2 ? A : B, 'GET', q)));
    for (const c of checks) {
      expect(c.status).toBe(200);
      expect(c.body).toMatchObject({ slug, locale: 'de_DE', version: '2.0.0', job_id: checks[0].body.job_id });
      expect(['importing', 'pending_approval', 'processing', 'ready']).toContain(c.body.status);
    }
    const jobs = await ctx.db('translation_jobs').where({ slug, locale: 'de_DE' }).select('id', 'workflow_id');
    expect(jobs).toHaveLength(1);
    expect(jobs[0].id).toBe(checks[0].body.job_id);
    const runs: string[] = [];
    for await (const wf of ctx.temporal.client.workflow.list({ query: `WorkflowId = "${jobs[0].workflow_id}"` })) runs.push(wf.runId);
    expect(runs).toHaveLength(1);

    const ready = await waitFor(
      () => admin(B, 'GET', `/translations/jobs/${jobs[0].id}`),
      (r) => r.body?.status === 'ready',
      60_000,
    );
    expect(ready.body.status).toBe('ready');
    const pack = `${BASE}/translations/packages/plugin/${slug}/2.0.0/de_DE.zip`;
    const [fromA, fromB] = await Promise.all([call(A, 'GET', pack), call(B, 'GET', pack)]);
    expect([fromA.status, fromB.status]).toEqual([200, 200]);
    expect(Buffer.compare(fromA.bytes, fromB.bytes)).toBe(0);
    const row = await ctx.db('translation_jobs').where({ id: jobs[0].id }).first('package_sha256');
    expect(crypto.createHash('sha256').update(fromA.bytes).digest('hex')).toBe(row.package_sha256);
    // Checks after the fact, from either API, see the same ready job.
    const after = await Promise.all([admin(A, 'GET', q), admin(B, 'GET', q)]);
    expect(after.map((r) => [r.status, r.body.status, r.body.job_id])).toEqual([
      [200, 'ready', jobs[0].id],
      [200, 'ready', jobs[0].id],
    ]);
  });

  /** A WebSocket client on `api`, recording every event. */
  async function connect(api: Api, realtimeUrl: string) {
    const url = realtimeUrl.replace(/^ws:\/\/[^/]+/, api.base.replace(/^http/, 'ws'));
    const ws = new WebSocket(url);
    sockets.push(ws);
    const events: any[] = [];
    ws.on('message', (d) => events.push(JSON.parse(String(d))));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    await waitFor(async () => events, (e) => e.some((x) => x.type === 'ready'), 10_000);
    const messages = () => events.filter((e) => e.type === 'message').map((e) => e.message.body as string);
    return { ws, events, messages };
  }

  test('chat: messages posted through one API reach WebSocket clients on the other, none lost, in order per session', async () => {
    const agentRes = await call(A, 'POST', `${CHAT}/chat/agent/agents`, { headers: { Authorization: basic }, json: { name: 'Replica Agent', email: `agent${crypto.randomBytes(4).toString('hex')}@example.com`, is_admin: false } });
    expect(agentRes.status).toBe(201);
    const agentToken = agentRes.body.token as string;
    const asAgent = { Authorization: `Bearer ${agentToken}` };
    expect((await call(B, 'POST', `${CHAT}/chat/agent/availability`, { headers: asAgent, json: { presence: 'online' } })).status).toBe(200);

    const SESSIONS = 4;
    const PER_SIDE = 8;
    const sessions = await Promise.all(
      Array.from({ length: SESSIONS }, async (_, i) => {
        // Sessions are made through both APIs; the customer listens on the other one, the agent on the one that made it.
        const [home, away] = i % 2 ? [A, B] : [B, A];
        const res = await call(home, 'POST', `${CHAT}/chat/sessions`, { headers: { 'X-Forwarded-For': clientIp() }, json: { customer_name: `Customer ${i}`, customer_email: `c${i}@example.com` } });
        expect(res.status).toBe(201);
        const id = res.body.session.id as number;
        const customer = await connect(away, res.body.realtime.url);
        const tok = await call(home, 'POST', `${CHAT}/chat/sessions/${id}/token`, { headers: asAgent, json: {} });
        expect(tok.status).toBe(200);
        const agent = await connect(home, tok.body.realtime.url);
        return { id, token: res.body.token as string, home, away, customer, agent };
      }),
    );
    // All sessions at once; within a session each side posts in order (one after another), through the API its peer is not on.
    await Promise.all(
      sessions.flatMap((s) => [
        (async () => {
          for (let m = 0; m < PER_SIDE; m++) {
            const r = await call(s.home, 'POST', `${CHAT}/chat/sessions/${s.id}/messages`, { headers: asAgent, json: { body: `agent ${s.id} #${m}` } });
            expect(r.status).toBe(201);
          }
        })(),
        (async () => {
          for (let m = 0; m < PER_SIDE; m++) {
            const r = await call(s.away, 'POST', `${CHAT}/chat/sessions/${s.id}/messages`, { headers: { Authorization: `Bearer ${s.token}` }, json: { body: `customer ${s.id} #${m}` } });
            expect(r.status).toBe(201);
          }
        })(),
      ]),
    );
    for (const s of sessions) {
      const fromAgent = Array.from({ length: PER_SIDE }, (_, m) => `agent ${s.id} #${m}`);
      const fromCustomer = Array.from({ length: PER_SIDE }, (_, m) => `customer ${s.id} #${m}`);
      for (const client of [s.customer, s.agent]) {
        await waitFor(async () => client.messages(), (got) => got.length >= 2 * PER_SIDE, 10_000);
        const got = client.messages();
        // Every message of the session exactly once, nothing of another session, each side's in the order sent.
        expect([...got].sort()).toEqual([...fromAgent, ...fromCustomer].sort());
        expect(got.filter((b) => b.startsWith('agent '))).toEqual(fromAgent);
        expect(got.filter((b) => b.startsWith('customer '))).toEqual(fromCustomer);
      }
      // And the stored thread, read through the other API, has them all in the same per-side order.
      const thread = await call(s.away, 'GET', `${CHAT}/chat/sessions/${s.id}/messages?limit=100`, { headers: asAgent });
      expect(thread.status).toBe(200);
      const stored = (thread.body.messages as any[]).map((m: any) => m.body as string).filter((b: string) => /^(agent|customer) /.test(b));
      expect(stored.filter((b: string) => b.startsWith('agent '))).toEqual(fromAgent);
      expect(stored.filter((b: string) => b.startsWith('customer '))).toEqual(fromCustomer);
    }
  });

  test('tenants: bootstraps sent to both APIs at once join one workflow; the other API watches; teardown through the other', async () => {
    const sites = await Promise.all(
      [A, B].map(async (api, i) => {
        const customer = await admin(api, 'POST', '/customers', { username: `tenant${i}${crypto.randomBytes(3).toString('hex')}`, email: `tenant${i}${crypto.randomBytes(3).toString('hex')}@example.com`, password: 'secret123' });
        expect(customer.status).toBe(200);
        const site = await admin(api, 'POST', '/sites', { title: `Tenant ${i}`, domain: `t${crypto.randomBytes(5).toString('hex')}.example.com`, customer_id: customer.body.id });
        expect(site.status).toBe(200);
        return site.body.id as number;
      }),
    );
    // Both sites, each bootstrapped through both APIs at once, while the other API polls.
    const boot = await Promise.all(sites.flatMap((id) => [admin(A, 'POST', `/tenants/${id}/bootstrap`, {}), admin(B, 'POST', `/tenants/${id}/bootstrap`, {})]));
    await Promise.all(
      sites.map(async (id, i) => {
        const [x, y] = [boot[2 * i], boot[2 * i + 1]];
        // 202 while it runs; 200 "already isolated" if it finished before the second call.
        expect([200, 202]).toContain(x.status);
        expect([200, 202]).toContain(y.status);
        expect(y.body.workflow_id).toBe(x.body.workflow_id);
        const watcher = i % 2 ? A : B;
        const done = await waitFor(
          () => admin(watcher, 'GET', `/tenants/${id}/migration-status`),
          (r) => r.status !== 200 || r.body.state !== 'bootstrapping',
          60_000,
        );
        expect(done.status).toBe(200);
        expect(done.body).toMatchObject({ ready: true, state: 'ready', verification: { no_legacy: 'passed', sovereign_push: 'passed', tenant_users: 'passed' } });
      }),
    );
    for (const id of sites) {
      // One registry row, one bootstrap run: nobody did the work twice.
      expect(Number((await ctx.db('tenants').where({ site_id: id }).count({ n: '*' }))[0].n)).toBe(1);
      const t = await ctx.db('tenants').where({ site_id: id }).first();
      const runs: string[] = [];
      for await (const wf of ctx.temporal.client.workflow.list({ query: `WorkflowId = "${t.workflow_id}"` })) runs.push(wf.runId);
      expect(runs).toHaveLength(1);
      expect(await serverHas('database', t.database_name)).toBe(true);
    }

    // Teardown of each through the API that did not make its site, both at once.
    const rows = await Promise.all(sites.map((id) => ctx.db('tenants').where({ site_id: id }).first()));
    const down = await Promise.all(sites.map((id, i) => admin(i % 2 ? A : B, 'DELETE', `/tenants/${id}`)));
    down.forEach((r, i) => {
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ site_id: sites[i], deleted: true, state: 'torn_down' });
    });
    for (const [i, id] of sites.entries()) {
      expect((await admin(i % 2 ? B : A, 'GET', `/tenants/${id}/migration-status`)).status).toBe(404);
      expect(await serverHas('database', rows[i].database_name)).toBe(false);
      expect(await serverHas('role', rows[i].role_name)).toBe(false);
    }
  });

  test('limits: failed authentications and chat session creation spread over both APIs hit each limit once', async () => {
    const ip = clientIp();
    const wrong = `Basic ${Buffer.from(`${API_KEY}:not-the-secret-at-all`).toString('base64')}`;
    const BURST = 12;
    const fails = await Promise.all(Array.from({ length: BURST }, (_, i) => call(i % 2 ? A : B, 'GET', `${BASE}/customers`, { headers: { Authorization: wrong, 'X-Forwarded-For': ip } })));
    const statuses = fails.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(AUTH_FAILURE_LIMIT);
    expect(statuses.filter((s) => s === 429)).toHaveLength(BURST - AUTH_FAILURE_LIMIT);
    // Both APIs now refuse that address's failures; the right credentials still pass on both.
    for (const api of [A, B]) {
      const again = await call(api, 'GET', `${BASE}/customers`, { headers: { Authorization: wrong, 'X-Forwarded-For': ip } });
      expect(again.status).toBe(429);
      expect(again.headers.get('retry-after')).toMatch(/^\d+$/);
      expect((await call(api, 'GET', `${BASE}/customers`, { headers: { Authorization: basic, 'X-Forwarded-For': ip } })).status).toBe(200);
    }
    // Another address is not affected.
    expect((await call(A, 'GET', `${BASE}/customers`, { headers: { Authorization: wrong, 'X-Forwarded-For': clientIp() } })).status).toBe(401);

    const sip = clientIp();
    const made = await Promise.all(
      Array.from({ length: 14 }, (_, i) => call(i % 2 ? A : B, 'POST', `${CHAT}/chat/sessions`, { headers: { 'X-Forwarded-For': sip }, json: { customer_name: 'Limit', customer_email: 'limit@example.com' } })),
    );
    expect(made.filter((r) => r.status === 201)).toHaveLength(CHAT_SESSION_CREATE_LIMIT);
    const refused = made.filter((r) => r.status === 429);
    expect(refused).toHaveLength(14 - CHAT_SESSION_CREATE_LIMIT);
    for (const r of refused) expect(r.body.code).toBe('chat_too_many_sessions');
    expect(Number((await ctx.db('chat_sessions').where({ customer_name: 'Limit' }).count({ n: '*' }))[0].n)).toBe(CHAT_SESSION_CREATE_LIMIT);
  });

  test('attachments: uploaded through one API, downloaded (whole and a range) through the other; nothing kept in either DATA_DIR', async () => {
    const s = await call(A, 'POST', `${CHAT}/chat/sessions`, { headers: { 'X-Forwarded-For': clientIp() }, json: { customer_name: 'Files', customer_email: 'files@example.com' } });
    expect(s.status).toBe(201);
    const asCustomer = { Authorization: `Bearer ${s.body.token}` };
    const bytes = Buffer.from(Array.from({ length: 4000 }, (_, i) => `row ${i}\n`).join(''));
    const upload = async (api: Api, name: string) => {
      const form = new FormData();
      form.append('file', new Blob([bytes], { type: 'text/plain' }), name);
      return call(api, 'POST', `${CHAT}/chat/sessions/${s.body.session.id}/attachments`, { headers: asCustomer, form });
    };
    // One through each API at once; each is then read through the other.
    const [upA, upB] = await Promise.all([upload(A, 'a.txt'), upload(B, 'b.txt')]);
    expect([upA.status, upB.status]).toEqual([201, 201]);
    const size = bytes.length;
    for (const [up, other] of [
      [upA, B],
      [upB, A],
    ] as const) {
      const downloadPath = up.body.attachment.download_url as string;
      const whole = await call(other, 'GET', downloadPath, { headers: asCustomer });
      expect(whole.status).toBe(200);
      expect(whole.headers.get('content-length')).toBe(String(size));
      expect(Buffer.compare(whole.bytes, bytes)).toBe(0);
      const part = await call(other, 'GET', downloadPath, { headers: { ...asCustomer, Range: 'bytes=1000-1999' } });
      expect(part.status).toBe(206);
      expect(part.headers.get('content-range')).toBe(`bytes 1000-1999/${size}`);
      expect(Buffer.compare(part.bytes, bytes.subarray(1000, 2000))).toBe(0);
    }
    // The files are in the bucket only: no file under either API's DATA_DIR (temporary uploads removed).
    const files = (dir: string) => (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(dir, f)).isFile());
    expect(files(A.dataDir)).toEqual([]);
    expect(files(B.dataDir)).toEqual([]);
  });

  test('both worker processes did the work; no answer of either API was a 5xx; no process died', async () => {
    // Who ran what: the identity of each workflow task and activity in every history of the task queue.
    const ran = { workflowTasks: new Map<number, number>(), activities: new Map<number, number>() };
    const bump = (m: Map<number, number>, identity: string | null | undefined) => identity && m.set(pidOf(identity), (m.get(pidOf(identity)) ?? 0) + 1);
    // Both task queues of the install: interactive (register, chat) and bulk (translations, tenants).
    const queues = ctx.temporal.taskQueues;
    for await (const wf of ctx.temporal.client.workflow.list({ query: `TaskQueue = "${queues.interactive}" OR TaskQueue = "${queues.bulk}"` })) {
      const history = await ctx.temporal.client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      for (const e of history.events ?? []) {
        bump(ran.workflowTasks, e.workflowTaskStartedEventAttributes?.identity);
        bump(ran.activities, e.activityTaskStartedEventAttributes?.identity);
      }
    }
    // Activity tasks are not sticky: with two pollers, each process takes a share of them.
    for (const w of workers) {
      expect(ran.workflowTasks.get(w.child.pid!)).toBeGreaterThan(0);
      expect(ran.activities.get(w.child.pid!)).toBeGreaterThan(0);
    }
    // Nobody else worked these task queues.
    expect([...ran.workflowTasks.keys(), ...ran.activities.keys()].every((pid) => workers.some((w) => w.child.pid === pid))).toBe(true);

    expect(answers.length).toBeGreaterThan(100);
    expect(answers.filter((a) => a.status >= 500)).toEqual([]);
    for (const p of procs) expect({ name: p.name, exitCode: p.child.exitCode }).toEqual({ name: p.name, exitCode: null });
    // Both APIs served a share of it.
    expect(answers.filter((a) => a.api === 'api-a').length).toBeGreaterThan(30);
    expect(answers.filter((a) => a.api === 'api-b').length).toBeGreaterThan(30);
  });
});
