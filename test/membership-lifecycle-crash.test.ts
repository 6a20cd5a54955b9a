/**
 * A worker killed (SIGKILL) while a renewal is being charged, on the dev server in real time: the
 * gateway took the money but the worker never recorded it. Another worker picks the charge up
 * once its activity times out (BILLING_HTTP_GATEWAY_TIMEOUT_MS and a margin), asks the gateway
 * again under the same idempotency key, gets the same charge back, and completes the payment:
 * charged once, billed once.
 */
import type { ChildProcess } from 'node:child_process';
import { addPeriod } from '../src/products/pricing';
import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';
import { startFakeGateway, type FakeGateway } from './payment-gateway-server';
import { killWorkerProcess, spawnWorkerProcess, until } from './worker-process';

jest.setTimeout(120_000);

describe('a renewal survives a worker killed mid-charge', () => {
  let ctx: TestContext;
  let gateway: FakeGateway;
  let child: ChildProcess | undefined;
  const env = () => ({ BILLING_HTTP_GATEWAY_URL: gateway.url, BILLING_HTTP_GATEWAY_TIMEOUT_MS: '2000' });

  beforeAll(async () => {
    gateway = await startFakeGateway();
    ctx = await createTestContext(env());
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await ctx?.close();
    await gateway?.close();
  });

  const send = async (method: 'post' | 'patch', url: string, body: object) => {
    const res = await ctx.http[method](`${BASE}${url}`).set('Authorization', ctx.basic).send(body);
    if (res.status !== 200) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };

  test('killed after the gateway was asked: the retried charge gets the same answer; one charge, one renewal, times_billed 1', async () => {
    child = await spawnWorkerProcess(ctx, env());
    const plan = await send('post', '/products', { slug: 'crash-monthly', name: 'Monthly', type: 'plan', amount: 10, duration: 1, duration_unit: 'month', recurring: true });
    const customer = await send('post', '/customers', newCustomerBody());
    // The gateway answers after 1.5 s: the worker is killed while it waits.
    gateway.behave(customer.id, { delayMs: 1500 });
    const due = new Date(Date.now() + 1500);
    const m = await send('post', '/memberships', {
      customer_id: customer.id,
      plan_id: plan.id,
      status: 'active',
      amount: 10,
      recurring: true,
      auto_renew: true,
      duration: 1,
      duration_unit: 'month',
      gateway: 'http',
      date_expiration: due.toISOString(),
    });
    const inFlight = async () => (await ctx.db('payments').where({ membership_id: m.id }).first('id')) !== undefined && gateway.pending() > 0;
    await until(inFlight, 30_000);
    await killWorkerProcess(child);
    // The gateway finished the charge for a worker that is gone.
    await until(async () => gateway.pending() === 0, 10_000);
    const [payment] = await ctx.db('payments').where({ membership_id: m.id });
    expect(payment.status).toBe('pending');
    expect(gateway.charged()).toEqual([`renewal-${payment.id}-0`]);

    child = await spawnWorkerProcess(ctx, env());
    await until(async () => (await ctx.db('payments').where({ id: payment.id }).first('status')).status === 'completed', 60_000);
    const after = await ctx.db('memberships').where({ id: m.id }).first();
    expect(after.times_billed).toBe(1);
    expect(new Date(after.date_expiration).toISOString()).toBe(addPeriod(due, 1, 'month').toISOString());
    // Asked twice under one key, charged once; one renewal payment, completed once.
    const asked = gateway.seen.filter((s) => s.paymentId === Number(payment.id));
    expect(asked.map((s) => [s.key, s.answer])).toEqual([
      [`renewal-${payment.id}-0`, 'succeeded'],
      [`renewal-${payment.id}-0`, 'succeeded'],
    ]);
    expect(gateway.charged()).toEqual([`renewal-${payment.id}-0`]);
    expect(Number((await ctx.db('payments').where({ membership_id: m.id }).count({ n: '*' }))[0].n)).toBe(1);
    expect(Number((await ctx.db('events').where({ slug: 'payment_completed', object_id: payment.id }).count({ n: '*' }))[0].n)).toBe(1);
  });
});
