import { Decimal } from '../src/db/money';
import { MembershipLifecycles } from '../src/memberships/lifecycle';
import { applyScheduledChange, takeCredit } from '../src/memberships/plan-change';
import { chargeWithCredit, currentPeriodStart, prorate } from '../src/memberships/proration';
import { createMembershipService } from '../src/memberships/service';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { API_KEY, BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

const DAY = 86_400_000;
const at = (iso: string) => new Date(iso);

describe('proration (src/memberships/proration.ts, pure)', () => {
  // Renewed 2026-11-01, expires 2026-12-01 (30 days, 2,592,000 s); changed 2026-11-21: 864,000 s (1/3) left.
  const current = (amount: string) => ({ amount, start: at('2026-11-01T00:00:00Z'), end: at('2026-12-01T00:00:00Z') });
  const now = at('2026-11-21T00:00:00Z');

  test('USD upgrade: credit 29 × 1/3 = 9.666… → 9.67, cost 49 × 1/3 = 16.333… → 16.33, due 6.66', () => {
    const p = prorate({ currency: 'USD', now, current: current('29'), next: { amounts: ['49'], duration: 1, duration_unit: 'month' }, restart: false, unprorated: false });
    expect([p.period_seconds, p.remaining_seconds]).toEqual([2_592_000, 864_000]);
    expect([p.credit.toFixed(), p.cost.toFixed(), p.amount_due.toFixed(), p.credit_left.toFixed()]).toEqual(['9.67', '16.33', '6.66', '0']);
    expect(p.expiration).toEqual(at('2026-12-01T00:00:00Z'));
  });

  test('USD downgrade: credit 49 × 1/3 = 16.33, cost 29 × 1/3 = 9.67, nothing due, 6.66 credit left', () => {
    const p = prorate({ currency: 'USD', now, current: current('49'), next: { amounts: ['29'], duration: 1, duration_unit: 'month' }, restart: false, unprorated: false });
    expect([p.credit.toFixed(), p.cost.toFixed(), p.amount_due.toFixed(), p.credit_left.toFixed()]).toEqual(['16.33', '9.67', '0', '6.66']);
  });

  test('JPY (no minor unit): 3000 → 5000 yen: credit 1000, cost 1666.66… → 1667, due 667; the way back leaves 667 yen credit', () => {
    const up = prorate({ currency: 'JPY', now, current: current('3000'), next: { amounts: ['5000'], duration: 1, duration_unit: 'month' }, restart: false, unprorated: false });
    expect([up.credit.toFixed(), up.cost.toFixed(), up.amount_due.toFixed(), up.credit_left.toFixed()]).toEqual(['1000', '1667', '667', '0']);
    const down = prorate({ currency: 'JPY', now, current: current('5000'), next: { amounts: ['3000'], duration: 1, duration_unit: 'month' }, restart: false, unprorated: false });
    // 5000/3 = 1666.66… → 1667 credit; 3000/3 = 1000 cost; 667 left.
    expect([down.credit.toFixed(), down.cost.toFixed(), down.amount_due.toFixed(), down.credit_left.toFixed()]).toEqual(['1667', '1000', '0', '667']);
  });

  test('KWD (3 decimals): 10 → 25 dinars for a third of the period: credit 3.333, cost 8.333, due 5', () => {
    const p = prorate({ currency: 'KWD', now, current: current('10'), next: { amounts: ['25'], duration: 1, duration_unit: 'month' }, restart: false, unprorated: false });
    expect([p.credit.toFixed(), p.cost.toFixed(), p.amount_due.toFixed()]).toEqual(['3.333', '8.333', '5']);
  });

  test('each line is rounded on its own: plan 49 and add-ons 2 × 5 for a third of the period: 16.33 + 3.33 = 19.66', () => {
    const p = prorate({ currency: 'USD', now, current: current('29'), next: { amounts: ['49', '10'], duration: 1, duration_unit: 'month' }, restart: false, unprorated: false });
    expect(p.costs.map((c) => c.toFixed())).toEqual(['16.33', '3.33']);
    expect([p.cost.toFixed(), p.amount_due.toFixed()]).toEqual(['19.66', '9.99']);
  });

  test('a new period (monthly → yearly) starts now: the whole new price less the credit; date_expiration a year on', () => {
    const p = prorate({ currency: 'USD', now, current: current('29'), next: { amounts: ['290'], duration: 1, duration_unit: 'year' }, restart: true, unprorated: false });
    // 290 − 9.67 = 280.33
    expect([p.credit.toFixed(), p.cost.toFixed(), p.amount_due.toFixed()]).toEqual(['9.67', '290', '280.33']);
    expect(p.expiration).toEqual(at('2027-11-21T00:00:00Z'));
  });

  test('a trial pays nothing now and keeps its end; a period already over gives no credit and costs nothing', () => {
    const trial = prorate({ currency: 'USD', now, current: current('29'), next: { amounts: ['49'], duration: 1, duration_unit: 'year' }, restart: true, unprorated: true });
    expect([trial.credit.toFixed(), trial.cost.toFixed(), trial.amount_due.toFixed()]).toEqual(['0', '0', '0']);
    expect(trial.expiration).toEqual(at('2026-12-01T00:00:00Z'));
    const over = prorate({ currency: 'USD', now: at('2026-12-02T00:00:00Z'), current: current('29'), next: { amounts: ['49'], duration: 1, duration_unit: 'month' }, restart: false, unprorated: false });
    expect([over.remaining_seconds, over.credit.toNumber(), over.cost.toNumber()]).toEqual([0, 0, 0]);
  });

  test('the period starts at date_renewed, else date_activated, when within one period before the expiration; else one period before it', () => {
    const end = at('2026-12-01T00:00:00Z');
    const base = { date_expiration: end, duration: 1, duration_unit: 'month' };
    expect(currentPeriodStart({ ...base, date_renewed: at('2026-11-03T00:00:00Z'), date_activated: at('2026-01-01T00:00:00Z') })).toEqual(at('2026-11-03T00:00:00Z'));
    expect(currentPeriodStart({ ...base, date_renewed: null, date_activated: at('2026-11-10T00:00:00Z') })).toEqual(at('2026-11-10T00:00:00Z'));
    // Activated long ago and never renewed here: one month before the expiration.
    expect(currentPeriodStart({ ...base, date_renewed: null, date_activated: at('2026-01-01T00:00:00Z') })).toEqual(at('2026-11-01T00:00:00Z'));
    expect(currentPeriodStart({ ...base, date_renewed: null, date_activated: null })).toEqual(at('2026-11-01T00:00:00Z'));
  });

  test('a renewal takes the credit first, never below zero', () => {
    expect(Object.values(chargeWithCredit('29', '6.66')).map((d) => d.toFixed())).toEqual(['6.66', '22.34', '0']);
    expect(Object.values(chargeWithCredit('5', '6.66')).map((d) => d.toFixed())).toEqual(['5', '0', '1.66']);
  });
});

describe('plan changes (POST /memberships/{id}/change)', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  let customerId: number;
  const ids: Record<string, number> = {};

  const product = async (slug: string, body: Record<string, unknown>) => {
    const res = await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug, name: slug[0].toUpperCase() + slug.slice(1), type: 'plan', duration: 30, duration_unit: 'day', ...body });
    expect(res.status).toBe(200);
    ids[slug] = res.body.id;
  };
  /** An active membership on `plan`, renewed 20 days ago, expiring in 10 days (a 30-day period, 1/3 left). */
  const membership = async (plan: string, extra: Record<string, unknown> = {}) => {
    const now = Date.now();
    const res = await ctx.http
      .post(`${BASE}/memberships`)
      .set(auth())
      .send({
        customer_id: customerId,
        plan_id: ids[plan],
        status: 'active',
        duration: 30,
        duration_unit: 'day',
        date_renewed: new Date(now - 20 * DAY).toISOString(),
        date_expiration: new Date(now + 10 * DAY).toISOString(),
        ...extra,
      });
    expect(res.status).toBe(200);
    return res.body as Record<string, any>;
  };
  const change = (id: number | string, body: unknown, path = 'memberships') => ctx.http.post(`${BASE}/${path}/${id}/change`).set(auth()).send(body as object);
  const row = (id: number) => ctx.db('memberships').where({ id }).first();
  const paymentsOf = (id: number) => ctx.db('payments').where({ membership_id: id }).orderBy('id');
  const eventsOf = async (id: number) => (await ctx.db('events').where({ object_type: 'membership', object_id: id }).orderBy('id')).map((e) => e.slug as string);

  beforeAll(async () => {
    ctx = await createTestContext();
    customerId = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body.id;
    await product('basic', { amount: 29, price_variations: [{ amount: 290, duration: 1, duration_unit: 'year' }] });
    await product('pro', { amount: 49, price_variations: [{ amount: 490, duration: 1, duration_unit: 'year' }] });
    await product('plus', { amount: 39 });
    await product('retired', { amount: 19, active: false });
    await product('euro', { amount: 30, currency: 'EUR' });
    await product('jbasic', { amount: 3000, currency: 'JPY' });
    await product('jpro', { amount: 5000, currency: 'JPY' });
    await product('backups', { amount: 5, type: 'package', recurring: true });
  });
  afterAll(() => ctx.close());

  test('preview in USD: the breakdown (checked by hand), and nothing changes at all', async () => {
    const m = await membership('basic', { amount: 29 });
    const before = await row(m.id);
    const eventsBefore = await eventsOf(m.id);
    const res = await change(m.id, { plan_id: ids.pro, when: 'now', preview: true });
    expect(res.status).toBe(200);
    // 29 × (10 of 30 days) = 9.666… → 9.67 credit; 49 × 1/3 = 16.333… → 16.33 cost; 6.66 due.
    // (A few seconds pass between the membership's dates and the request: 29 × 863995/2592000 still rounds to 9.67.)
    expect(res.body).toMatchObject({
      membership_id: m.id,
      when: 'now',
      preview: true,
      currency: 'USD',
      from: { plan_id: ids.basic, duration: 30, duration_unit: 'day', addon_products: [], amount: 29 },
      to: { plan_id: ids.pro, duration: 30, duration_unit: 'day', addon_products: [], amount: 49 },
      period: { seconds: 2_592_000 },
      credit: 9.67,
      cost: 16.33,
      amount_due: 6.66,
      credit_left: 0,
      lines: [{ name: 'Pro', quantity: 1, unit_price: 16.33, product_id: ids.pro }],
      next_renewal: { date: new Date(before.date_expiration).toISOString(), amount: 49, credit_applied: 0, amount_due: 49 },
    });
    expect(res.body.period.remaining_seconds).toBeGreaterThan(864_000 - 60);
    expect(res.body).not.toHaveProperty('membership');
    expect(await row(m.id)).toEqual(before);
    expect(await paymentsOf(m.id)).toHaveLength(0);
    expect(await eventsOf(m.id)).toEqual(eventsBefore);
  });

  test('preview in JPY: 3000 → 5000 yen: 1000 credit, 1667 cost, 667 due; the singular path answers the same', async () => {
    const m = await membership('jbasic', { amount: 3000, currency: 'JPY' });
    // 3000 × 1/3 = 1000; 5000 × 1/3 = 1666.66… → 1667 (no minor unit); 1667 − 1000 = 667.
    const res = await change(m.id, { plan_id: ids.jpro, when: 'now', preview: true }, 'membership');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ currency: 'JPY', credit: 1000, cost: 1667, amount_due: 667, credit_left: 0, to: { amount: 5000 } });
    const back = await membership('jpro', { amount: 5000, currency: 'JPY' });
    // 5000 × 1/3 = 1666.66… → 1667 credit; 3000 × 1/3 = 1000 cost; 667 yen left for the renewals (3000 − 667 = 2333 then).
    const down = await change(back.id, { plan_id: ids.jbasic, when: 'now', preview: true });
    expect(down.body).toMatchObject({ credit: 1667, cost: 1000, amount_due: 0, credit_left: 667, next_renewal: { amount: 3000, credit_applied: 667, amount_due: 2333 } });
  });

  test('upgrade now: new plan and amount, a pending payment of what is due with its prorated lines, in one go', async () => {
    const m = await membership('basic', { amount: 29, gateway: 'manual' });
    const res = await change(m.id, { plan_id: ids.pro, addon_products: [{ product_id: ids.backups, quantity: 2 }], when: 'now' });
    expect(res.status).toBe(200);
    // Pro 49 × 1/3 = 16.33, backups 2 × 5 × 1/3 = 3.33: cost 19.66; credit 9.67; due 9.99. New recurring price 49 + 10 = 59.
    expect(res.body).toMatchObject({ preview: false, credit: 9.67, cost: 19.66, amount_due: 9.99, to: { amount: 59 } });
    expect(res.body.membership).toMatchObject({ id: m.id, plan_id: ids.pro, amount: 59, duration: 30, duration_unit: 'day', addon_products: [{ product_id: ids.backups, quantity: 2 }], scheduled_change: null, credit_balance: 0 });
    expect(res.body.membership.date_expiration).toBe(m.date_expiration);
    expect(res.body.payment).toMatchObject({ membership_id: m.id, customer_id: customerId, status: 'pending', gateway: 'manual', subtotal: 19.66, discount_total: 9.67, total: 9.99, currency: 'USD', invoice_number: null });
    expect(res.body.payment.line_items).toEqual([
      { name: 'Pro', description: expect.stringMatching(/^(9\.\d\d|10) of 30 days left of the period to \d{4}-\d\d-\d\d, prorated; less 9\.67 USD credit for the unused time of the current plan$/), quantity: 1, unit_price: 16.33, product_id: ids.pro },
      { name: 'Backups × 2', description: expect.stringMatching(/days left of the period/), quantity: 1, unit_price: 3.33, product_id: ids.backups },
    ]);
    const stored = await row(m.id);
    expect([stored.plan_id, stored.amount, stored.credit_balance]).toEqual([ids.pro, '59.0000', '0.0000']);
    expect(await paymentsOf(m.id)).toHaveLength(1);
    // No status or period moved: no membership event; the payment has its payment_created.
    expect(await eventsOf(m.id)).toEqual(['membership_activated']);
    expect(await ctx.db('events').where({ object_type: 'payment', object_id: res.body.payment.id }).pluck('slug')).toEqual(['payment_created']);
  });

  test('downgrade now: no payment, the credit left is kept on the membership for the renewal', async () => {
    const m = await membership('pro', { amount: 49 });
    const res = await change(m.id, { plan_id: ids.basic, when: 'now' });
    expect(res.status).toBe(200);
    // 49 × 1/3 = 16.33 credit; 29 × 1/3 = 9.67 cost; 6.66 left; the renewal charges 29 − 6.66 = 22.34.
    expect(res.body).toMatchObject({ credit: 16.33, cost: 9.67, amount_due: 0, credit_left: 6.66, payment: null, next_renewal: { amount: 29, credit_applied: 6.66, amount_due: 22.34 } });
    expect(res.body.membership).toMatchObject({ plan_id: ids.basic, amount: 29, credit_balance: 6.66 });
    expect(await paymentsOf(m.id)).toHaveLength(0);
    expect((await row(m.id)).credit_balance).toBe('6.6600');
    // The renewal takes it (in its own transaction): 29 − 6.66 = 22.34 to charge, nothing left; the next one charges 29.
    expect(await ctx.db.transaction((trx) => takeCredit(trx, m.id, '29'))).toEqual({ credit_used: '6.66', amount_due: '22.34' });
    expect((await row(m.id)).credit_balance).toBe('0.0000');
    expect(await ctx.db.transaction((trx) => takeCredit(trx, m.id, '29'))).toEqual({ credit_used: '0', amount_due: '29' });
  });

  test('30 days → yearly now: a new period starts now, the whole yearly price less the credit is due', async () => {
    const m = await membership('basic', { amount: 29 });
    const before = Date.now();
    const res = await change(m.id, { plan_id: ids.pro, duration: 1, duration_unit: 'year', when: 'now' });
    expect(res.status).toBe(200);
    // 490 − 9.67 = 480.33
    expect(res.body).toMatchObject({ credit: 9.67, cost: 490, amount_due: 480.33, to: { duration: 1, duration_unit: 'year', amount: 490 } });
    expect(res.body.membership).toMatchObject({ plan_id: ids.pro, amount: 490, duration: 1, duration_unit: 'year' });
    const expires = new Date(res.body.membership.date_expiration).getTime();
    expect(expires).toBeGreaterThanOrEqual(before + 365 * DAY - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 366 * DAY);
    expect(res.body.next_renewal.date).toBe(res.body.membership.date_expiration);
    expect(res.body.payment).toMatchObject({ total: 480.33, subtotal: 490, discount_total: 9.67, status: 'pending' });
    expect(res.body.payment.line_items[0].description).toMatch(/^1 year to \d{4}-\d\d-\d\d, a new period; less 9\.67 USD credit/);
    // date_expiration moved later while active: the one rule calls that a renewal.
    expect(await eventsOf(m.id)).toEqual(['membership_activated', 'membership_renewed']);
  });

  test('period_end: scheduled and visible on the membership, replaced by a second one, cancelled by DELETE; nothing else changes', async () => {
    const m = await membership('pro', { amount: 49 });
    const res = await change(m.id, { plan_id: ids.basic, when: 'period_end' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ credit: 0, cost: 0, amount_due: 0, lines: [], effective_at: m.date_expiration, payment: null, next_renewal: { date: m.date_expiration, amount: 29 } });
    const scheduled = { plan_id: ids.basic, duration: 30, duration_unit: 'day', addon_products: [], amount: 29, effective_at: m.date_expiration, requested_at: expect.any(String) };
    expect(res.body.membership).toMatchObject({ plan_id: ids.pro, amount: 49, scheduled_change: scheduled });
    const got = await ctx.http.get(`${BASE}/memberships/${m.id}`).set(auth());
    expect(got.body.scheduled_change).toEqual(scheduled);
    expect((await ctx.http.get(`${BASE}/memberships/${m.id}?_fields=id,scheduled_change`).set(auth())).body).toEqual({ id: m.id, scheduled_change: scheduled });

    const second = await change(m.id, { plan_id: ids.plus, when: 'period_end' });
    expect(second.body.membership.scheduled_change).toMatchObject({ plan_id: ids.plus, amount: 39 });
    expect(await paymentsOf(m.id)).toHaveLength(0);

    // A change applied now replaces the scheduled one.
    const other = await membership('pro', { amount: 49 });
    await change(other.id, { plan_id: ids.basic, when: 'period_end' });
    const now = await change(other.id, { plan_id: ids.plus, when: 'now' });
    expect(now.body.membership).toMatchObject({ plan_id: ids.plus, amount: 39, scheduled_change: null });

    const cancelled = await ctx.http.delete(`${BASE}/memberships/${m.id}/change`).set(auth());
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id: m.id, plan_id: ids.pro, scheduled_change: null });
    expect((await row(m.id)).scheduled_change).toBeNull();
    expect((await ctx.http.delete(`${BASE}/membership/${m.id}/change`).set(auth())).status).toBe(200);
    expect((await ctx.http.delete(`${BASE}/memberships/999999/change`).set(auth())).status).toBe(404);
  });

  test('applyScheduledChange applies the stored change in the caller transaction and clears it; then there is nothing to apply', async () => {
    const memberships = createMembershipService(ctx.db, new MembershipLifecycles(new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX), null));
    const m = await membership('pro', { amount: 49, addon_products: [{ product_id: ids.backups, quantity: 1 }] });
    expect((await change(m.id, { plan_id: ids.basic, duration: 1, duration_unit: 'year', addon_products: [], when: 'period_end' })).status).toBe(200);
    const applied = await ctx.db.transaction((trx) => applyScheduledChange(trx, m.id, memberships));
    expect(applied).toEqual({
      membership_id: m.id,
      from: { plan_id: ids.pro, duration: 30, duration_unit: 'day', addon_products: [{ product_id: ids.backups, quantity: 1 }], amount: '49' },
      to: { plan_id: ids.basic, duration: 1, duration_unit: 'year', addon_products: [], amount: '290' },
    });
    const stored = await row(m.id);
    expect([stored.plan_id, stored.amount, stored.duration, stored.duration_unit, stored.addon_products, stored.scheduled_change]).toEqual([ids.basic, '290.0000', 1, 'year', [], null]);
    // The renewal moves the dates; applying the change does not.
    expect(new Date(stored.date_expiration).toISOString()).toBe(m.date_expiration);
    expect(await ctx.db.transaction((trx) => applyScheduledChange(trx, m.id, memberships))).toBeNull();
    // A rolled-back renewal keeps the change.
    await change(m.id, { plan_id: ids.pro, duration: 1, duration_unit: 'year', when: 'period_end' });
    await expect(
      ctx.db.transaction(async (trx) => {
        await applyScheduledChange(trx, m.id, memberships);
        throw new Error('renewal failed');
      }),
    ).rejects.toThrow('renewal failed');
    expect((await row(m.id)).scheduled_change).toMatchObject({ plan_id: ids.pro, amount: '490' });
  });

  test('400 naming the field, changing nothing', async () => {
    const m = await membership('basic', { amount: 29 });
    const before = await row(m.id);
    const cases: [unknown, string, RegExp][] = [
      [{ plan_id: ids.backups, when: 'now' }, 'plan_id', /is a product of type package, not a plan/],
      [{ plan_id: 999999, when: 'now' }, 'plan_id', /does not match any product/],
      [{ plan_id: ids.retired, when: 'now' }, 'plan_id', /is not active/],
      [{ plan_id: ids.euro, when: 'now' }, 'plan_id', /priced in EUR, not in USD/],
      [{ plan_id: ids.pro, duration_unit: 'week', when: 'now' }, 'duration_unit', /plan pro has no price for 1 week; it is priced for 30 days, 1 year/],
      [{ plan_id: ids.pro, duration: 2, when: 'period_end' }, 'duration', /no price for 2 days/],
      [{ plan_id: ids.pro, addon_products: [{ product_id: ids.plus, quantity: 1 }], when: 'now' }, 'addon_products', /is a plan; add-ons are products of type package or service/],
      [{ plan_id: ids.pro, addon_products: [{ product_id: ids.backups, quantity: 1 }], duration_unit: 'year', when: 'now' }, 'addon_products', /backups .* no price for 1 year/],
      [{ plan_id: ids.pro }, 'when', /./],
      [{ plan_id: ids.pro, when: 'later' }, 'when', /./],
    ];
    for (const [body, field, message] of cases) {
      const res = await change(m.id, body);
      expect([res.status, res.body.code]).toEqual([400, 'wu_rest_invalid_parameter']);
      expect(res.body.data.params[field]).toMatch(message);
    }
    expect(await row(m.id)).toEqual(before);
    expect(await paymentsOf(m.id)).toHaveLength(0);
  });

  test('409 naming the status for a membership that is not active or trialing; 404 for an unknown one', async () => {
    for (const status of ['pending', 'cancelled', 'expired', 'on-hold']) {
      const m = await membership('basic', { amount: 29, status });
      const res = await change(m.id, { plan_id: ids.pro, when: 'now' });
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'wu_rest_membership_not_changeable', data: { status: 409, membership_status: status } });
      expect(res.body.message).toContain(status);
    }
    const open = await membership('basic', { amount: 29, date_expiration: null });
    expect((await change(open.id, { plan_id: ids.pro, when: 'now', preview: true })).body).toMatchObject({ code: 'wu_rest_membership_no_period', data: { status: 409 } });
    expect((await change(999999, { plan_id: ids.pro, when: 'now' })).body.code).toBe('wu_rest_membership_invalid_id');
    expect((await change('abc', { plan_id: ids.pro, when: 'now' })).body.code).toBe('rest_no_route');
  });

  test('a trialing membership changes now without paying: its new price starts when the trial ends', async () => {
    const end = new Date(Date.now() + 10 * DAY).toISOString();
    const m = await membership('basic', { amount: 29, status: 'trialing', date_trial_end: end, date_expiration: null, date_renewed: null });
    const res = await change(m.id, { plan_id: ids.pro, when: 'now' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ credit: 0, cost: 0, amount_due: 0, lines: [], payment: null, next_renewal: { date: end, amount: 49 }, membership: { plan_id: ids.pro, amount: 49, status: 'trialing', date_expiration: null } });
  });

  test('hostile bodies: 400 with a JSON error, nothing changed', async () => {
    const m = await membership('basic', { amount: 29 });
    const before = await row(m.id);
    const bodies: unknown[] = [
      [1, 2],
      { plan_id: '1; DROP TABLE memberships', when: 'now' },
      { plan_id: ids.pro, when: 'now', preview: 'yes' },
      { plan_id: ids.pro, when: 'nöw' },
      { plan_id: ids.pro, when: { $ne: 'x' } },
      { plan_id: 1e300, when: 'now' },
      { plan_id: ids.pro, when: 'now', amount: 0 },
      { plan_id: ids.pro, when: 'now', duration: -1 },
      { plan_id: ids.pro, when: 'now', addon_products: Array.from({ length: 101 }, (_, i) => ({ product_id: i + 1, quantity: 1 })) },
      { plan_id: ids.pro, when: 'now', addon_products: [{ product_id: ids.backups, quantity: 1 }, { product_id: ids.backups, quantity: 2 }] },
      { plan_id: ids.pro, when: 'now', addon_products: [{ product_id: ids.backups, quantity: 1, nested: { a: { b: { c: [] } } } }] },
      { plan_id: ids.pro, when: 'x'.repeat(100_000) },
    ];
    for (const body of bodies) {
      const res = await change(m.id, body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: expect.any(String), message: expect.any(String), data: { status: 400 } });
    }
    const raw = await ctx.http.post(`${BASE}/memberships/${m.id}/change`).set(auth()).set('Content-Type', 'application/json').send('{"plan_id": 1, "when":');
    expect([raw.status, raw.body.code]).toEqual([400, 'rest_invalid_json']);
    expect(await row(m.id)).toEqual(before);
  });

  test('a caller without credentials, or with wrong ones, is refused and changes nothing', async () => {
    const m = await membership('basic', { amount: 29 });
    const before = await row(m.id);
    const none = await ctx.http.post(`${BASE}/memberships/${m.id}/change`).send({ plan_id: ids.pro, when: 'now' });
    expect([none.status, none.body.code]).toEqual([401, 'rest_forbidden']);
    const wrong = await ctx.http
      .post(`${BASE}/memberships/${m.id}/change`)
      .set('Authorization', `Basic ${Buffer.from(`${API_KEY}:not-the-secret`).toString('base64')}`)
      .send({ plan_id: ids.pro, when: 'now' });
    expect([wrong.status, wrong.body.code]).toEqual([401, 'rest_forbidden']);
    expect((await ctx.http.delete(`${BASE}/memberships/${m.id}/change`)).status).toBe(401);
    expect(await row(m.id)).toEqual(before);
  });

  test('two concurrent changes serialize on the row lock: the second starts from the first one result', async () => {
    const m = await membership('basic', { amount: 29 });
    const [a, b] = await Promise.all([change(m.id, { plan_id: ids.pro, when: 'now' }), change(m.id, { plan_id: ids.plus, when: 'now' })]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const [first, second] = a.body.from.plan_id === ids.basic ? [a.body, b.body] : [b.body, a.body];
    expect(first.from.plan_id).toBe(ids.basic);
    expect(second.from).toMatchObject({ plan_id: first.to.plan_id, amount: first.to.amount });
    const stored = await row(m.id);
    expect(Number(stored.plan_id)).toBe(second.to.plan_id);
    expect(new Decimal(stored.amount).toNumber()).toBe(second.to.amount);
    // Each change's money is recorded once: the payments are exactly what each answer said was due.
    const due = [first, second].filter((c) => c.amount_due > 0).map((c) => c.amount_due);
    expect((await paymentsOf(m.id)).map((p) => Number(p.total))).toEqual(due);
    expect(new Decimal(stored.credit_balance).toNumber()).toBe(new Decimal(first.credit_left).plus(second.credit_left).toNumber());
  });

  test('a change waits for a renewal holding the row, and prorates the period the renewal wrote', async () => {
    const m = await membership('basic', { amount: 29 });
    const renewed = new Date(m.date_expiration);
    const nextEnd = new Date(renewed.getTime() + 30 * DAY);
    let answer: Promise<{ status: number; body: any }> | undefined;
    await ctx.db.transaction(async (trx) => {
      await trx('memberships').where({ id: m.id }).forUpdate().first();
      answer = change(m.id, { plan_id: ids.pro, when: 'now', preview: false }).then((r) => r);
      await new Promise((r) => setTimeout(r, 300));
      await trx('memberships').where({ id: m.id }).update({ date_renewed: renewed, date_expiration: nextEnd });
    });
    const res = await answer!;
    expect(res.status).toBe(200);
    expect(res.body.period).toMatchObject({ start: renewed.toISOString(), end: nextEnd.toISOString(), seconds: 2_592_000 });
    // Nearly 40 days left of 30 is capped at the whole period: credit 29, cost 49, due 20.
    expect(res.body).toMatchObject({ credit: 29, cost: 49, amount_due: 20 });
  });

  test('Idempotency-Key: a retried change is answered again, not applied twice', async () => {
    const m = await membership('basic', { amount: 29 });
    const key = `change-${m.id}`;
    const first = await ctx.http.post(`${BASE}/memberships/${m.id}/change`).set(auth()).set('Idempotency-Key', key).send({ plan_id: ids.pro, when: 'now' });
    expect(first.status).toBe(200);
    const again = await ctx.http.post(`${BASE}/memberships/${m.id}/change`).set(auth()).set('Idempotency-Key', key).send({ plan_id: ids.pro, when: 'now' });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await paymentsOf(m.id)).toHaveLength(1);
    const other = await ctx.http.post(`${BASE}/memberships/${m.id}/change`).set(auth()).set('Idempotency-Key', key).send({ plan_id: ids.plus, when: 'now' });
    expect([other.status, other.body.code]).toEqual([409, 'wu_rest_idempotency_key_reused']);
  });
});
