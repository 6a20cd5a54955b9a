import crypto from 'node:crypto';
import request from 'supertest';
import { createApp } from '../src/app';
import { createDb } from '../src/db/knex';
import type { RunningWorker } from '../src/temporal/worker';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';

/** Issue 21, at checkout: /register takes a discount code, prices it, records it and counts its use exactly once. */
describe('/register with a discount code', () => {
  let ctx: TestContext;
  let worker: RunningWorker;
  const auth = () => ({ Authorization: ctx.basic });
  const TABLES = ['users', 'customers', 'memberships', 'payments', 'sites'] as const;
  const counts = async () => Object.fromEntries(await Promise.all(TABLES.map(async (t) => [t, Number((await ctx.db(t).count({ n: '*' }))[0].n)] as const)));
  const tag = () => crypto.randomBytes(4).toString('hex');
  const register = (products: (string | number)[], extra: Record<string, unknown> = {}) => {
    const t = tag();
    return ctx.http
      .post(`${BASE}/register`)
      .set(auth())
      .send({ customer: { username: `dc${t}`, password: 'secret123', email: `dc${t}@example.com` }, products, payment: { status: 'completed' }, membership: { status: 'active' }, ...extra });
  };
  const code = async (body: Record<string, unknown>) => {
    const res = await ctx.http.post(`${BASE}/discount-codes`).set(auth()).send({ name: String(body.code), ...body });
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    return res.body as { id: number; code: string };
  };
  const uses = async (c: string) => Number((await ctx.db('discount_codes').whereRaw('lower(code) = lower(?)', [c]).first('uses')).uses);
  const lines = (payment: { line_items: { name: string; unit_price: number; description: string }[] }) => payment.line_items.map((l) => [l.name, l.unit_price, l.description]);
  const ids: Record<string, number> = {};

  beforeAll(async () => {
    ctx = await createTestContext({ REGISTER_WAIT_SECONDS: '30' });
    worker = await startTestWorker(ctx);
    const post = async (body: Record<string, unknown>) => {
      const res = await ctx.http.post(`${BASE}/products`).set(auth()).send(body);
      if (res.status !== 200) throw new Error(JSON.stringify(res.body));
      ids[body.slug as string] = res.body.id;
    };
    await post({ slug: 'dc-plan', name: 'Pro', type: 'plan', amount: '19.99', setup_fee: 10, duration: 1, duration_unit: 'month' });
    await post({ slug: 'dc-bare', name: 'Bare', type: 'plan', amount: '19.99', duration: 1, duration_unit: 'month' });
    await post({ slug: 'dc-addon', name: 'Backups', type: 'service', amount: 5, duration: 1, duration_unit: 'month' });
    await post({ slug: 'dc-cheap', name: 'Logs', type: 'service', amount: 3, duration: 1, duration_unit: 'month' });
    await post({ slug: 'dc-yen', name: 'Yen plan', type: 'plan', currency: 'JPY', amount: 1999, setup_fee: 555, duration: 1, duration_unit: 'month' });
    await post({ slug: 'dc-yen-addon', name: 'Yen add-on', type: 'service', currency: 'JPY', amount: 333, duration: 1, duration_unit: 'month' });
    await code({ code: 'PCT15', value: 15, setup_fee_value: 50 });
    await code({ code: 'Abs5', type: 'absolute', value: 5, setup_fee_type: 'absolute', setup_fee_value: '2.5' });
    await code({ code: 'RENEW10', value: 10, apply_to_renewals: true });
  });
  afterAll(async () => {
    await worker.shutdown();
    await ctx.close();
  });

  test('percentage, any case, with setup fees: each line rounded to the cent; the payment and membership record the code', async () => {
    const res = await register(['dc-plan', 'dc-addon'], { discount_code: 'pct15' });
    expect(res.status).toBe(200);
    // 15% of 19.99 = 2.9985 -> 3.00; of 5 -> 0.75; 50% of the 10 setup fee -> 5.
    expect(lines(res.body.payment)).toEqual([
      ['Pro', 19.99, '1 month; discount PCT15: -3'],
      ['Pro setup fee', 10, 'one-time setup fee; discount PCT15: -5'],
      ['Backups', 5, '1 month; discount PCT15: -0.75'],
    ]);
    expect(res.body.payment).toMatchObject({ subtotal: 34.99, discount_total: 8.75, total: 26.24, discount_code: 'PCT15' });
    // Not for renewals: the membership renews at the full price.
    expect(res.body.membership).toMatchObject({ discount_code: 'PCT15', initial_amount: 26.24, amount: 24.99 });
    const row = await ctx.db('payments').where({ id: res.body.payment.id }).first('discount_total', 'total');
    expect(row).toEqual({ discount_total: '8.7500', total: '26.2400' });
    expect(await uses('PCT15')).toBe(1);
  });

  test('percentage without setup fees', async () => {
    const res = await register(['dc-bare'], { discount_code: 'PCT15' });
    expect(res.status).toBe(200);
    expect(lines(res.body.payment)).toEqual([['Bare', 19.99, '1 month; discount PCT15: -3']]);
    expect(res.body.payment).toMatchObject({ subtotal: 19.99, discount_total: 3, total: 16.99 });
  });

  test('absolute: its value off each line and its setup fee value off each setup fee, never below zero', async () => {
    const res = await register(['dc-plan', 'dc-cheap'], { discount_code: 'ABS5' });
    expect(res.status).toBe(200);
    expect(lines(res.body.payment)).toEqual([
      ['Pro', 19.99, '1 month; discount Abs5: -5'],
      ['Pro setup fee', 10, 'one-time setup fee; discount Abs5: -2.5'],
      // 5 off a 3 line: 3, not 5.
      ['Logs', 3, '1 month; discount Abs5: -3'],
    ]);
    expect(res.body.payment).toMatchObject({ subtotal: 32.99, discount_total: 10.5, total: 22.49, discount_code: 'Abs5' });
    const bare = await register(['dc-bare'], { discount_code: 'abs5' });
    expect(bare.body.payment).toMatchObject({ subtotal: 19.99, discount_total: 5, total: 14.99 });
  });

  test('JPY: rounded per line to whole yen (half up), with and without setup fees', async () => {
    const res = await register(['dc-yen', 'dc-yen-addon'], { discount_code: 'PCT15' });
    expect(res.status).toBe(200);
    // 15% of 1999 = 299.85 -> 300; 50% of 555 = 277.5 -> 278; 15% of 333 = 49.95 -> 50.
    expect(lines(res.body.payment)).toEqual([
      ['Yen plan', 1999, '1 month; discount PCT15: -300'],
      ['Yen plan setup fee', 555, 'one-time setup fee; discount PCT15: -278'],
      ['Yen add-on', 333, '1 month; discount PCT15: -50'],
    ]);
    expect(res.body.payment).toMatchObject({ currency: 'JPY', subtotal: 2887, discount_total: 628, total: 2259 });
    // An absolute 2.5 off a yen setup fee rounds to 3.
    const abs = await register(['dc-yen'], { discount_code: 'ABS5' });
    expect(abs.body.payment).toMatchObject({ subtotal: 2554, discount_total: 8, total: 2546 });
  });

  test('apply_to_renewals: the membership amount (what a renewal charges) keeps the discount', async () => {
    const res = await register(['dc-plan', 'dc-addon'], { discount_code: 'renew10' });
    expect(res.status).toBe(200);
    // 10% of 19.99 = 1.999 -> 2.00; of 5 -> 0.50; no setup fee discount (setup_fee_value 0).
    expect(res.body.payment).toMatchObject({ subtotal: 34.99, discount_total: 2.5, total: 32.49 });
    expect(res.body.membership).toMatchObject({ discount_code: 'RENEW10', amount: 22.49, initial_amount: 32.49 });
  });

  test('allowed_products: only the lines of those products are discounted; none of them in the cart is a 400', async () => {
    await code({ code: 'ADDON-ONLY', value: 50, limit_products: true, allowed_products: [ids['dc-addon']] });
    const res = await register(['dc-bare', 'dc-addon'], { discount_code: 'addon-only' });
    expect(res.status).toBe(200);
    expect(lines(res.body.payment)).toEqual([
      ['Bare', 19.99, '1 month'],
      ['Backups', 5, '1 month; discount ADDON-ONLY: -2.5'],
    ]);
    const bad = await register(['dc-bare'], { discount_code: 'ADDON-ONLY' });
    expect(bad.status).toBe(400);
    expect(bad.body.data.params).toEqual({ discount_code: `discount_code ADDON-ONLY does not apply to the products (it applies to products ${ids['dc-addon']}).` });
  });

  test('without a code, or an empty one: no discount, the fields say none', async () => {
    const res = await register(['dc-bare'], { discount_code: '' });
    expect(res.status).toBe(200);
    expect(res.body.payment).toMatchObject({ discount_total: 0, discount_code: null, total: 19.99 });
    expect(res.body.membership.discount_code).toBeNull();
  });

  test('unknown, inactive, expired, not yet valid, used up: a 400 naming discount_code that says which; nothing is created, no use counted', async () => {
    const hour = 3600_000;
    await code({ code: 'OFF', value: 10, active: false });
    await code({ code: 'OLD', value: 10, date_start: new Date(Date.now() - 2 * hour).toISOString(), date_expiration: new Date(Date.now() - hour).toISOString() });
    await code({ code: 'SOON', value: 10, date_start: new Date(Date.now() + hour).toISOString() });
    await code({ code: 'GONE', value: 10, max_uses: 2, uses: 2 });
    const cases: [string, RegExp][] = [
      ['NOPE', /^discount_code NOPE does not match any discount code\.$/],
      ['off', /^discount_code OFF is not active\.$/],
      ['OLD', /^discount_code OLD has expired: it ended /],
      ['soon', /^discount_code SOON is not valid yet: it starts /],
      ['GONE', /^discount_code GONE is used up \(2 of 2 uses\)\.$/],
    ];
    const before = await counts();
    const registrations = Number((await ctx.db('registrations').count({ n: '*' }))[0].n);
    for (const [asked, says] of cases) {
      const res = await register(['dc-bare'], { discount_code: asked });
      expect({ asked, status: res.status, code: res.body.code, keys: Object.keys(res.body.data.params) }).toEqual({ asked, status: 400, code: 'wu_rest_invalid_parameter', keys: ['discount_code'] });
      expect(res.body.data.params.discount_code).toMatch(says);
    }
    expect(await counts()).toEqual(before);
    // Refused before anything starts: no registration row either.
    expect(Number((await ctx.db('registrations').count({ n: '*' }))[0].n)).toBe(registrations);
    expect(await uses('GONE')).toBe(2);
  });

  test('the last use raced by 20 concurrent registrations: exactly one succeeds, the others are 400 used up; uses ends at max_uses', async () => {
    const last = await code({ code: 'LAST1', value: 20, max_uses: 5, uses: 4 });
    const before = await counts();
    // The code's row is held until all 20 have passed the request's check (their rows are
    // claimed), so every one of them races for the use in its records transaction. The API
    // gets a pool for 20 transactions waiting at once (the tests' pool has 5).
    const db = createDb(ctx.dbUrl, 30);
    const app = createApp({ config: ctx.config, db, settings: ctx.settings, temporal: ctx.temporal, metrics: ctx.metrics });
    const holder = await ctx.db.transaction();
    let answers;
    try {
      await holder('discount_codes').where({ id: last.id }).forUpdate().first('id');
      const pending = Promise.all(
        Array.from({ length: 20 }, () => {
          const t = tag();
          return request(app)
            .post(`${BASE}/register`)
            .set(auth())
            .send({ customer: { username: `dc${t}`, password: 'secret123', email: `dc${t}@example.com` }, products: ['dc-bare'], payment: { status: 'completed' }, discount_code: 'LAST1' });
        }),
      );
      const claimed = async () => Number((await ctx.db('registrations').whereRaw("request->'discount'->>'code' = 'LAST1'").count({ n: '*' }))[0].n);
      const deadline = Date.now() + 60_000;
      while ((await claimed()) < 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      expect(await claimed()).toBe(20);
      await holder.commit();
      answers = await pending;
    } finally {
      if (!holder.isCompleted()) await holder.rollback();
      await db.destroy();
    }
    const ok = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status !== 200);
    expect(ok).toHaveLength(1);
    expect(refused.map((r) => [r.status, r.body.code, r.body.data?.params])).toEqual(
      Array.from({ length: 19 }, () => [400, 'wu_rest_invalid_parameter', { discount_code: 'discount_code LAST1 is used up (5 of 5 uses).' }]),
    );
    expect(ok[0].body.payment).toMatchObject({ discount_code: 'LAST1', discount_total: 4, total: 15.99 });
    // Decided by the guarded UPDATE in the transaction: 19 registrations refused there.
    const rows = await ctx.db('registrations').whereRaw("request->'discount'->>'code' = 'LAST1'").select('status', 'error');
    expect(rows.filter((r) => r.status === 'completed')).toHaveLength(1);
    expect(rows.filter((r) => r.status === 'failed' && r.error.data.params.discount_code === 'discount_code LAST1 is used up (5 of 5 uses).')).toHaveLength(19);
    expect(await uses('LAST1')).toBe(5);
    expect(Number((await ctx.db('payments').where({ discount_code: 'LAST1' }).count({ n: '*' }))[0].n)).toBe(1);
    // Only the winner's records exist.
    expect(await counts()).toEqual(Object.fromEntries(TABLES.map((t) => [t, before[t] + (t === 'sites' ? 0 : 1)])));
  }, 120_000);

  test('a failure injected after the payment step gives the use back; the registration is refused and nothing is kept', async () => {
    await code({ code: 'FAILBACK', value: 10, max_uses: 1 });
    // The step after the payment: the registration's row marked completed.
    await ctx.db.raw("CREATE OR REPLACE FUNCTION dc_fail() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected failure after the payment'; END $$ LANGUAGE plpgsql");
    await ctx.db.raw("CREATE TRIGGER dc_fail BEFORE UPDATE ON registrations FOR EACH ROW WHEN (NEW.status = 'completed') EXECUTE FUNCTION dc_fail()");
    const before = await counts();
    try {
      const res = await register(['dc-bare'], { discount_code: 'FAILBACK' });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'wu_rest_registration_failed', message: expect.stringContaining('injected failure after the payment'), data: { status: 400, sqlstate: 'P0001' } });
      expect(await counts()).toEqual(before);
      expect(await uses('FAILBACK')).toBe(0);
    } finally {
      await ctx.db.raw('DROP TRIGGER IF EXISTS dc_fail ON registrations');
    }
    // The use given back is there for the next registration, which takes it.
    const again = await register(['dc-bare'], { discount_code: 'FAILBACK' });
    expect(again.status).toBe(200);
    expect(await uses('FAILBACK')).toBe(1);
  });

  test('a records step that fails after the payment and is retried counts the use once', async () => {
    await code({ code: 'RETRY1', value: 10 });
    // The first try fails (a transient error, retried) after the payment insert; the next succeeds.
    await ctx.db.raw('CREATE SEQUENCE IF NOT EXISTS dc_retry_seq');
    await ctx.db.raw(
      "CREATE OR REPLACE FUNCTION dc_retry() RETURNS trigger AS $$ BEGIN IF nextval('dc_retry_seq') = 1 THEN RAISE EXCEPTION 'transient failure after the payment' USING ERRCODE = '40001'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
    );
    await ctx.db.raw("CREATE TRIGGER dc_retry BEFORE UPDATE ON registrations FOR EACH ROW WHEN (NEW.status = 'completed') EXECUTE FUNCTION dc_retry()");
    try {
      const res = await register(['dc-bare'], { discount_code: 'RETRY1' });
      expect(res.status).toBe(200);
      expect(Number((await ctx.db.raw('SELECT last_value FROM dc_retry_seq')).rows[0].last_value)).toBe(2);
      expect(res.body.payment.discount_code).toBe('RETRY1');
      expect(await uses('RETRY1')).toBe(1);
      expect(Number((await ctx.db('payments').where({ discount_code: 'RETRY1' }).count({ n: '*' }))[0].n)).toBe(1);
    } finally {
      await ctx.db.raw('DROP TRIGGER IF EXISTS dc_retry ON registrations');
    }
  }, 60_000);

  test('a code that became unusable between the check and the records transaction: 400 naming discount_code, nothing kept', async () => {
    const c = await code({ code: 'FLIP', value: 10 });
    // When the API records the request (after validating it), the code is switched off.
    await ctx.db.raw(`CREATE OR REPLACE FUNCTION dc_flip() RETURNS trigger AS $$ BEGIN UPDATE discount_codes SET active = false WHERE id = ${Number(c.id)}; RETURN NEW; END $$ LANGUAGE plpgsql`);
    await ctx.db.raw('CREATE TRIGGER dc_flip AFTER INSERT ON registrations FOR EACH ROW EXECUTE FUNCTION dc_flip()');
    const before = await counts();
    try {
      const res = await register(['dc-bare'], { discount_code: 'FLIP' });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'wu_rest_invalid_parameter', data: { params: { discount_code: 'discount_code FLIP is not active.' } } });
      expect(await counts()).toEqual(before);
      expect(await uses('FLIP')).toBe(0);
    } finally {
      await ctx.db.raw('DROP TRIGGER IF EXISTS dc_flip ON registrations');
    }
  });
});
