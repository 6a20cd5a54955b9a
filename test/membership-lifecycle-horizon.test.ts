/**
 * Lifecycle starts deferred to the horizon (issue 18, README "Billing: renewals"): a recurring
 * membership due further out than BILLING_LIFECYCLE_HORIZON_HOURS gets no workflow start yet,
 * only `lifecycle_deferred_due`; the sweep beside the workers starts it once the date is within
 * the horizon. Real PostgreSQL; the starts are read from the outbox (the relay is not running).
 */
import { lifecycleHorizonMs, MembershipLifecycles, startLifecycleSweep } from '../src/memberships/lifecycle';
import { createMembershipService } from '../src/memberships/service';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

let ctx: TestContext;
let customerId: number;
let planId: number;
/** The rule as the API and the worker get it from the configuration (24 hours by default). */
let lifecycles: MembershipLifecycles;
let memberships: ReturnType<typeof createMembershipService>;

beforeAll(async () => {
  ctx = await createTestContext();
  lifecycles = new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null, undefined, lifecycleHorizonMs(ctx.config));
  memberships = createMembershipService(ctx.db, lifecycles);
  customerId = (await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).send(newCustomerBody())).body.id;
  planId = (await ctx.http.post(`${BASE}/products`).set('Authorization', ctx.basic).send({ slug: 'horizon-monthly', name: 'Monthly', type: 'plan', amount: 10, duration: 1, duration_unit: 'month', recurring: true })).body.id;
});
afterAll(() => ctx?.close());

const create = (dueInMs: number, extra: Record<string, unknown> = {}) =>
  memberships.create({
    customer_id: customerId,
    plan_id: planId,
    status: 'active',
    amount: '10',
    currency: 'USD',
    recurring: true,
    auto_renew: true,
    duration: 1,
    duration_unit: 'month',
    date_expiration: new Date(Date.now() + dueInMs).toISOString(),
    ...extra,
  }) as Promise<{ id: number }>;
const row = (id: number) => ctx.db('memberships').where({ id }).first();
const ms = (v: unknown) => (v == null ? null : new Date(v as string).getTime());
/** The membership's lifecycle starts in the outbox: their count, and whether the relay may take them now. */
async function starts(id: number): Promise<{ n: number; due: boolean[] }> {
  const rows = await ctx.db('workflow_starts').where({ workflow_id: await lifecycles.workflowIdOf(await row(id)) }).select(ctx.db.raw('next_attempt_at <= now() AS due'));
  return { n: rows.length, due: rows.map((r: { due: boolean }) => r.due) };
}

describe('lifecycle starts deferred to the horizon', () => {
  test('the default horizon is 24 hours', () => {
    expect(ctx.config.BILLING_LIFECYCLE_HORIZON_HOURS).toBe(24);
    expect(lifecycleHorizonMs(ctx.config)).toBe(DAY);
  });

  test('due within the horizon: started at once (outbox entry, workflow id on the row); further out: only the deferred due date', async () => {
    const soon = await create(2 * HOUR);
    const soonRow = await row(soon.id);
    expect(soonRow.workflow_id).toEqual(expect.stringMatching(/-membership-\d+$/));
    expect(soonRow.lifecycle_deferred_due).toBeNull();
    expect((await starts(soon.id)).n).toBe(1);

    const due = Date.now() + 10 * DAY;
    const later = await create(10 * DAY);
    const laterRow = await row(later.id);
    expect(laterRow.workflow_id).toBeNull();
    expect(Math.abs(ms(laterRow.lifecycle_deferred_due)! - due)).toBeLessThan(5000);
    expect((await starts(later.id)).n).toBe(0);
  });

  test('the deferral follows the due date: a trial uses date_trial_end; a write moving the date moves it; a write moving it within the horizon starts the lifecycle', async () => {
    const trialEnd = new Date(Date.now() + 14 * DAY);
    const trial = await create(40 * DAY, { status: 'trialing', date_trial_end: trialEnd.toISOString() });
    expect(ms((await row(trial.id)).lifecycle_deferred_due)).toBe(trialEnd.getTime());

    const m = await create(10 * DAY);
    const moved = new Date(Date.now() + 20 * DAY);
    await memberships.update(m.id, { date_expiration: moved.toISOString() });
    expect(ms((await row(m.id)).lifecycle_deferred_due)).toBe(moved.getTime());
    expect((await starts(m.id)).n).toBe(0);

    await memberships.update(m.id, { date_expiration: new Date(Date.now() + HOUR).toISOString() });
    const started = await row(m.id);
    expect(started.lifecycle_deferred_due).toBeNull();
    expect(started.workflow_id).not.toBeNull();
    expect((await starts(m.id)).n).toBe(1);
    // A later write that changes what the lifecycle reads starts nothing more (the run is signalled).
    await memberships.update(m.id, { amount: '12' });
    expect((await starts(m.id)).n).toBe(1);
  });

  test('a membership that stops wanting a lifecycle (cancelled, auto-renew kept) loses its deferral', async () => {
    const m = await create(10 * DAY);
    expect((await row(m.id)).lifecycle_deferred_due).not.toBeNull();
    await memberships.update(m.id, { status: 'cancelled' });
    expect((await row(m.id)).lifecycle_deferred_due).toBeNull();
    expect((await starts(m.id)).n).toBe(0);
  });

  test('the sweep starts what came within the horizon (at once for the relay), drops what no longer wants one, and leaves the rest', async () => {
    const a = await create(3 * DAY);
    const b = await create(4 * DAY);
    const far = await create(30 * DAY);
    const gone = await create(5 * DAY);
    // Changed behind the rule's back (as an old row would be): the sweep checks before it starts.
    await ctx.db('memberships').where({ id: gone.id }).update({ status: 'expired' });
    // A sweep whose horizon is a week: as the 24-hour sweep finds them days later.
    const weekly = new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null, undefined, 7 * DAY);
    const n = await weekly.startDeferred(ctx.db);
    expect(n).toBeGreaterThanOrEqual(2);
    for (const id of [a.id, b.id]) {
      const r = await row(id);
      expect(r.lifecycle_deferred_due).toBeNull();
      expect(r.workflow_id).toEqual(expect.stringMatching(new RegExp(`-membership-${id}$`)));
      expect(await starts(id)).toEqual({ n: 1, due: [true] });
    }
    expect((await row(gone.id)).lifecycle_deferred_due).toBeNull();
    expect((await starts(gone.id)).n).toBe(0);
    expect((await row(far.id)).lifecycle_deferred_due).not.toBeNull();
    expect((await starts(far.id)).n).toBe(0);
    // Nothing left within the week: a second pass starts nothing.
    expect(await weekly.startDeferred(ctx.db)).toBe(0);
  });

  test('sweeps racing each other (N workers) start each membership once; batches cover more rows than one', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) ids.push((await create(2 * DAY + i * 60_000)).id);
    const sweeper = new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null, undefined, 3 * DAY);
    const counts = await Promise.all([sweeper.startDeferred(ctx.db, 5), sweeper.startDeferred(ctx.db, 5), sweeper.startDeferred(ctx.db, 5)]);
    expect(counts.reduce((x, y) => x + y, 0)).toBe(12);
    for (const id of ids) expect((await starts(id)).n).toBe(1);
  });

  test('the sweep as the workers run it: a pass when it starts, then every interval', async () => {
    const m = await create(2 * DAY);
    const sweep = startLifecycleSweep(ctx.db, new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null, undefined, 3 * DAY), 200);
    try {
      for (let i = 0; i < 100 && (await starts(m.id)).n === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await starts(m.id)).toEqual({ n: 1, due: [true] });
      // Deferred after the first pass: the interval's pass finds it.
      const next = await create(2 * DAY);
      for (let i = 0; i < 100 && (await starts(next.id)).n === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect((await starts(next.id)).n).toBe(1);
    } finally {
      await sweep.stop();
    }
  });

  test('the sweep reads the partial index, in due order (its cost is what is coming due, not the table)', async () => {
    const plan = await ctx.db.transaction(async (trx) => {
      // The test's table is small, so the planner's own choice proves nothing: can it read the index in order?
      await trx.raw('SET LOCAL enable_seqscan = off');
      await trx.raw('SET LOCAL enable_bitmapscan = off');
      const sql = trx('memberships').whereNotNull('lifecycle_deferred_due').where('lifecycle_deferred_due', '<=', new Date()).orderBy('lifecycle_deferred_due').limit(500).toString();
      return (await trx.raw(`EXPLAIN ${sql}`)).rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n');
    });
    expect(plan).toContain('memberships_lifecycle_deferred_idx');
    expect(plan).not.toContain('Sort');
  });

  test('the API answers a deferred membership without the internal column, and BILLING_LIFECYCLE_HORIZON_HOURS is validated', async () => {
    const m = await create(10 * DAY);
    const res = await ctx.http.get(`${BASE}/memberships/${m.id}`).set('Authorization', ctx.basic);
    expect(res.status).toBe(200);
    expect(res.body).not.toHaveProperty('lifecycle_deferred_due');
    const { loadConfig } = await import('../src/config');
    for (const bad of ['0', '-1', 'soon', '100000']) expect(() => loadConfig({ ...process.env, BILLING_LIFECYCLE_HORIZON_HOURS: bad })).toThrow(/BILLING_LIFECYCLE_HORIZON_HOURS/);
    expect(loadConfig({ ...process.env, BILLING_LIFECYCLE_HORIZON_HOURS: '6' }).BILLING_LIFECYCLE_HORIZON_HOURS).toBe(6);
  });
});
