/**
 * Renewals (issue 18): the membershipLifecycle workflow with its real activities against the
 * test database, on Temporal's time-skipping test server, started the way production starts it
 * (an API write puts its start in the outbox, the fast path starts it after the commit) and
 * woken by the API's signals. Months pass in seconds (env.sleep); the assertions read the
 * database: payments, times_billed, dates, statuses, events. The `http` gateway is a fake on
 * loopback (test/payment-gateway-server.ts) that declines, fails or answers slowly on purpose.
 */
import fs from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { temporal as temporalProto } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import request from 'supertest';
import { createBillingActivities } from '../activities/billing';
import { createApp } from '../src/app';
import { MembershipLifecycles } from '../src/memberships/lifecycle';
import { addPeriod } from '../src/products/pricing';
import type { TemporalHandle } from '../src/temporal/client';
import { WorkflowStarts } from '../src/temporal/starts';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';
import { startFakeGateway, type FakeGateway } from './payment-gateway-server';
import { until } from './worker-process';
import { createTimeSkippingEnv, workflowsBundle } from './workflow-env';

jest.setTimeout(180_000);

const DAY = 86_400_000;
let env: TestWorkflowEnvironment;
let ctx: TestContext;
let gateway: FakeGateway;
let api: ReturnType<typeof request>;
let app: ReturnType<typeof createApp>;
let temporalHandle: TemporalHandle;
let worker: Worker;
let running: Promise<void>;
let activities: ReturnType<typeof createBillingActivities>;
let planId: number;
const taskQueue = `lifecycle-${process.pid}`;
/**
 * The runs to keep as replay histories (HF_RECORD_LIFECYCLE_HISTORIES=1), by file name (no run id:
 * the current run). Named for the code that recorded them: `membershipLifecycle-*` before the
 * local reads (LIFECYCLE_PATCHES.localReads), kept to replay the runs from before it.
 */
const HISTORIES = 'membershipLifecycle-localreads';
const keep = new Map<string, { workflowId: string; runId?: string }>();

beforeAll(async () => {
  [env, gateway] = await Promise.all([createTimeSkippingEnv(), startFakeGateway()]);
  // The lifecycle's start carries the customer's id as a search attribute (the dev server registers it at start).
  await env.connection.operatorService.addSearchAttributes({ namespace: env.namespace ?? 'default', searchAttributes: { HostflowCustomerId: temporalProto.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT } });
  // The server's clock runs months ahead of the wall clock, by which the horizon is reckoned: every lifecycle starts at once (the horizon is tested in membership-lifecycle-horizon.test.ts).
  ctx = await createTestContext({ BILLING_HTTP_GATEWAY_URL: gateway.url, BILLING_DUNNING_DAYS: '1,3,5', BILLING_ON_HOLD_DAYS: '7', BILLING_LIFECYCLE_HORIZON_HOURS: '87600' });
  // The API as production wires it, its Temporal being the time-skipping server (both queues: the worker's).
  temporalHandle = { connection: env.connection, client: env.client, namespace: env.namespace ?? 'default', taskQueue, taskQueues: { interactive: taskQueue, bulk: taskQueue } };
  app = createApp({ config: ctx.config, db: ctx.db, settings: ctx.settings, temporal: temporalHandle, metrics: ctx.metrics, observeResponse: (r) => ctx.contract.check(r) });
  api = request(app);
  activities = createBillingActivities({ db: ctx.db, lifecycles: new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null), config: ctx.config });
  worker = await Worker.create({ connection: env.nativeConnection, namespace: env.namespace ?? 'default', taskQueue, workflowBundle: await workflowsBundle(), activities });
  running = worker.run();
  planId = (await send('post', '/products', { slug: 'monthly', name: 'Monthly', type: 'plan', amount: 10, duration: 1, duration_unit: 'month', recurring: true })).id;
});

afterAll(async () => {
  if (process.env.HF_RECORD_LIFECYCLE_HISTORIES) await recordHistories();
  worker?.shutdown();
  await running?.catch(() => undefined);
  await ctx?.close();
  await gateway?.close();
  await env?.teardown();
});

async function send(method: 'post' | 'patch' | 'get', url: string, body?: unknown, status = 200) {
  const res = await api[method](`${BASE}${url}`).set('Authorization', ctx.basic).send(body as object);
  if (res.status !== status) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** The server's clock (it runs ahead of the wall clock once time was skipped). */
const serverNow = async () => new Date(await env.currentTimeMs());

/** A customer and a recurring monthly membership of theirs, due `dueInDays` from the server's now. */
async function membership(extra: Record<string, unknown> = {}, dueInDays = 10): Promise<{ id: number; customerId: number; due: Date; workflowId: string }> {
  const customer = await send('post', '/customers', newCustomerBody());
  const due = new Date((await serverNow()).getTime() + dueInDays * DAY);
  const trialing = extra.status === 'trialing';
  const m = await send('post', '/memberships', {
    customer_id: customer.id,
    plan_id: planId,
    status: 'active',
    amount: 10,
    currency: 'USD',
    recurring: true,
    auto_renew: true,
    duration: 1,
    duration_unit: 'month',
    gateway: 'http',
    ...(trialing ? { date_trial_end: due.toISOString() } : { date_expiration: due.toISOString() }),
    ...extra,
  });
  const row = await ctx.db('memberships').where({ id: m.id }).first('workflow_id');
  expect(row.workflow_id).toEqual(expect.stringMatching(/-membership-\d+$/));
  // Started by the API's fast path after its commit (nothing left in the outbox).
  expect(await ctx.db('workflow_starts').where({ workflow_id: row.workflow_id }).select('started_at', 'last_error', 'attempts')).toEqual([{ started_at: expect.any(Date), last_error: null, attempts: 1 }]);
  return { id: m.id, customerId: customer.id, due, workflowId: row.workflow_id };
}

const row = (id: number) => ctx.db('memberships').where({ id }).first();
const renewals = (id: number) => ctx.db('payments').where({ membership_id: id }).whereNotNull('renewal_period_start').orderBy('renewal_period_start');
const events = async (id: number) => (await ctx.db('events').where({ object_type: 'membership', object_id: id }).orderBy('id').pluck('slug')) as string[];
const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());
const month = (d: Date, n = 1) => addPeriod(d, n, 'month');
/** Lets `days` of server time pass, then waits (real time) until the database shows what is expected. */
async function after(days: number, check: () => Promise<boolean>): Promise<void> {
  await env.sleep(days * DAY);
  await until(check, 20_000);
}

describe('membership lifecycle (time-skipping, real activities)', () => {
  test('renewals: each due date creates one renewal, charged through the http gateway; date_expiration moves one period on from the old one, times_billed counts; one run per cycle', async () => {
    const m = await membership();
    await after(10 + 31 + 31 + 1, async () => (await renewals(m.id)).length === 3 && (await row(m.id)).times_billed === 3);
    const r = await row(m.id);
    expect(r).toMatchObject({ status: 'active', times_billed: 3 });
    expect(iso(r.date_expiration)).toBe(iso(month(m.due, 3)));
    expect(r.date_renewed).not.toBeNull();
    const pays = await renewals(m.id);
    expect(pays.map((p) => [p.status, iso(p.renewal_period_start), Number(p.total)])).toEqual([
      ['completed', iso(m.due), 10],
      ['completed', iso(month(m.due)), 10],
      ['completed', iso(month(m.due, 2)), 10],
    ]);
    // Each took its invoice number on completion, and carries the gateway's charge id.
    expect(new Set(pays.map((p) => p.invoice_number)).size).toBe(3);
    expect(pays.every((p) => /^ch_\d+$/.test(p.gateway_payment_id))).toBe(true);
    expect(pays[0].line_items).toEqual([{ name: 'Monthly', quantity: 1, unit_price: 10, product_id: planId, description: '1 month' }]);
    expect(gateway.charged().filter((k) => pays.some((p) => k === `renewal-${p.id}-0`))).toHaveLength(3);
    expect((await events(m.id)).filter((e) => e === 'membership_renewed')).toHaveLength(3);
    // Continue-as-new per cycle: the current run is not the first.
    const handle = env.client.workflow.getHandle(m.workflowId);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    const started = (await handle.fetchHistory()).events![0].workflowExecutionStartedEventAttributes!;
    expect(started.continuedExecutionRunId).toBeTruthy();
    keep.set(`${HISTORIES}-running`, { workflowId: m.workflowId });
  });

  test('trial end: the first period is charged at date_trial_end; the membership becomes active until trial end + 1 period', async () => {
    const m = await membership({ status: 'trialing' }, 14);
    await after(15, async () => (await row(m.id)).status === 'active');
    const r = await row(m.id);
    expect(r).toMatchObject({ status: 'active', times_billed: 1 });
    expect(iso(r.date_expiration)).toBe(iso(month(m.due)));
    expect((await renewals(m.id)).map((p) => [p.status, iso(p.renewal_period_start)])).toEqual([['completed', iso(m.due)]]);
    expect(await events(m.id)).toContain('membership_activated');
  });

  test('dunning: declined at the due date and on each BILLING_DUNNING_DAYS (1,3,5), then on-hold, then expired BILLING_ON_HOLD_DAYS (7) later', async () => {
    const m = await membership();
    gateway.behave(m.customerId, { decline: true });
    await after(10 + 5 + 1, async () => (await row(m.id)).status === 'on-hold');
    const [p] = await renewals(m.id);
    expect(p.status).toBe('failed');
    // Four attempts, each under its own idempotency key.
    expect(gateway.seen.filter((s) => s.paymentId === Number(p.id)).map((s) => [s.key, s.answer])).toEqual([0, 1, 2, 3].map((i) => [`renewal-${p.id}-${i}`, 'failed']));
    await after(7, async () => (await row(m.id)).status === 'expired');
    expect(await events(m.id)).toEqual(expect.arrayContaining(['membership_on_hold', 'membership_expired']));
    expect((await row(m.id)).times_billed).toBe(0);
    expect(await env.client.workflow.getHandle(m.workflowId).result()).toEqual({ membershipId: m.id, outcome: 'expired' });
    keep.set(`${HISTORIES}-dunning-expired`, { workflowId: m.workflowId });
  });

  test('gateway trouble: 500s are retried by the activity under the same idempotency key, and the customer is charged once', async () => {
    const m = await membership();
    const firstRun = (await env.client.workflow.getHandle(m.workflowId).describe()).runId;
    gateway.behave(m.customerId, { failFirst: 2 });
    await after(11, async () => (await row(m.id)).times_billed === 1);
    const [p] = await renewals(m.id);
    expect(p.status).toBe('completed');
    expect(gateway.seen.filter((s) => s.paymentId === Number(p.id)).map((s) => [s.key, s.answer])).toEqual([
      [`renewal-${p.id}-0`, '500'],
      [`renewal-${p.id}-0`, '500'],
      [`renewal-${p.id}-0`, 'succeeded'],
    ]);
    keep.set(`${HISTORIES}-activity-retried`, { workflowId: m.workflowId, runId: firstRun });
  });

  test('billing_cycles reached: after 2 charges the membership expires at the end of its period', async () => {
    const m = await membership({ billing_cycles: 2 });
    await after(10 + 31 + 31 + 1, async () => (await row(m.id)).status === 'expired');
    const r = await row(m.id);
    expect(r.times_billed).toBe(2);
    expect(iso(r.date_expiration)).toBe(iso(month(m.due, 2)));
    expect((await renewals(m.id)).map((p) => p.status)).toEqual(['completed', 'completed']);
    expect(await env.client.workflow.getHandle(m.workflowId).result()).toEqual({ membershipId: m.id, outcome: 'expired' });
    keep.set(`${HISTORIES}-completed`, { workflowId: m.workflowId });
  });

  test('cancel at period end (PATCH auto_renew false): no renewal; it expires at its due date, not before', async () => {
    const m = await membership();
    await send('patch', `/memberships/${m.id}`, { auto_renew: false });
    await env.sleep(5 * DAY);
    expect((await row(m.id)).status).toBe('active');
    await after(6, async () => (await row(m.id)).status === 'expired');
    expect(await renewals(m.id)).toEqual([]);
    expect(await events(m.id)).toContain('membership_expired');
    keep.set(`${HISTORIES}-signaled`, { workflowId: m.workflowId });
  });

  test('cancel now (status cancelled): the signal wakes the lifecycle, which ends at once', async () => {
    const m = await membership({}, 20);
    await send('patch', `/memberships/${m.id}`, { status: 'cancelled' });
    expect(await env.client.workflow.getHandle(m.workflowId).result()).toEqual({ membershipId: m.id, outcome: 'cancelled' });
    expect(await renewals(m.id)).toEqual([]);
  });

  test('a due date moved later by the API: the lifecycle sleeps again until the new date', async () => {
    const m = await membership();
    const later = new Date(m.due.getTime() + 20 * DAY);
    await send('patch', `/memberships/${m.id}`, { date_expiration: later.toISOString() });
    await env.sleep(15 * DAY);
    expect(await renewals(m.id)).toEqual([]);
    await after(16, async () => (await row(m.id)).times_billed === 1);
    expect((await renewals(m.id)).map((p) => iso(p.renewal_period_start))).toEqual([iso(later)]);
  });

  test('manual gateway: the renewal waits for the payment to be marked completed through the API, which renews the membership', async () => {
    const m = await membership({ gateway: 'manual' });
    await after(11, async () => (await renewals(m.id)).length === 1);
    const [p] = await renewals(m.id);
    expect(p).toMatchObject({ status: 'pending', gateway: 'manual', invoice_number: null });
    const done = await send('patch', `/payments/${p.id}`, { status: 'completed' });
    expect(done).toMatchObject({ status: 'completed', renewal_period_start: iso(m.due), invoice_number: expect.any(Number) });
    const r = await row(m.id);
    expect(r.times_billed).toBe(1);
    expect(iso(r.date_expiration)).toBe(iso(month(m.due)));
    // The next cycle waits for the next due date.
    await after(32, async () => (await renewals(m.id)).length === 2);
    expect((await renewals(m.id)).map((x) => [x.status, iso(x.renewal_period_start)])).toEqual([
      ['completed', iso(m.due)],
      ['pending', iso(month(m.due))],
    ]);
  });

  test('manual gateway unpaid: on-hold after the dunning schedule; a payment completed by hand while on-hold reactivates it, dates moved on', async () => {
    const m = await membership({ gateway: 'manual' });
    await after(10 + 5 + 1, async () => (await row(m.id)).status === 'on-hold');
    const [p] = await renewals(m.id);
    expect(p.status).toBe('pending');
    await send('patch', `/payments/${p.id}`, { status: 'completed' });
    const r = await row(m.id);
    expect(r).toMatchObject({ status: 'active', times_billed: 1 });
    expect(iso(r.date_expiration)).toBe(iso(month(m.due)));
    expect(await events(m.id)).toEqual(expect.arrayContaining(['membership_on_hold', 'membership_activated']));
    // Past the on-hold days nothing expires it: it was paid.
    await env.sleep(8 * DAY);
    expect((await row(m.id)).status).toBe('active');
  });

  test('paid while on-hold through an API whose horizon is 24 hours: the start is deferred though the lifecycle still runs; the running lifecycle (signalled) renews at the new date, once; the sweep\'s start later joins it', async () => {
    // The API as production configures it (BILLING_LIFECYCLE_HORIZON_HOURS 24). The server's
    // clock runs ahead of the wall clock here, so every date it sets is beyond that horizon.
    const horizonApp = createApp({ config: { ...ctx.config, BILLING_LIFECYCLE_HORIZON_HOURS: 24 }, db: ctx.db, settings: ctx.settings, temporal: temporalHandle, metrics: ctx.metrics, storage: app.locals.storage });
    const horizonApi = request(horizonApp);
    const m = await membership({ gateway: 'manual' });
    await after(10 + 5 + 1, async () => (await row(m.id)).status === 'on-hold');
    const handle = env.client.workflow.getHandle(m.workflowId);
    const alive = await handle.describe();
    expect(alive.status.name).toBe('RUNNING');
    const [p] = await renewals(m.id);
    const paid = await horizonApi.patch(`${BASE}/payments/${p.id}`).set('Authorization', ctx.basic).send({ status: 'completed' });
    expect(paid.status).toBe(200);
    // Reactivated with its next due date beyond the horizon: the start waits for the sweep (no
    // outbox entry), while the run that put it on hold is still there and was signalled.
    let r = await row(m.id);
    expect(r).toMatchObject({ status: 'active', times_billed: 1, workflow_id: m.workflowId });
    expect(iso(r.lifecycle_deferred_due)).toBe(iso(month(m.due)));
    expect(Number((await ctx.db('workflow_starts').where({ workflow_id: m.workflowId }).whereNull('started_at').count({ n: '*' }))[0].n)).toBe(0);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    // The running lifecycle renews at the new due date, exactly once (manual: the payment waits).
    const untilDue = month(m.due).getTime() - (await serverNow()).getTime();
    await after(untilDue / DAY + 1, async () => (await renewals(m.id)).length === 2);
    await env.sleep(2 * DAY);
    const pays = await renewals(m.id);
    expect(pays.map((x) => [x.status, iso(x.renewal_period_start)])).toEqual([
      ['completed', iso(m.due)],
      ['pending', iso(month(m.due))],
    ]);
    // The sweep, once the date comes within the horizon (here: a horizon that takes it now),
    // starts it with USE_EXISTING: it joins the running lifecycle, which is not restarted.
    const sweep = new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null, undefined, 87_600 * 3_600_000);
    expect(await sweep.startDeferred(ctx.db)).toBeGreaterThanOrEqual(1);
    r = await row(m.id);
    expect(r.lifecycle_deferred_due).toBeNull();
    const before = await handle.describe();
    expect(await new WorkflowStarts(ctx.db, horizonApp.locals.temporal).startPendingOf(m.workflowId)).toEqual(['started']);
    const joined = await handle.describe();
    expect(joined.runId).toBe(before.runId);
    expect(joined.status.name).toBe('RUNNING');
    // Paid: the joined run moves the period on; still one renewal payment per period.
    expect((await horizonApi.patch(`${BASE}/payments/${pays[1].id}`).set('Authorization', ctx.basic).send({ status: 'completed' })).status).toBe(200);
    await until(async () => (await row(m.id)).times_billed === 2, 20_000);
    expect(iso((await row(m.id)).date_expiration)).toBe(iso(month(m.due, 2)));
    expect((await renewals(m.id)).map((x) => iso(x.renewal_period_start))).toEqual([iso(m.due), iso(month(m.due))]);
  });
});

describe('a renewal payment failed by hand', () => {
  test('manual gateway: the payment marked failed through the API puts the membership on hold at once; unpaid, it expires after the on-hold days', async () => {
    const m = await membership({ gateway: 'manual' });
    await after(11, async () => (await renewals(m.id)).length === 1);
    const [p] = await renewals(m.id);
    await send('patch', `/payments/${p.id}`, { status: 'failed' });
    await until(async () => (await row(m.id)).status === 'on-hold', 20_000);
    await after(12, async () => (await row(m.id)).status === 'expired');
    expect((await renewals(m.id)).map((x) => x.status)).toEqual(['failed']);
    expect(await env.client.workflow.getHandle(m.workflowId).result()).toEqual({ membershipId: m.id, outcome: 'expired' });
  });
});

describe('which memberships get a lifecycle (the one rule, in the write\'s transaction)', () => {
  const starts = async (id: number) => {
    const m = await ctx.db('memberships').where({ id }).first('workflow_id');
    return m.workflow_id ? ((await ctx.db('workflow_starts').where({ workflow_id: m.workflow_id }).pluck('workflow_type')) as string[]) : [];
  };

  test('none for a pending, a non-recurring, or a dateless membership; one once it becomes active with a due date', async () => {
    const customer = await send('post', '/customers', newCustomerBody());
    const base = { customer_id: customer.id, plan_id: planId, amount: 10, recurring: true, duration: 1, duration_unit: 'month' };
    const due = new Date((await serverNow()).getTime() + 40 * DAY).toISOString();
    const pending = await send('post', '/memberships', { ...base, status: 'pending', date_expiration: due });
    const once = await send('post', '/memberships', { ...base, status: 'active', recurring: false, date_expiration: due });
    const dateless = await send('post', '/memberships', { ...base, status: 'active' });
    for (const m of [pending, once, dateless]) expect(await starts(m.id)).toEqual([]);
    await send('patch', `/memberships/${pending.id}`, { status: 'active' });
    expect(await starts(pending.id)).toEqual(['membershipLifecycle']);
    // Further changes signal the running lifecycle; they start nothing more.
    await send('patch', `/memberships/${pending.id}`, { amount: 12, auto_renew: false });
    expect(await starts(pending.id)).toEqual(['membershipLifecycle']);
    const id = (await ctx.db('memberships').where({ id: pending.id }).first('workflow_id')).workflow_id;
    expect((await env.client.workflow.getHandle(id).describe()).status.name).toBe('RUNNING');
  });

  test('the first completed payment of an active recurring membership without date_expiration starts its first period, and its lifecycle', async () => {
    const customer = await send('post', '/customers', newCustomerBody());
    const m = await send('post', '/memberships', { customer_id: customer.id, plan_id: planId, status: 'active', amount: 10, recurring: true, duration: 1, duration_unit: 'year' });
    expect(await starts(m.id)).toEqual([]);
    const before = Date.now();
    await send('post', '/payments', { customer_id: customer.id, membership_id: m.id, status: 'completed', total: 10 });
    const r = await row(m.id);
    expect(r.times_billed).toBe(1);
    expect(new Date(r.date_expiration).getTime()).toBeGreaterThanOrEqual(addPeriod(new Date(before), 1, 'year').getTime());
    expect(await starts(m.id)).toEqual(['membershipLifecycle']);
    // A second payment (not a renewal) moves nothing.
    await send('post', '/payments', { customer_id: customer.id, membership_id: m.id, status: 'completed', total: 10 });
    expect(await row(m.id)).toMatchObject({ times_billed: 1, date_expiration: r.date_expiration });
  });
});

describe('exactly once', () => {
  test('a downgrade scheduled for the period end (POST /memberships/{id}/change) is what renews, and a downgrade\'s credit is taken first; a credit that covers the period pays it at once', async () => {
    const cheap = (await send('post', '/products', { slug: `cheap-${Date.now()}`, name: 'Cheap', type: 'plan', amount: 4, duration: 1, duration_unit: 'month', recurring: true })).id;
    const m = await membership();
    const scheduled = await send('post', `/memberships/${m.id}/change`, { plan_id: cheap, when: 'period_end' });
    expect(scheduled.effective_at).toBe(iso(m.due));
    // What an earlier downgrade left (credit_balance is written by plan changes only).
    await ctx.db('memberships').where({ id: m.id }).update({ credit_balance: '1.5' });
    // Another membership whose credit covers a whole period.
    const covered = await membership();
    await ctx.db('memberships').where({ id: covered.id }).update({ credit_balance: '25' });
    await after(11, async () => (await row(m.id)).times_billed === 1 && (await row(covered.id)).times_billed === 1);

    const r = await row(m.id);
    expect([r.plan_id, Number(r.amount), r.scheduled_change, Number(r.credit_balance), iso(r.date_expiration)]).toEqual([cheap, 4, null, 0, iso(month(m.due))]);
    const [pay] = await renewals(m.id);
    expect([pay.status, Number(pay.subtotal), Number(pay.discount_total), Number(pay.total), pay.product_id]).toEqual(['completed', 4, 1.5, 2.5, cheap]);
    expect(pay.line_items).toEqual([{ name: 'Cheap', quantity: 1, unit_price: 4, product_id: cheap, description: '1 month' }]);
    // The gateway charged what was left after the credit.
    expect(gateway.seen.filter((c) => c.key === `renewal-${pay.id}-0` && c.answer === 'succeeded').map((c) => c.amount)).toEqual(['2.50']);

    const c = await row(covered.id);
    expect([Number(c.credit_balance), iso(c.date_expiration)]).toEqual([15, iso(month(covered.due))]);
    const [free] = await renewals(covered.id);
    expect([free.status, Number(free.subtotal), Number(free.discount_total), Number(free.total)]).toEqual(['completed', 10, 10, 0]);
    // Nothing to charge: the gateway was never asked.
    expect(gateway.seen.filter((c) => c.paymentId === free.id)).toEqual([]);
  });

  test('the renewal step run twice, and twice at once: one renewal payment for the period', async () => {
    const m = await membership({ gateway: 'manual' }, 40);
    await send('patch', `/memberships/${m.id}`, { status: 'cancelled' });
    // Back to active without a lifecycle run's interference: drive the steps by hand.
    await ctx.db('memberships').where({ id: m.id }).update({ status: 'active', auto_renew: true, date_cancellation: null });
    const at = m.due.getTime() + 1000;
    const first = await activities.renewMembership({ membershipId: m.id, dueAt: m.due.getTime(), at });
    const again = await activities.renewMembership({ membershipId: m.id, dueAt: m.due.getTime(), at });
    const racing = await Promise.all([1, 2, 3].map(() => activities.renewMembership({ membershipId: m.id, dueAt: m.due.getTime(), at })));
    expect(first).toEqual({ outcome: 'payment', paymentId: expect.any(Number) });
    for (const out of [again, ...racing]) expect(out).toEqual(first);
    expect(await renewals(m.id)).toHaveLength(1);
    // The unique key backs the rule up.
    await expect(ctx.db('payments').insert({ customer_id: m.customerId, membership_id: m.id, renewal_period_start: m.due, currency: 'USD' })).rejects.toThrow(/payments_renewal_period_unique/);
  });

  test('a charge retried (a worker killed after the gateway charged) and two at once: charged once, billed once', async () => {
    const m = await membership({ gateway: 'manual' }, 40);
    await send('patch', `/memberships/${m.id}`, { status: 'cancelled' });
    await ctx.db('memberships').where({ id: m.id }).update({ status: 'active', auto_renew: true, date_cancellation: null, gateway: 'http' });
    const { paymentId } = (await activities.renewMembership({ membershipId: m.id, dueAt: m.due.getTime(), at: m.due.getTime() })) as { paymentId: number };
    gateway.behave(m.customerId, { delayMs: 200 });
    const outs = await Promise.all([activities.chargeRenewal({ paymentId, attempt: 0 }), activities.chargeRenewal({ paymentId, attempt: 0 })]);
    const again = await activities.chargeRenewal({ paymentId, attempt: 0 });
    for (const out of [...outs, again]) expect(out).toEqual({ status: 'succeeded', chargeId: expect.stringMatching(/^ch_/) });
    expect(gateway.charged().filter((k) => k.startsWith(`renewal-${paymentId}-`))).toEqual([`renewal-${paymentId}-0`]);
    const r = await row(m.id);
    expect(r.times_billed).toBe(1);
    expect(iso(r.date_expiration)).toBe(iso(month(m.due)));
    const [{ n }] = await ctx.db('events').where({ slug: 'payment_completed', object_id: paymentId }).count({ n: '*' });
    expect(Number(n)).toBe(1);
  });

  test('an API write racing the renewal step (auto_renew off at the due date): either the renewal or the expiry, never both', async () => {
    for (let i = 0; i < 3; i++) {
      const m = await membership({ gateway: 'manual' }, 40);
      const at = m.due.getTime() + 1000;
      const [step] = await Promise.all([
        activities.renewMembership({ membershipId: m.id, dueAt: m.due.getTime(), at }),
        send('patch', `/memberships/${m.id}`, { auto_renew: false }),
      ]);
      const pays = await renewals(m.id);
      const r = await row(m.id);
      if (step.outcome === 'payment') expect([pays.length, r.status, r.auto_renew]).toEqual([1, 'active', false]);
      else expect([step.outcome, pays.length, r.status]).toEqual(['expired', 0, 'expired']);
    }
  });
});

describe('bad input', () => {
  test('renewal_period_start is read-only: 400 on create and update, nothing changed', async () => {
    const customer = await send('post', '/customers', newCustomerBody());
    const bad = await api.post(`${BASE}/payments`).set('Authorization', ctx.basic).send({ customer_id: customer.id, renewal_period_start: '2026-01-01T00:00:00Z' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'wu_rest_invalid_parameter', data: { status: 400, params: { renewal_period_start: 'renewal_period_start is not a valid parameter.' } } });
    const p = await send('post', '/payments', { customer_id: customer.id });
    const upd = await api.patch(`${BASE}/payments/${p.id}`).set('Authorization', ctx.basic).send({ renewal_period_start: null });
    expect(upd.status).toBe(400);
    expect((await ctx.db('payments').where({ id: p.id }).first()).renewal_period_start).toBeNull();
  });
});

/** The kept runs' histories into test/histories (the replay test replays them). */
async function recordHistories(): Promise<void> {
  const dir = path.join(__dirname, 'histories');
  for (const [name, { workflowId, runId }] of keep) {
    const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
    const json = JSON.parse(historyToJSON(history));
    fs.writeFileSync(path.join(dir, `${name}.json`), `${JSON.stringify({ workflowId, ...json }, null, 1)}\n`);
  }
}
