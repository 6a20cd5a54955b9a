import * as refundsMigration from '../migrations/20261203000030_payment_refunds';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

describe('payment refunds (POST /payments/{id}/refunds)', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  let customerId: number;
  let planId: number;

  const payment = async (extra: Record<string, unknown> = {}) => {
    const res = await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, status: 'completed', subtotal: 44, currency: 'USD', ...extra });
    expect(res.status).toBe(200);
    return res.body as { id: number; total: number; status: string; refund_total: number; membership_id: number | null; invoice_number: number };
  };
  const membership = async () => {
    const res = await ctx.http.post(`${BASE}/memberships`).set(auth()).send({ customer_id: customerId, plan_id: planId, status: 'active', auto_renew: true });
    expect(res.status).toBe(200);
    return res.body.id as number;
  };
  const refund = (id: number, body: unknown, path = 'payments') => ctx.http.post(`${BASE}/${path}/${id}/refunds`).set(auth()).send(body as object);
  const row = async (id: number) => ctx.db('payments').where({ id }).first('refund_total', 'status');
  const refundRows = async (id: number) => ctx.db('payment_refunds').where({ payment_id: id }).orderBy('id');

  beforeAll(async () => {
    ctx = await createTestContext();
    customerId = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body.id;
    planId = (await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: 'refund-plan', name: 'Refund plan', amount: 44, type: 'plan' })).body.id;
  });
  afterAll(() => ctx.close());

  test('a partial refund, then the rest: partially-refunded, then refunded; refund_total is their sum; the list shows both', async () => {
    const p = await payment();
    const first = await refund(p.id, { amount: '10.50', reason: 'Late delivery', gateway_refund_id: 're_1' });
    expect(first.status).toBe(201);
    expect(first.body.refund).toEqual({ id: expect.any(Number), payment_id: p.id, amount: 10.5, reason: 'Late delivery', gateway_refund_id: 're_1', membership_cancelled: false, date_created: expect.any(String) });
    expect(first.body.payment).toMatchObject({ id: p.id, status: 'partially-refunded', refund_total: 10.5, total: 44, invoice_number: p.invoice_number });
    const second = await refund(p.id, { amount: 33.5 }, 'payment');
    expect(second.status).toBe(201);
    expect(second.body.payment).toMatchObject({ status: 'refunded', refund_total: 44 });
    expect(await row(p.id)).toEqual({ refund_total: '44.0000', status: 'refunded' });
    const list = await ctx.http.get(`${BASE}/payments/${p.id}/refunds`).set(auth());
    expect(list.status).toBe(200);
    expect(list.body.map((r: { amount: number; reason: string }) => [r.amount, r.reason])).toEqual([
      [10.5, 'Late delivery'],
      [33.5, ''],
    ]);
    // Nothing is left: one cent more is refused, and a refunded payment takes no refund at all.
    const more = await refund(p.id, { amount: 0.01 });
    expect(more.status).toBe(409);
    expect(more.body).toMatchObject({ code: 'wu_rest_payment_not_refundable', data: { status: 409, payment_status: expect.any(String) } });
    expect(await refundRows(p.id)).toHaveLength(2);
  });

  test('more than what is left is a 400 naming amount, and changes nothing', async () => {
    const p = await payment();
    const res = await refund(p.id, { amount: 100 });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(res.body.data.params.amount).toBe('100 is more than what is left to refund: 44.00 of 44.00 USD.');
    await refund(p.id, { amount: 40 });
    const rest = await refund(p.id, { amount: '4.01' });
    expect(rest.status).toBe(400);
    expect(rest.body.data.params.amount).toBe('4.01 is more than what is left to refund: 4.00 of 44.00 USD.');
    expect(await row(p.id)).toEqual({ refund_total: '40.0000', status: 'partially-refunded' });
  });

  test("amounts follow the currency's minor unit: USD 2 decimals, JPY none, KWD 3", async () => {
    const usd = await payment();
    const bad = await refund(usd.id, { amount: '1.005' });
    expect(bad.status).toBe(400);
    expect(bad.body.data.params.amount).toBe('must have at most 2 decimal places in USD.');
    const jpy = await payment({ currency: 'JPY', subtotal: 5000 });
    expect((await refund(jpy.id, { amount: '0.5' })).body.data.params.amount).toBe('must have at most 0 decimal places in JPY.');
    expect((await refund(jpy.id, { amount: 1200 })).body.payment).toMatchObject({ refund_total: 1200, status: 'partially-refunded' });
    const kwd = await payment({ currency: 'KWD', subtotal: '10.5' });
    expect((await refund(kwd.id, { amount: '0.125' })).status).toBe(201);
    expect((await refund(kwd.id, { amount: '0.0001' })).body.data.params.amount).toBe('must have at most 3 decimal places in KWD.');
    expect(await refundRows(usd.id)).toHaveLength(0);
  });

  test('concurrent refunds never refund more than the total', async () => {
    const p = await payment({ subtotal: 10 });
    const results = await Promise.all(Array.from({ length: 8 }, () => refund(p.id, { amount: 3 })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(3);
    expect(results.filter((r) => r.status === 400)).toHaveLength(5);
    expect(await row(p.id)).toEqual({ refund_total: '9.0000', status: 'partially-refunded' });
    const sum = await ctx.db('payment_refunds').where({ payment_id: p.id }).sum({ s: 'amount' }).first();
    expect(sum?.s).toBe('9.0000');
  });

  test('cancel_membership_on_refund cancels the payment\'s membership with the refund; without it the membership stays', async () => {
    const kept = await membership();
    const p1 = await payment({ membership_id: kept });
    expect((await refund(p1.id, { amount: 1 })).body.refund.membership_cancelled).toBe(false);
    expect(await ctx.db('memberships').where({ id: kept }).first('status', 'auto_renew')).toEqual({ status: 'active', auto_renew: true });

    const cancelled = await membership();
    const p2 = await payment({ membership_id: cancelled });
    const res = await refund(p2.id, { amount: 44, reason: 'Cancelled by the customer', cancel_membership_on_refund: true });
    expect(res.status).toBe(201);
    expect(res.body.refund.membership_cancelled).toBe(true);
    const m = await ctx.db('memberships').where({ id: cancelled }).first('status', 'auto_renew', 'date_cancellation');
    expect(m).toMatchObject({ status: 'cancelled', auto_renew: false });
    expect(m.date_cancellation).toBeInstanceOf(Date);
  });

  test('the same gateway_refund_id twice on a payment is a 400 naming it, and is not counted twice', async () => {
    const p = await payment();
    expect((await refund(p.id, { amount: 5, gateway_refund_id: 're_dup' })).status).toBe(201);
    const again = await refund(p.id, { amount: 5, gateway_refund_id: 're_dup' });
    expect(again.status).toBe(400);
    expect(again.body.data.params.gateway_refund_id).toBe('gateway_refund_id re_dup is already recorded for a refund of payment ' + p.id + '.');
    expect(await row(p.id)).toEqual({ refund_total: '5.0000', status: 'partially-refunded' });
    // Another payment may carry a refund of the same gateway id (ids are the gateway's, per payment).
    const other = await payment();
    expect((await refund(other.id, { amount: 5, gateway_refund_id: 're_dup' })).status).toBe(201);
  });

  test('refund_total is read-only on the payment: repeating it is fine, changing it is a 400', async () => {
    const p = await payment();
    await refund(p.id, { amount: 4 });
    const same = await ctx.http.patch(`${BASE}/payments/${p.id}`).set(auth()).send({ refund_total: '4.00', gateway: 'manual' });
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ refund_total: 4, gateway: 'manual' });
    const changed = await ctx.http.patch(`${BASE}/payments/${p.id}`).set(auth()).send({ refund_total: 100 });
    expect(changed.status).toBe(400);
    expect(changed.body.data.params.refund_total).toContain('POST /payments/{id}/refunds');
    const created = await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, subtotal: 10, refund_total: 3 });
    expect(created.status).toBe(400);
    expect(created.body.data.params.refund_total).toBeDefined();
    expect(await row(p.id)).toEqual({ refund_total: '4.0000', status: 'partially-refunded' });
  });

  test.each(['pending', 'failed', 'draft', 'cancelled'])('a %s payment cannot be refunded (409), nothing recorded', async (status) => {
    const p = await payment({ status });
    const res = await refund(p.id, { amount: 1 });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'wu_rest_payment_not_refundable', data: { status: 409, payment_status: expect.any(String) } });
    expect(res.body.message).toContain(status);
    expect(await refundRows(p.id)).toHaveLength(0);
  });

  test.each([
    [{}, 'amount'],
    [{ amount: 0 }, 'amount'],
    [{ amount: -5 }, 'amount'],
    [{ amount: 'ten' }, 'amount'],
    [{ amount: 1e300 }, 'amount'],
    [{ amount: [1] }, 'amount'],
    [{ amount: { $gt: 0 } }, 'amount'],
    [{ amount: 1, reason: 'x'.repeat(1001) }, 'reason'],
    [{ amount: 1, reason: 7 }, 'reason'],
    [{ amount: 1, gateway_refund_id: '' }, 'gateway_refund_id'],
    [{ amount: 1, gateway_refund_id: 'r'.repeat(256) }, 'gateway_refund_id'],
    [{ amount: 1, cancel_membership_on_refund: 'yes' }, 'cancel_membership_on_refund'],
    [{ amount: 1, refund_total: 1 }, 'refund_total'],
  ])('bad body %j is a 400 naming %s, and changes nothing', async (body, name) => {
    const p = await payment();
    const res = await refund(p.id, body);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(Object.keys(res.body.data.params)).toContain(name);
    expect(await row(p.id)).toEqual({ refund_total: '0.0000', status: 'completed' });
  });

  test('hostile bodies: deeply nested, huge, unicode, not JSON object', async () => {
    const p = await payment();
    const nested = `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`;
    const deep = await ctx.http.post(`${BASE}/payments/${p.id}/refunds`).set(auth()).set('Content-Type', 'application/json').send(`{"amount":1,"reason":${nested}}`);
    expect(deep.status).toBe(400);
    const huge = await refund(p.id, { amount: 1, reason: 'é'.repeat(3_000_000) });
    expect(huge.status).toBe(413);
    const array = await refund(p.id, [{ amount: 1 }]);
    expect(array.status).toBe(400);
    const unicode = await refund(p.id, { amount: 1, reason: 'Remboursé 🎉 — 返金' });
    expect(unicode.status).toBe(201);
    expect(unicode.body.refund.reason).toBe('Remboursé 🎉 — 返金');
    expect(await row(p.id)).toEqual({ refund_total: '1.0000', status: 'partially-refunded' });
  });

  test('unknown and malformed payment ids, and callers that are not allowed', async () => {
    expect((await refund(999999, { amount: 1 })).body.code).toBe('wu_rest_payment_invalid_id');
    expect((await ctx.http.get(`${BASE}/payments/999999/refunds`).set(auth())).status).toBe(404);
    expect((await ctx.http.post(`${BASE}/payments/abc/refunds`).set(auth()).send({ amount: 1 })).status).toBe(404);
    const p = await payment();
    const anonymous = await ctx.http.post(`${BASE}/payments/${p.id}/refunds`).send({ amount: 1 });
    expect(anonymous.status).toBe(401);
    const wrong = await ctx.http.post(`${BASE}/payments/${p.id}/refunds`).set({ Authorization: `Basic ${Buffer.from('nope:nope').toString('base64')}` }).send({ amount: 1 });
    expect(wrong.status).toBe(401);
    expect((await ctx.http.get(`${BASE}/payments/${p.id}/refunds`)).status).toBe(401);
    expect(await refundRows(p.id)).toHaveLength(0);
  });

  test('a deleted payment takes its refunds with it', async () => {
    const p = await payment();
    await refund(p.id, { amount: 2 });
    expect((await ctx.http.delete(`${BASE}/payments/${p.id}`).set(auth())).status).toBe(200);
    expect(await refundRows(p.id)).toHaveLength(0);
  });

  // Last: it takes the table down and up again.
  test('the migration turns a refund_total set before refunds were records into one refund, so the sum holds', async () => {
    const p = await payment();
    await refundsMigration.down(ctx.db);
    await ctx.db('payments').where({ id: p.id }).update({ refund_total: '12.3400', status: 'partially-refunded' });
    await refundsMigration.up(ctx.db);
    const rows = await refundRows(p.id);
    expect(rows).toEqual([expect.objectContaining({ amount: '12.3400', reason: expect.stringContaining('before refunds were records'), gateway_refund_id: null })]);
    const rest = await refund(p.id, { amount: '31.66' });
    expect(rest.body.payment).toMatchObject({ refund_total: 44, status: 'refunded' });
  });
});
