import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { recordEvent } from '../src/events/record';
import { dispatchEvents, objectKey, pendingShardDeliveries, shardOf, startWebhookRelay } from '../src/webhooks/dispatch';
import { webhookRetry } from '../src/worker-runtime';
import { BASE, createTestContext, decodedJson, startTestWorker, type TestContext } from './helpers';
import { killWorkerProcess, spawnWorkerProcess, until } from './worker-process';

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}
type Answer = { status: number; body?: string; delayMs?: number; location?: string };

/** Fake receivers on loopback: one server, a handler per path (the n-th call of that path, from 1). */
async function startReceivers() {
  const received: Received[] = [];
  const handlers = new Map<string, (n: number, r: Received) => Answer>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      const r: Received = { path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      received.push(r);
      const n = received.filter((x) => x.path === path).length;
      const answer = handlers.get(path)?.(n, r) ?? { status: 200, body: 'ok' };
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, answer.location ? { location: answer.location } : {});
        res.end(answer.body ?? '');
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs).unref();
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    received,
    /** A receiver path; its URL goes through the allowed name `localhost`. */
    on(path: string, handler: (n: number, r: Received) => Answer) {
      handlers.set(path, handler);
      return `http://localhost:${port}${path}`;
    },
    of: (path: string) => received.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The Standard Webhooks signature, computed here from the spec (not with the service's code). */
function specSignature(secret: string, r: Received): string {
  const key = Buffer.from(secret.split('_')[1], 'base64');
  const content = `${r.headers['webhook-id']}.${r.headers['webhook-timestamp']}.${r.body}`;
  return `v1,${crypto.createHmac('sha256', key).update(content).digest('base64')}`;
}

/**
 * Issue 19 (webhooks): the resource and its secret, signed deliveries from the events through the
 * relay and the shard workflows (objects hashed to WEBHOOK_DELIVERY_SHARDS per webhook, continuing as new every 4 deliveries
 * here, each holding at most 5 deliveries: the others wait in the table), retries, 410, timeouts, order, replay, SSRF.
 * WEBHOOK_ALLOWED_HOSTS=localhost: the receivers are reached by that name, so the same
 * server by any other name or address (vm, 127.0.0.1, 127.0.0.2) is refused.
 */
describe('webhooks', () => {
  let ctx: TestContext;
  let worker: Awaited<ReturnType<typeof startTestWorker>>;
  let relays: { stop(): Promise<void> };
  let receivers: Awaited<ReturnType<typeof startReceivers>>;
  let objectId = 5000;
  const auth = () => ({ Authorization: ctx.basic });
  const api = {
    get: (path: string) => ctx.http.get(`${BASE}${path}`).set(auth()),
    post: (path: string, body: unknown = {}) => ctx.http.post(`${BASE}${path}`).set(auth()).send(body as object),
    put: (path: string, body: unknown) => ctx.http.put(`${BASE}${path}`).set(auth()).send(body as object),
  };
  const createWebhook = async (body: Record<string, unknown>) => {
    const res = await api.post('/webhooks', { name: 'Test hook', ...body });
    expect(res.status).toBe(200);
    return res.body as { id: number; secret: string };
  };
  /** An event of a fresh customer object (or of `id`), as a change of it would write. */
  const customerEvent = async (slug: 'customer_created' | 'customer_updated', id = ++objectId, extra: Record<string, unknown> = {}) => {
    await ctx.db.transaction((trx) => recordEvent(trx, { slug, objectId: id, payload: { id, model: 'customer', email: `c${id}@example.com`, ...extra } }));
    return id;
  };
  const deliveriesOf = (webhookId: number) => ctx.db('webhook_deliveries').where({ webhook_id: webhookId }).orderBy('id');
  const attemptsOf = (deliveryId: number) => ctx.db('webhook_delivery_attempts').where({ delivery_id: deliveryId }).orderBy('id');

  beforeAll(async () => {
    ctx = await createTestContext({
      WEBHOOK_ALLOWED_HOSTS: 'localhost',
      WEBHOOK_TIMEOUT_MS: '700',
      WEBHOOK_RETRY_INITIAL_MS: '100',
      WEBHOOK_RETRY_MAX_MS: '300',
      // 5.4 s of retries: long enough for the receivers that recover, short enough to see one give up.
      WEBHOOK_RETRY_HOURS: '0.0015',
      // Few shards: objects share delivery workflows (the next tests pick objects of one shard).
      WEBHOOK_DELIVERY_SHARDS: '2',
      // A shard holds 5 deliveries (1 of an object): every test with more goes through the table.
      WEBHOOK_SHARD_MAX_QUEUED: '5',
    });
    worker = await startTestWorker(ctx);
    // The relay startRelays runs beside a worker, with delivery workflows that end after 1 s
    // without deliveries (the next one starts them again).
    // Runs continue as new every 4 deliveries: the queues and backoffs are carried across runs all along.
    relays = startWebhookRelay({ db: ctx.db, temporal: ctx.app.locals.temporal, retry: webhookRetry(ctx.config), shards: ctx.config.WEBHOOK_DELIVERY_SHARDS, idleMs: 1000, perRun: 4, maxQueued: ctx.config.WEBHOOK_SHARD_MAX_QUEUED });
    receivers = await startReceivers();
  });
  // Each test's webhooks stop receiving when it ends (they would get the next tests' events).
  afterEach(async () => {
    await ctx.db('webhooks').update({ active: false });
  });
  afterAll(async () => {
    await relays?.stop();
    await worker?.shutdown();
    await receivers?.close();
    await ctx?.close();
  });

  test('the secret: whsec_ and 32 random bytes, answered by the create only; rotate-secret answers a new one once', async () => {
    const url = receivers.on('/secret', () => ({ status: 200 }));
    const created = await api.post('/webhooks', { name: 'CRM', webhook_url: url, event: 'customer_created', description: 'to the CRM' });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ model: 'webhook', name: 'CRM', description: 'to the CRM', event: 'customer_created', integration: 'manual', active: true, event_count: 0, date_last_failed: null });
    const { id, secret } = created.body;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    for (const res of [await api.get(`/webhooks/${id}`), await api.get(`/webhook/${id}`), await api.get('/webhooks'), await api.get(`/webhooks/${id}?_fields=id,secret`), await api.put(`/webhooks/${id}`, { name: 'CRM 2' })]) {
      expect(res.status).toBe(200);
      expect(JSON.stringify(res.body)).not.toContain(secret);
      expect(JSON.stringify(res.body)).not.toContain('"secret"');
    }
    const rotated = await api.post(`/webhooks/${id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ id, name: 'CRM 2', secret: expect.stringMatching(/^whsec_/) });
    expect(rotated.body.secret).not.toBe(secret);
    expect((await ctx.db('webhooks').where({ id }).first()).secret).toBe(rotated.body.secret);
    expect(JSON.stringify((await api.get(`/webhooks/${id}`)).body)).not.toContain(rotated.body.secret);
    // The secret cannot be set, nor can the counters.
    for (const body of [{ secret: 'whsec_AAAA' }, { event_count: 5 }, { date_last_failed: '2026-01-01T00:00:00Z' }]) {
      const res = await api.put(`/webhooks/${id}`, body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
    }
    expect((await api.post('/webhooks/999999/rotate-secret')).status).toBe(404);
  });

  test('a delivery is signed as Standard Webhooks say: the receiver verifies it with the spec algorithm', async () => {
    const url = receivers.on('/signed', () => ({ status: 204 }));
    const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
    const id = await customerEvent('customer_created', undefined, { name: 'Zoë ✓' });
    await until(async () => receivers.of('/signed').length >= 1, 20_000);
    const [r] = receivers.of('/signed');
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['webhook-id']).toMatch(/^msg_\d+$/);
    expect(Math.abs(Number(r.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(r.headers['webhook-signature']).toBe(specSignature(hook.secret, r));
    const body = JSON.parse(r.body);
    const event = await ctx.db('events').where({ object_id: id }).first();
    expect(body).toEqual({
      type: 'customer_created',
      timestamp: new Date(event.date_created).toISOString(),
      data: { id, model: 'customer', email: `c${id}@example.com`, name: 'Zoë ✓' },
      event_id: Number(event.id),
      object_type: 'customer',
      object_id: id,
    });
    // A wrong secret does not verify.
    expect(r.headers['webhook-signature']).not.toBe(specSignature(`whsec_${crypto.randomBytes(32).toString('base64')}`, r));
    await until(async () => (await api.get(`/webhooks/${hook.id}`)).body.event_count === 1, 10_000);
    const [delivery] = await deliveriesOf(hook.id);
    expect(delivery).toMatchObject({ status: 'delivered', attempts: 1, event_id: event.id });
    expect(r.headers['webhook-id']).toBe(`msg_${delivery.id}`);
  });

  test('a receiver failing the first 2 times: retried with backoff, the same webhook-id every time, every attempt logged', async () => {
    const url = receivers.on('/flaky', (n) => (n <= 2 ? { status: 500, body: `down ${n} ${'x'.repeat(3000)}` } : { status: 200, body: 'finally' }));
    const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
    await customerEvent('customer_created');
    await until(async () => (await deliveriesOf(hook.id))[0]?.status === 'delivered', 20_000);
    const got = receivers.of('/flaky');
    expect(got).toHaveLength(3);
    expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const r of got) expect(r.headers['webhook-signature']).toBe(specSignature(hook.secret, r));
    const [delivery] = await deliveriesOf(hook.id);
    const attempts = await attemptsOf(delivery.id);
    expect(attempts.map((a) => a.status_code)).toEqual([500, 500, 200]);
    expect(attempts[0].response_excerpt).toHaveLength(1024);
    expect(attempts[2].response_excerpt).toBe('finally');
    const record = (await api.get(`/webhooks/${hook.id}`)).body;
    expect(record).toMatchObject({ event_count: 1, date_last_failed: expect.stringMatching(/^\d{4}-/) });
    // The log through the API: newest attempt first.
    const log = await api.get(`/webhooks/${hook.id}/deliveries`);
    expect(log.status).toBe(200);
    expect(log.headers['x-wp-total']).toBe('1');
    expect(log.body[0]).toMatchObject({ id: delivery.id, message_id: `msg_${delivery.id}`, event: 'customer_created', status: 'delivered', attempts: 3 });
    expect(log.body[0].attempt_log.map((a: any) => a.status_code)).toEqual([200, 500, 500]);
    // The secret is nowhere in the workflow's history (ids only).
    const prefix = await ctx.app.locals.temporal.ids.prefix();
    const shard = shardOf(objectKey('customer', delivery.object_id), ctx.config.WEBHOOK_DELIVERY_SHARDS);
    const history = await ctx.temporal.client.workflow.getHandle(`${prefix}-webhook-${hook.id}-shard-${shard}`).fetchHistory();
    const text = decodedJson(history);
    expect(text).toContain('attemptWebhookDeliveries');
    expect(text).not.toContain(hook.secret);
    expect(text).not.toContain(hook.secret.slice(6));
  });

  test('a receiver slower than the timeout: the attempt is a timeout, and the next one delivers', async () => {
    const url = receivers.on('/slow', (n) => (n === 1 ? { status: 200, delayMs: 2000 } : { status: 200 }));
    const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
    await customerEvent('customer_created');
    await until(async () => (await deliveriesOf(hook.id))[0]?.status === 'delivered', 20_000);
    const [delivery] = await deliveriesOf(hook.id);
    const attempts = await attemptsOf(delivery.id);
    expect(attempts.map((a) => [a.status_code, a.error])).toEqual([
      [null, 'timeout'],
      [200, null],
    ]);
    expect(attempts[0].latency_ms).toBeGreaterThanOrEqual(600);
    expect(attempts[0].latency_ms).toBeLessThan(1900);
  });

  test('410 Gone disables the webhook and records webhook_disabled (the webhook, without its secret)', async () => {
    const url = receivers.on('/gone', () => ({ status: 410 }));
    const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
    await customerEvent('customer_created');
    await until(async () => (await ctx.db('events').where({ slug: 'webhook_disabled', object_id: hook.id })).length === 1, 20_000);
    expect(receivers.of('/gone')).toHaveLength(1);
    const [delivery] = await deliveriesOf(hook.id);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1 });
    const record = (await api.get(`/webhooks/${hook.id}`)).body;
    expect(record.active).toBe(false);
    const events = (await api.get(`/events?slug=webhook_disabled&object_id=${hook.id}`)).body;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ object_type: 'webhook', severity: 4, payload: { id: hook.id, model: 'webhook', active: false, webhook_url: url } });
    expect(JSON.stringify(events[0])).not.toContain(hook.secret);
    expect(events[0].payload).not.toHaveProperty('secret');
    // An inactive webhook gets no deliveries.
    await customerEvent('customer_created');
    await relaysSettle();
    expect(await deliveriesOf(hook.id)).toHaveLength(1);
  });

  /** Lets the relays dispatch what was written (a pass of our own). */
  const relaysSettle = async () => {
    await until(async () => {
      await dispatchEvents(ctx.db);
      const { rows } = await ctx.db.raw('SELECT count(*)::int AS n FROM events e, webhook_dispatch c WHERE (e.txid, e.id) > (c.last_txid, c.last_event_id)');
      return rows[0].n === 0;
    }, 10_000);
  };

  test('failing for more than WEBHOOK_DISABLE_AFTER_DAYS disables the webhook (webhook_disabled)', async () => {
    const url = receivers.on('/failing-long', () => ({ status: 503 }));
    const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
    await ctx.db('webhooks').where({ id: hook.id }).update({ failing_since: new Date(Date.now() - 6 * 86_400_000) });
    await customerEvent('customer_created');
    await until(async () => (await ctx.db('webhooks').where({ id: hook.id }).first()).active === false, 20_000);
    expect(await ctx.db('events').where({ slug: 'webhook_disabled', object_id: hook.id })).toHaveLength(1);
    await until(async () => (await deliveriesOf(hook.id))[0].status === 'failed', 10_000);
    expect(receivers.of('/failing-long')).toHaveLength(1);
  });

  test('a webhook gets the events that happened once it existed: an older event the relay reaches after its creation is not sent to it', async () => {
    const url = receivers.on('/from-now', () => ({ status: 200 }));
    // An event whose transaction began before the webhook was created, and commits after.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let older = 0;
    const writing = ctx.db.transaction(async (trx) => {
      older = ++objectId;
      await recordEvent(trx, { slug: 'customer_created', objectId: older, payload: { id: older, model: 'customer', email: `c${older}@example.com` } });
      await held;
    });
    await new Promise((r) => setTimeout(r, 50));
    const hook = await createWebhook({ webhook_url: url, event: '*' });
    release();
    await writing;
    const newer = await customerEvent('customer_created');
    await until(async () => (await deliveriesOf(hook.id)).some((d) => Number(d.object_id) === newer && d.status === 'delivered'), 20_000);
    await relaysSettle();
    expect((await deliveriesOf(hook.id)).map((d) => Number(d.object_id))).toEqual([newer]);
    expect(receivers.of('/from-now').map((r) => JSON.parse(r.body).object_id)).toEqual([newer]);
  });

  test("one object's events arrive in order: the second waits while the receiver is down for the first", async () => {
    let up = false;
    const url = receivers.on('/ordered', () => (up ? { status: 200 } : { status: 503 }));
    const hook = await createWebhook({ webhook_url: url, event: '*' });
    const id = await customerEvent('customer_created');
    await customerEvent('customer_updated', id);
    await until(async () => receivers.of('/ordered').length >= 2, 20_000);
    up = true;
    await until(async () => (await deliveriesOf(hook.id)).every((d) => d.status === 'delivered') && (await deliveriesOf(hook.id)).length === 2, 20_000);
    const got = receivers.of('/ordered').map((r) => JSON.parse(r.body).type);
    // Every attempt while down was the first event's; the second was sent only after it was delivered.
    const firstDelivered = got.lastIndexOf('customer_created');
    expect(got.slice(0, firstDelivered + 1).every((t) => t === 'customer_created')).toBe(true);
    expect(got.slice(firstDelivered + 1)).toEqual(['customer_updated']);
  });

  test('objects sharing a shard: each arrives in order, and one whose receiver fails does not hold the others back', async () => {
    // Three objects of one shard; the receiver fails every event of the first until it is up.
    const shard = (id: number) => shardOf(objectKey('customer', id), ctx.config.WEBHOOK_DELIVERY_SHARDS);
    const ids: number[] = [];
    while (ids.length < 3) {
      const id = ++objectId;
      if (ids.length === 0 || shard(id) === shard(ids[0])) ids.push(id);
    }
    const [down, b, c] = ids;
    let up = false;
    const objectOf = (r: Received) => JSON.parse(r.body).object_id as number;
    const url = receivers.on('/shared', (_n, r) => (objectOf(r) === down && !up ? { status: 503 } : { status: 200 }));
    const hook = await createWebhook({ webhook_url: url, event: '*' });
    // Interleaved: created for each, then two updates each, one event per transaction.
    for (const id of ids) await customerEvent('customer_created', id);
    for (const round of [1, 2]) for (const id of ids) await customerEvent('customer_updated', id, { round });
    const deliveredOf = async (id: number) => (await deliveriesOf(hook.id)).filter((d) => Number(d.object_id) === id && d.status === 'delivered').length;
    await until(async () => (await deliveredOf(b)) === 3 && (await deliveredOf(c)) === 3, 20_000);
    // Meanwhile the failing object got attempts of its first event only.
    const downSoFar = receivers.of('/shared').filter((r) => objectOf(r) === down);
    expect(downSoFar.length).toBeGreaterThanOrEqual(1);
    expect(new Set(downSoFar.map((r) => JSON.parse(r.body).event_id)).size).toBe(1);
    expect(await deliveredOf(down)).toBe(0);
    up = true;
    await until(async () => (await deliveredOf(down)) === 3, 20_000);
    // Each object's events in the order they were written (a repeated attempt collapsed).
    const events = await ctx.db('events').whereIn('object_id', ids).where({ object_type: 'customer' }).orderBy('id').select('id', 'object_id');
    for (const id of ids) {
      const got = receivers
        .of('/shared')
        .filter((r) => objectOf(r) === id)
        .map((r) => JSON.parse(r.body).event_id as number)
        .filter((e, i, all) => i === 0 || all[i - 1] !== e);
      expect({ id, got }).toEqual({ id, got: events.filter((e) => Number(e.object_id) === id).map((e) => Number(e.id)) });
    }
    // One workflow delivered them all, continuing as new (every 4 deliveries here) with the failing object's backoff carried.
    const prefix = await ctx.app.locals.temporal.ids.prefix();
    const workflowId = `${prefix}-webhook-${hook.id}-shard-${shard(down)}`;
    expect((await ctx.temporal.client.workflow.getHandle(workflowId).describe()).type).toBe('webhookShard');
    const runs = async () => {
      const statuses: string[] = [];
      for await (const wf of ctx.temporal.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) statuses.push(wf.status.name);
      return statuses;
    };
    await until(async () => (await runs()).filter((st) => st === 'CONTINUED_AS_NEW').length >= 2, 10_000);
  });

  test('a shard past its bound (5 here): 20 events of 4 objects while the receiver is down, then up: every one arrives, each object in order, and no run holds or carries more than 5', async () => {
    const shard = (id: number) => shardOf(objectKey('customer', id), ctx.config.WEBHOOK_DELIVERY_SHARDS);
    const ids: number[] = [];
    while (ids.length < 4) {
      const id = ++objectId;
      if (ids.length === 0 || shard(id) === shard(ids[0])) ids.push(id);
    }
    let up = false;
    const url = receivers.on('/bounded', () => (up ? { status: 200 } : { status: 503 }));
    const hook = await createWebhook({ webhook_url: url, event: '*' });
    for (const id of ids) await customerEvent('customer_created', id);
    for (const round of [1, 2, 3, 4]) for (const id of ids) await customerEvent('customer_updated', id, { round });
    await relaysSettle();
    await until(async () => (await deliveriesOf(hook.id)).filter((d) => d.signalled_at !== null).length === 20, 10_000);
    // Down for a while: the shard holds the first event of each object (1 of an object), backing off.
    await until(async () => new Set(receivers.of('/bounded').map((r) => r.headers['webhook-id'])).size >= 4, 10_000);
    up = true;
    await until(async () => (await deliveriesOf(hook.id)).every((d) => d.status === 'delivered'), 30_000);
    const deliveries = await deliveriesOf(hook.id);
    expect(deliveries).toHaveLength(20);
    // Each object's events in the order they were written (a repeated attempt collapsed), each with its delivery's webhook-id.
    const objectOf = (r: Received) => JSON.parse(r.body).object_id as number;
    const events = await ctx.db('events').whereIn('object_id', ids).where({ object_type: 'customer' }).orderBy('id').select('id', 'object_id');
    for (const id of ids) {
      const got = receivers
        .of('/bounded')
        .filter((r) => objectOf(r) === id)
        .map((r) => JSON.parse(r.body).event_id as number)
        .filter((e, i, all) => i === 0 || all[i - 1] !== e);
      expect({ id, got }).toEqual({ id, got: events.filter((e) => Number(e.object_id) === id).map((e) => Number(e.id)) });
    }
    for (const r of receivers.of('/bounded')) expect(r.headers['webhook-id']).toBe(`msg_${deliveries.find((d) => Number(d.event_id) === JSON.parse(r.body).event_id)!.id}`);
    // The shard's runs: what each carried over its continue-as-new, and the reads of the table.
    const prefix = await ctx.app.locals.temporal.ids.prefix();
    const workflowId = `${prefix}-webhook-${hook.id}-shard-${shard(ids[0])}`;
    const carried: { queued: unknown[]; overflow?: boolean }[] = [];
    let reads = 0;
    for await (const wf of ctx.temporal.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
      const history = await ctx.temporal.client.workflow.getHandle(workflowId, wf.runId).fetchHistory();
      reads += history.events!.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'pendingWebhookDeliveries').length;
      const next = history.events!.find((e) => e.workflowExecutionContinuedAsNewEventAttributes)?.workflowExecutionContinuedAsNewEventAttributes;
      if (next) carried.push(JSON.parse(Buffer.from(next.input!.payloads![0].data!).toString('utf8')));
    }
    expect(carried.length).toBeGreaterThanOrEqual(2);
    for (const input of carried) expect(input.queued.length).toBeLessThanOrEqual(5);
    expect(reads).toBeGreaterThanOrEqual(1);
  });

  test("a shard's read of the table: its webhook's pending deliveries of its objects, in event order, at most perObject of an object and limit in all", async () => {
    const hook = await createWebhook({ webhook_url: receivers.on('/read', () => ({ status: 200 })), event: 'customer_updated' });
    await ctx.db('webhooks').where({ id: hook.id }).update({ active: false });
    const shards = ctx.config.WEBHOOK_DELIVERY_SHARDS;
    const shard = (id: number) => shardOf(objectKey('customer', id), shards);
    // a and b of one shard, c of another.
    const a = ++objectId;
    let b = 0;
    let c = 0;
    while (!b || !c) {
      const id = ++objectId;
      if (!b && shard(id) === shard(a)) b = id;
      else if (!c && shard(id) !== shard(a)) c = id;
    }
    // Rows as the relay leaves them once signalled: b's events first, then a's, c's interleaved.
    for (const id of [b, b, a, c, a, b, a]) await customerEvent('customer_updated', id);
    const events = await ctx.db('events').whereIn('object_id', [a, b, c]).where({ object_type: 'customer' }).orderBy('id').select('id', 'object_id');
    const rows = await ctx.db('webhook_deliveries')
      .insert(events.map((e) => ({ webhook_id: hook.id, event_id: e.id, object_type: 'customer', object_id: e.object_id, signalled_at: ctx.db.fn.now() })))
      .returning(['id', 'event_id', 'object_id']);
    const at = (...indexes: number[]) => indexes.map((i) => ({ deliveryId: Number(rows[i].id), eventId: Number(rows[i].event_id), object: objectKey('customer', rows[i].object_id) }));
    // The second (b's) delivered already: not pending, not read.
    await ctx.db('webhook_deliveries').where({ id: rows[1].id }).update({ status: 'delivered' });
    const read = (limit: number, perObject: number, of = a) => pendingShardDeliveries(ctx.db, { webhookId: hook.id, shard: shard(of), shards, limit, perObject });
    expect(await read(10, 10)).toEqual({ deliveries: at(0, 2, 4, 5, 6), more: false });
    // At most one of an object: each object's first pending one, and `more`.
    expect(await read(10, 1)).toEqual({ deliveries: at(0, 2), more: true });
    // At most 3 in all: the oldest three, and `more`.
    expect(await read(3, 10)).toEqual({ deliveries: at(0, 2, 4), more: true });
    // c's shard: c's only.
    expect(await read(10, 10, c)).toEqual({ deliveries: at(3), more: false });
  });

  test("an object's shard is fixed by its key (FNV-1a: the same on every relay and release), and objects spread evenly", () => {
    // Pinned: a change to the hash would send an object's next events to another shard while
    // earlier ones are still pending in the old one.
    expect(['customer:1', 'customer:2', 'membership:42', 'webhook:', 'site:123456789'].map((k) => shardOf(k, 16))).toEqual([8, 1, 15, 4, 7]);
    expect(objectKey('customer', '7')).toBe(objectKey('customer', 7));
    expect(objectKey('webhook', null)).toBe('webhook:');
    expect(shardOf('customer:1', 1)).toBe(0);
    const counts = new Array(16).fill(0);
    for (let i = 1; i <= 16_000; i++) counts[shardOf(objectKey('customer', i), 16)]++;
    expect(Math.min(...counts)).toBeGreaterThan(900);
    expect(Math.max(...counts)).toBeLessThan(1100);
  });

  test('a replay after the receiver was down: the failed delivery again (same webhook-id), and the events it never got', async () => {
    let up = false;
    const url = receivers.on('/replay', () => (up ? { status: 200 } : { status: 502 }));
    const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
    const from = new Date(Date.now() - 1000).toISOString();
    await customerEvent('customer_created');
    // The retries give up (WEBHOOK_RETRY_HOURS): the delivery failed.
    await until(async () => (await deliveriesOf(hook.id))[0]?.status === 'failed', 30_000);
    const failed = (await deliveriesOf(hook.id))[0];
    expect(failed.last_error).toMatch(/HTTP 502.*gave up/);
    // An event written while the webhook was off has no delivery.
    await ctx.db('webhooks').where({ id: hook.id }).update({ active: false });
    await customerEvent('customer_created');
    await relaysSettle();
    await ctx.db('webhooks').where({ id: hook.id }).update({ active: true });
    expect(await deliveriesOf(hook.id)).toHaveLength(1);
    up = true;
    const before = receivers.of('/replay').length;
    const res = await api.post(`/webhooks/${hook.id}/replay`, { after: from, before: new Date(Date.now() + 60_000).toISOString() });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ redelivered: 1, created: 1 });
    await until(async () => (await deliveriesOf(hook.id)).filter((d) => d.status === 'delivered').length === 2, 20_000);
    const after = receivers.of('/replay').slice(before);
    expect(after.filter((r) => r.headers['webhook-id'] === `msg_${failed.id}`)).toHaveLength(1);
    expect(after).toHaveLength(2);
    // A replay of a range with nothing missed changes nothing.
    expect((await api.post(`/webhooks/${hook.id}/replay`, { after: from, before: new Date(Date.now() + 60_000).toISOString() })).body).toEqual({ redelivered: 0, created: 0 });
  });

  test('retry of one delivery sends it again with the same webhook-id; test sends a signed ping at once', async () => {
    const url = receivers.on('/retry', () => ({ status: 200 }));
    const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
    await customerEvent('customer_created');
    await until(async () => (await deliveriesOf(hook.id))[0]?.status === 'delivered', 20_000);
    const [delivery] = await deliveriesOf(hook.id);
    const res = await api.post(`/webhooks/${hook.id}/deliveries/${delivery.id}/retry`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: delivery.id, status: 'pending' });
    await until(async () => receivers.of('/retry').length === 2, 20_000);
    expect(receivers.of('/retry').map((r) => r.headers['webhook-id'])).toEqual([`msg_${delivery.id}`, `msg_${delivery.id}`]);
    await until(async () => (await deliveriesOf(hook.id))[0].status === 'delivered', 10_000);
    // One event, delivered twice: event_count counts it once.
    expect((await api.get(`/webhooks/${hook.id}`)).body.event_count).toBe(1);

    const ping = await api.post(`/webhooks/${hook.id}/test`);
    expect(ping.status).toBe(200);
    expect(ping.body).toMatchObject({ delivered: true, status_code: 200, error: null, message_id: expect.stringMatching(/^msg_/) });
    const r = receivers.of('/retry')[2];
    expect(JSON.parse(r.body)).toMatchObject({ type: 'ping', object_type: 'webhook', object_id: hook.id });
    expect(r.headers['webhook-signature']).toBe(specSignature(hook.secret, r));
    // Unknown ids: 404.
    expect((await api.post(`/webhooks/${hook.id}/deliveries/999999/retry`)).status).toBe(404);
    expect((await api.post('/webhooks/999999/test')).status).toBe(404);
    expect((await api.get('/webhooks/999999/deliveries')).status).toBe(404);
    expect((await api.post('/webhooks/999999/replay', { after: '2026-01-01T00:00:00Z', before: '2026-01-02T00:00:00Z' })).status).toBe(404);
  });

  test('internal addresses are refused unless allowed: after DNS, as a literal, and on a redirect', async () => {
    // `vm` resolves (hosts file) to 127.0.0.1, which only the name localhost is allowed to reach.
    const cases = [`http://vm:${receivers.port}/ssrf`, `http://127.0.0.1:${receivers.port}/ssrf`, `http://127.0.0.2:${receivers.port}/ssrf`, receivers.on('/redirect', () => ({ status: 307, location: `http://vm:${receivers.port}/ssrf` }))];
    for (const url of cases) {
      const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
      const ping = await api.post(`/webhooks/${hook.id}/test`);
      expect({ url, body: ping.body }).toMatchObject({ url, body: { delivered: false, error: 'refused', status_code: null } });
      await customerEvent('customer_created');
      await until(async () => (await deliveriesOf(hook.id))[0]?.status === 'failed', 20_000);
      const [delivery] = await deliveriesOf(hook.id);
      expect(delivery.last_error).toMatch(/^refused: .*WEBHOOK_ALLOWED_HOSTS/);
      expect((await attemptsOf(delivery.id)).map((a) => a.error)).toEqual(['refused']);
      await ctx.db('webhooks').where({ id: hook.id }).update({ active: false });
    }
    expect(receivers.of('/ssrf')).toHaveLength(0);
  });

  test('hostile input is a 400 naming the parameter, and changes nothing; no credentials is a 401', async () => {
    const url = receivers.on('/hostile', () => ({ status: 200 }));
    const hook = await createWebhook({ webhook_url: url, event: 'customer_created' });
    const count = async () => Number((await ctx.db('webhooks').count({ n: '*' }))[0].n);
    const before = await count();
    const bad: [Record<string, unknown>, string][] = [
      [{ webhook_url: 'ftp://example.com/x', event: '*' }, 'webhook_url'],
      [{ webhook_url: 'javascript:alert(1)', event: '*' }, 'webhook_url'],
      [{ webhook_url: `https://example.com/${'a'.repeat(3000)}`, event: '*' }, 'webhook_url'],
      [{ webhook_url: 12, event: '*' }, 'webhook_url'],
      [{ webhook_url: url, event: 'not_an_event' }, 'event'],
      [{ webhook_url: url, event: ['*'] }, 'event'],
      [{ webhook_url: url, event: '*', name: 'n'.repeat(300) }, 'name'],
      [{ webhook_url: url, event: '*', name: { a: { b: { c: {} } } } }, 'name'],
      [{ webhook_url: url, event: '*', active: 'yes' }, 'active'],
      [{ webhook_url: url, event: '*', integration: 'Zap ier ✓' }, 'integration'],
      [{ webhook_url: url, event: '*', secret: 'whsec_mine' }, 'secret'],
    ];
    for (const [body, param] of bad) {
      const res = await api.post('/webhooks', { name: 'Hostile', ...body });
      expect({ body: JSON.stringify(body).slice(0, 80), status: res.status, code: res.body.code, named: Object.keys(res.body.data?.params ?? {}) }).toEqual({
        body: JSON.stringify(body).slice(0, 80),
        status: 400,
        code: 'wu_rest_invalid_parameter',
        named: expect.arrayContaining([param]),
      });
    }
    expect(await count()).toBe(before);
    // Unicode is text like any other.
    const uni = await api.post('/webhooks', { name: '受信 🚀 Zoë', webhook_url: url, event: '*', active: false });
    expect(uni.status).toBe(200);
    expect(uni.body.name).toBe('受信 🚀 Zoë');

    const replays: [unknown, string][] = [
      [{ after: 'yesterday', before: '2026-01-01T00:00:00Z' }, 'after'],
      [{ after: '2026-01-02T00:00:00Z', before: '2026-01-01T00:00:00Z' }, 'before'],
      [{ after: '2026-01-01T00:00:00Z' }, 'before'],
      [{ after: '2026-01-01T00:00:00Z', before: '2026-01-02T00:00:00Z', extra: 1 }, 'extra'],
      [{ after: 1, before: '2026-01-02T00:00:00Z' }, 'after'],
    ];
    for (const [body, param] of replays) {
      const res = await api.post(`/webhooks/${hook.id}/replay`, body);
      expect({ body, status: res.status, named: Object.keys(res.body.data?.params ?? {}) }).toEqual({ body, status: 400, named: expect.arrayContaining([param]) });
    }
    for (const q of ['page=0', 'per_page=1000', 'page=abc', 'per_page=1e400']) {
      const res = await api.get(`/webhooks/${hook.id}/deliveries?${q}`);
      expect({ q, status: res.status, code: res.body.code }).toEqual({ q, status: 400, code: 'wu_rest_invalid_parameter' });
    }
    // More than 10 000 events in the range: 400, nothing changed (the webhook off, so the relays do not deliver them).
    await ctx.db('webhooks').where({ id: hook.id }).update({ active: false });
    await ctx.db.raw(`INSERT INTO events (slug, object_type, object_id, payload, date_created) SELECT 'customer_created', 'customer', g, '{}', now() - interval '400 days' FROM generate_series(1, 10001) g`);
    const huge = await api.post(`/webhooks/${hook.id}/replay`, { after: new Date(Date.now() - 401 * 86_400_000).toISOString(), before: new Date(Date.now() - 399 * 86_400_000).toISOString() });
    expect({ status: huge.status, named: Object.keys(huge.body.data?.params ?? {}) }).toEqual({ status: 400, named: ['before'] });
    expect(await deliveriesOf(hook.id)).toHaveLength(0);
    await ctx.db('events').where('date_created', '<', new Date(Date.now() - 399 * 86_400_000)).delete();

    for (const [method, path] of [['get', '/webhooks'], ['post', '/webhooks'], ['get', `/webhooks/${hook.id}/deliveries`], ['post', `/webhooks/${hook.id}/test`], ['post', `/webhooks/${hook.id}/rotate-secret`], ['post', `/webhooks/${hook.id}/replay`]] as const) {
      const res = await ctx.http[method](`${BASE}${path}`).send({});
      expect({ path, status: res.status }).toEqual({ path, status: 401 });
    }
  });

  test('dispatch: concurrent relays hand each event to each matching webhook once', async () => {
    const a = await createWebhook({ webhook_url: receivers.on('/once-a', () => ({ status: 200 })), event: 'customer_updated' });
    const b = await createWebhook({ webhook_url: receivers.on('/once-b', () => ({ status: 200 })), event: '*' });
    await Promise.all(Array.from({ length: 20 }, () => customerEvent('customer_updated')));
    await Promise.all([dispatchEvents(ctx.db), dispatchEvents(ctx.db), dispatchEvents(ctx.db)]);
    await relaysSettle();
    expect(await deliveriesOf(a.id)).toHaveLength(20);
    expect(await deliveriesOf(b.id)).toHaveLength(20);
    await until(async () => receivers.of('/once-a').length === 20 && receivers.of('/once-b').length === 20, 30_000);
    expect(new Set(receivers.of('/once-a').map((r) => r.headers['webhook-id'])).size).toBe(20);
  });
});

describe('a worker killed mid-delivery', () => {
  let ctx: TestContext;
  let relay: { stop(): Promise<void> };
  let receivers: Awaited<ReturnType<typeof startReceivers>>;
  let worker: Awaited<ReturnType<typeof startTestWorker>> | undefined;

  beforeAll(async () => {
    // An attempt's activity may run WEBHOOK_TIMEOUT_MS + 5 s before Temporal tries it again.
    ctx = await createTestContext({ WEBHOOK_ALLOWED_HOSTS: 'localhost', WEBHOOK_TIMEOUT_MS: '1000' });
    relay = startWebhookRelay({ db: ctx.db, temporal: ctx.app.locals.temporal, retry: webhookRetry(ctx.config), shards: ctx.config.WEBHOOK_DELIVERY_SHARDS, idleMs: 1000 });
    receivers = await startReceivers();
  });
  afterAll(async () => {
    await relay?.stop();
    await worker?.shutdown();
    await receivers?.close();
    await ctx?.close();
  });

  test('the activity is tried again by Temporal: the receiver gets the same webhook-id again (at least once)', async () => {
    // The first request gets no answer before the worker dies; the next one is answered.
    const url = receivers.on('/killed', (n) => (n === 1 ? { status: 200, delayMs: 60_000 } : { status: 200 }));
    const hook = (await ctx.http.post(`${BASE}/webhooks`).set({ Authorization: ctx.basic }).send({ name: 'Killed', webhook_url: url, event: 'customer_created' })).body;
    // Its own HTTP timeout is long: it is killed while it waits.
    const child = await spawnWorkerProcess(ctx, { WEBHOOK_ALLOWED_HOSTS: 'localhost', WEBHOOK_TIMEOUT_MS: '60000' });
    try {
      await ctx.db.transaction((trx) => recordEvent(trx, { slug: 'customer_created', objectId: 77, payload: { id: 77, model: 'customer' } }));
      await until(async () => receivers.of('/killed').length === 1, 30_000);
    } finally {
      await killWorkerProcess(child);
    }
    worker = await startTestWorker(ctx);
    await until(async () => (await ctx.db('webhook_deliveries').where({ webhook_id: hook.id }).first())?.status === 'delivered', 30_000);
    const got = receivers.of('/killed');
    expect(got).toHaveLength(2);
    expect(got[1].headers['webhook-id']).toBe(got[0].headers['webhook-id']);
    expect(got[1].headers['webhook-signature']).toBe(specSignature(hook.secret, got[1]));
    // The killed attempt left no row; the one that delivered did.
    const [delivery] = await ctx.db('webhook_deliveries').where({ webhook_id: hook.id });
    expect((await ctx.db('webhook_delivery_attempts').where({ delivery_id: delivery.id })).map((a) => a.status_code)).toEqual([200]);
  });
});
