import crypto from 'node:crypto';
import type { RunningWorker } from '../src/temporal/worker';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';

/** Issue 18, prices: price variations picked by the period asked for, add-ons billed on the membership's period. */
describe('/register prices: price variations and add-ons on the period', () => {
  let ctx: TestContext;
  let worker: RunningWorker;
  const auth = () => ({ Authorization: ctx.basic });
  const counts = async () => Promise.all(['users', 'memberships', 'payments'].map(async (t) => Number((await ctx.db(t).count({ n: '*' }))[0].n)));
  const register = (products: string[], extra: Record<string, unknown> = {}) => {
    const t = crypto.randomBytes(4).toString('hex');
    return ctx.http
      .post(`${BASE}/register`)
      .set(auth())
      .send({ customer: { username: `pv${t}`, password: 'secret123', email: `pv${t}@example.com` }, products, payment: { status: 'completed' }, membership: { status: 'active' }, ...extra });
  };
  const lines = (payment: { line_items: { name: string; unit_price: number; description: string }[] }) => payment.line_items.map((l) => [l.name, l.unit_price, l.description]);

  beforeAll(async () => {
    ctx = await createTestContext({ REGISTER_WAIT_SECONDS: '30' });
    worker = await startTestWorker(ctx);
    const post = async (body: object) => {
      const res = await ctx.http.post(`${BASE}/products`).set(auth()).send(body);
      if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    };
    await post({ slug: 'pv-plan', name: 'Pro', type: 'plan', amount: 29, duration: 1, duration_unit: 'month', price_variations: [{ amount: 290, duration: 1, duration_unit: 'year' }, { amount: '15.50', duration: 2, duration_unit: 'week' }] });
    await post({ slug: 'pv-monthly', name: 'Backups', type: 'service', amount: 5, duration: 1, duration_unit: 'month' });
    await post({ slug: 'pv-weekly', name: 'Support', type: 'service', amount: '3.33', duration: 1, duration_unit: 'week' });
    await post({ slug: 'pv-once', name: 'Setup help', type: 'package', amount: 7, recurring: false });
    await post({ slug: 'pv-yen-plan', name: 'Yen plan', type: 'plan', currency: 'JPY', amount: 1000, duration: 1, duration_unit: 'month', price_variations: [{ amount: 10000, duration: 1, duration_unit: 'year' }] });
    await post({ slug: 'pv-yen-addon', name: 'Yen add-on', type: 'service', currency: 'JPY', amount: 333, duration: 3, duration_unit: 'month' });
  });
  afterAll(async () => {
    await worker.shutdown();
    await ctx.close();
  });

  test("the plan's own period: its price, the add-on's monthly price, lines that say the period", async () => {
    const res = await register(['pv-plan', 'pv-monthly']);
    expect(res.status).toBe(200);
    expect(res.body.membership).toMatchObject({ amount: 34, duration: 1, duration_unit: 'month' });
    expect(lines(res.body.payment)).toEqual([
      ['Pro', 29, '1 month'],
      ['Backups', 5, '1 month'],
    ]);
    expect(res.body.payment.total).toBe(34);
  });

  test('a year asked for: the plan\'s yearly variation, and a monthly add-on 12× its price', async () => {
    const res = await register(['pv-plan', 'pv-monthly'], { duration: 1, duration_unit: 'year' });
    expect(res.status).toBe(200);
    expect(res.body.membership).toMatchObject({ amount: 350, duration: 1, duration_unit: 'year' });
    expect(lines(res.body.payment)).toEqual([
      ['Pro', 290, '1 year'],
      ['Backups', 60, '1 year'],
    ]);
  });

  test('2 weeks: the variation for it; a weekly add-on doubled; a one-time package charged once and not renewed', async () => {
    const res = await register(['pv-plan', 'pv-weekly', 'pv-once'], { duration: 2, duration_unit: 'week' });
    expect(res.status).toBe(200);
    expect(lines(res.body.payment)).toEqual([
      ['Pro', 15.5, '2 weeks'],
      ['Support', 6.66, '2 weeks'],
      ['Setup help', 7, 'one-time'],
    ]);
    expect(res.body.payment.total).toBe(29.16);
    expect(res.body.membership).toMatchObject({ amount: 22.16, initial_amount: 29.16 });
  });

  test('JPY: a 3-month add-on on a yearly membership is 4× its price, in whole yen', async () => {
    const res = await register(['pv-yen-plan', 'pv-yen-addon'], { duration: 1, duration_unit: 'year' });
    expect(res.status).toBe(200);
    expect(lines(res.body.payment)).toEqual([
      ['Yen plan', 10000, '1 year'],
      ['Yen add-on', 1332, '1 year'],
    ]);
    expect(res.body.payment).toMatchObject({ currency: 'JPY', total: 11332 });
  });

  test('a period the plan has no price for is a 400 naming the field; nothing is created', async () => {
    const before = await counts();
    const week = await register(['pv-plan'], { duration: 1, duration_unit: 'week' });
    expect(week.status).toBe(400);
    expect(week.body.code).toBe('wu_rest_invalid_parameter');
    expect(week.body.data.params).toEqual({ duration_unit: 'plan pv-plan has no price for 1 week; it is priced for 1 month, 1 year, 2 weeks.' });
    const three = await register(['pv-plan'], { duration: 3 });
    expect(three.status).toBe(400);
    expect(three.body.data.params).toEqual({ duration: 'plan pv-plan has no price for 3 months; it is priced for 1 month, 1 year, 2 weeks.' });
    expect(await counts()).toEqual(before);
  });

  test('an add-on whose period does not convert to the membership\'s is a 400 naming products; nothing is created', async () => {
    const before = await counts();
    const res = await register(['pv-plan', 'pv-weekly'], { duration: 1, duration_unit: 'month' });
    expect(res.status).toBe(400);
    expect(res.body.data.params).toEqual({ products: "products: pv-weekly (priced for 1 week) has no price for 1 month, the membership's period." });
    expect(await counts()).toEqual(before);
  });
});

describe('products: price_variations', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  let n = 0;
  const create = (extra: Record<string, unknown>) => ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: `pvv-${++n}`, name: `P ${n}`, type: 'plan', amount: 10, duration: 1, duration_unit: 'month', ...extra });

  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  test('kept exactly, answered as numbers, changed by a write, emptied with []', async () => {
    const res = await create({ price_variations: [{ amount: '99.90', duration: 1, duration_unit: 'year' }] });
    expect(res.status).toBe(200);
    expect(res.body.price_variations).toEqual([{ amount: 99.9, duration: 1, duration_unit: 'year' }]);
    expect((await ctx.db('products').where({ id: res.body.id }).first('price_variations')).price_variations).toEqual([{ amount: '99.9', duration: 1, duration_unit: 'year' }]);
    const upd = await ctx.http.patch(`${BASE}/products/${res.body.id}`).set(auth()).send({ price_variations: [{ amount: 50, duration: 6, duration_unit: 'month' }] });
    expect(upd.body.price_variations).toEqual([{ amount: 50, duration: 6, duration_unit: 'month' }]);
    expect((await ctx.http.patch(`${BASE}/products/${res.body.id}`).set(auth()).send({ price_variations: [] })).body.price_variations).toEqual([]);
    expect((await create({})).body.price_variations).toEqual([]);
  });

  test.each([
    [{ price_variations: [{ amount: 10, duration: 1, duration_unit: 'month' }] }, "price_variations: [0] is the product's own period (1 month): its price is amount."],
    [{ price_variations: [{ amount: '290.005', duration: 1, duration_unit: 'year' }] }, 'price_variations: [0].amount must have at most 2 decimal places in USD.'],
    [{ currency: 'JPY', price_variations: [{ amount: '1.5', duration: 1, duration_unit: 'year' }] }, 'price_variations: [0].amount must have at most 0 decimal places in JPY.'],
    [{ pricing_type: 'free', price_variations: [{ amount: 1, duration: 1, duration_unit: 'year' }] }, 'price_variations: a free product has no prices.'],
    [{ price_variations: [{ amount: 1, duration: 1, duration_unit: 'year' }, { amount: 2, duration: 1, duration_unit: 'year' }] }, 'price_variations must not list the same duration and duration_unit twice.'],
    [{ price_variations: [{ amount: 1, duration: 1, duration_unit: 'decade' }] }, expect.stringContaining('duration_unit')],
    [{ price_variations: [{ amount: -1, duration: 1, duration_unit: 'year' }] }, expect.stringContaining('amount')],
    [{ price_variations: [{ amount: 1, duration: 0, duration_unit: 'year' }] }, expect.stringContaining('duration')],
    [{ price_variations: [{ amount: 1, duration: 1, duration_unit: 'year', extra: 1 }] }, expect.stringContaining('extra')],
    [{ price_variations: Array.from({ length: 21 }, (_, i) => ({ amount: 1, duration: i + 2, duration_unit: 'day' })) }, expect.stringContaining('20')],
    [{ price_variations: 'yearly' }, expect.stringContaining('array')],
  ])('bad price_variations %j: 400, nothing created', async (extra, message) => {
    const before = Number((await ctx.db('products').count({ n: '*' }))[0].n);
    const res = await create(extra);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    const [key, value] = Object.entries(res.body.data.params as Record<string, string>)[0];
    expect(key.startsWith('price_variations')).toBe(true);
    expect(value).toEqual(message);
    expect(Number((await ctx.db('products').count({ n: '*' }))[0].n)).toBe(before);
  });

  test("a change of the product's own period onto a variation's, or to free, is refused while the variation stays", async () => {
    const p = (await create({ price_variations: [{ amount: 100, duration: 1, duration_unit: 'year' }] })).body;
    const onto = await ctx.http.patch(`${BASE}/products/${p.id}`).set(auth()).send({ duration_unit: 'year' });
    expect(onto.status).toBe(400);
    expect(onto.body.data.params.price_variations).toBe("price_variations (kept): [0] is the product's own period (1 year): its price is amount.");
    expect((await ctx.http.patch(`${BASE}/products/${p.id}`).set(auth()).send({ pricing_type: 'free' })).status).toBe(400);
    const both = await ctx.http.patch(`${BASE}/products/${p.id}`).set(auth()).send({ pricing_type: 'free', price_variations: [] });
    expect(both.status).toBe(200);
    expect(both.body).toMatchObject({ amount: 0, price_variations: [] });
  });
});

describe('/register trials', () => {
  let ctx: TestContext;
  let worker: RunningWorker;
  const auth = () => ({ Authorization: ctx.basic });
  const register = (products: string[], extra: Record<string, unknown> = {}) => {
    const t = crypto.randomBytes(4).toString('hex');
    return ctx.http
      .post(`${BASE}/register`)
      .set(auth())
      .send({ customer: { username: `tr${t}`, password: 'secret123', email: `tr${t}@example.com` }, products, ...extra });
  };
  const days = (iso: string) => (new Date(iso).getTime() - Date.now()) / 86_400_000;
  /** A membership's lifecycle: the workflow types of its outbox starts (its id is on the row), and the due date its start waits for (more than BILLING_LIFECYCLE_HORIZON_HOURS away). */
  const lifecycleOf = async (membershipId: number) => {
    const m = await ctx.db('memberships').where({ id: membershipId }).first('workflow_id', 'lifecycle_deferred_due');
    const starts = m.workflow_id ? ((await ctx.db('workflow_starts').where({ workflow_id: m.workflow_id }).pluck('workflow_type')) as string[]) : [];
    return { starts, deferredDue: m.lifecycle_deferred_due ? new Date(m.lifecycle_deferred_due).toISOString() : null };
  };

  beforeAll(async () => {
    ctx = await createTestContext({ REGISTER_WAIT_SECONDS: '30' });
    worker = await startTestWorker(ctx);
    for (const body of [
      { slug: 'tr-plan', name: 'Trial plan', type: 'plan', amount: 49, setup_fee: 10, duration: 1, duration_unit: 'month', trial_duration: 14, trial_duration_unit: 'day' },
      { slug: 'tr-free-setup', name: 'Trial plan, no fee', type: 'plan', amount: 49, duration: 1, duration_unit: 'month', trial_duration: 1, trial_duration_unit: 'month' },
      { slug: 'tr-addon', name: 'Backups', type: 'service', amount: 5, duration: 1, duration_unit: 'month' },
      { slug: 'tr-once', name: 'Migration', type: 'package', amount: 20, recurring: false },
    ]) {
      const res = await ctx.http.post(`${BASE}/products`).set(auth()).send(body);
      if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    }
  });
  afterAll(async () => {
    await worker.shutdown();
    await ctx.close();
  });

  test('a plan with a trial: trialing, date_trial_end set, only the setup fee and one-time products charged now, the customer marked has_trialed', async () => {
    const res = await register(['tr-plan', 'tr-addon', 'tr-once'], { membership: { status: 'active' }, payment: { status: 'completed' } });
    expect(res.status).toBe(200);
    expect(res.body.membership).toMatchObject({ status: 'trialing', amount: 54, initial_amount: 30 });
    expect(days(res.body.membership.date_trial_end)).toBeGreaterThan(13.9);
    expect(days(res.body.membership.date_trial_end)).toBeLessThan(14.1);
    expect(res.body.payment.total).toBe(30);
    expect(res.body.payment.line_items.map((l: { name: string; unit_price: number; description: string }) => [l.name, l.unit_price, l.description])).toEqual([
      ['Trial plan', 0, 'free trial of 14 days, then 49 USD per 1 month'],
      ['Trial plan setup fee', 10, 'one-time setup fee'],
      ['Backups', 0, 'free trial of 14 days, then 5 USD per 1 month'],
      ['Migration', 20, 'one-time'],
    ]);
    expect(res.body.customer.has_trialed).toBe(true);
    expect((await ctx.db('customers').where({ id: res.body.customer.id }).first('has_trialed')).has_trialed).toBe(true);
    // Its renewals (billed at the trial's end): the lifecycle's start waits for the trial's end to come within the horizon (24 hours), written with the registration.
    expect(await lifecycleOf(res.body.membership.id)).toEqual({ starts: [], deferredDue: new Date(res.body.membership.date_trial_end).toISOString() });
  });

  test('nothing due now: a pending registration is trialing at once, with a payment of 0', async () => {
    const res = await register(['tr-free-setup']);
    expect(res.status).toBe(200);
    expect(res.body.membership.status).toBe('trialing');
    expect(res.body.payment.total).toBe(0);
    expect(days(res.body.membership.date_trial_end)).toBeGreaterThan(27);
  });

  test('a customer who has trialed gets no second trial: the first period is charged, the status is as asked', async () => {
    const first = await register(['tr-free-setup'], { membership: { status: 'active' } });
    const customerId = first.body.customer.id as number;
    const again = await ctx.http.post(`${BASE}/register`).set(auth()).send({ customer_id: customerId, products: ['tr-plan'], membership: { status: 'active' }, payment: { status: 'completed' } });
    expect(again.status).toBe(200);
    expect(again.body.membership).toMatchObject({ status: 'active', date_trial_end: null, initial_amount: 59, times_billed: 1 });
    expect(again.body.payment.total).toBe(59);
    // The completed payment started the first period (one month on), and with it the membership's renewals (their start deferred to the horizon).
    expect(days(again.body.membership.date_expiration)).toBeGreaterThan(27.9);
    expect(days(again.body.membership.date_expiration)).toBeLessThan(31.1);
    expect(await lifecycleOf(again.body.membership.id)).toEqual({ starts: [], deferredDue: new Date(again.body.membership.date_expiration).toISOString() });
  });

  test('two registrations of one customer at once: exactly one takes the trial', async () => {
    const c = (await ctx.http.post(`${BASE}/customers`).set(auth()).send({ username: `race${crypto.randomBytes(3).toString('hex')}`, email: `race${crypto.randomBytes(3).toString('hex')}@example.com`, password: 'secret123' })).body.id;
    const both = await Promise.all([0, 1].map(() => ctx.http.post(`${BASE}/register`).set(auth()).send({ customer_id: c, products: ['tr-plan'], membership: { status: 'active' } })));
    expect(both.map((r) => r.status)).toEqual([200, 200]);
    expect(both.map((r) => r.body.membership.status).sort()).toEqual(['active', 'trialing']);
  });
});
