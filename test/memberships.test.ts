import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';
import { expectGetOnBothPaths, expectUnknownIds } from './resource-helpers';

describe('memberships', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  const count = async (table = 'memberships') => Number((await ctx.db(table).count({ n: '*' }))[0].n);
  let n = 0;
  let customerId: number;
  let otherCustomerId: number;
  let planId: number;
  let plan2Id: number;
  let serviceId: number;

  const newCustomer = async () => (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body.id as number;
  const newProduct = async (extra: Record<string, unknown> = {}) => {
    n += 1;
    const res = await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: `m-plan-${n}`, name: `Plan ${n}`, amount: 10, type: 'plan', ...extra });
    expect(res.status).toBe(200);
    return res.body.id as number;
  };
  const create = async (extra: Record<string, unknown> = {}) => {
    const res = await ctx.http.post(`${BASE}/memberships`).set(auth()).send({ customer_id: customerId, plan_id: planId, ...extra });
    expect(res.status).toBe(200);
    return res.body;
  };
  let siteSeq = 0;
  const insertSite = async (membershipId: number, type = 'pending') => {
    siteSeq += 1;
    const [row] = await ctx
      .db('sites')
      .insert({ title: `Site ${siteSeq}`, domain: `ms-site-${siteSeq}.example.com`, path: '/', customer_id: customerId, membership_id: membershipId, type, active: false })
      .returning('*');
    return row;
  };
  const siteRow = (id: number) => ctx.db('sites').where({ id }).first();
  const sinceMs = (iso: string) => Date.now() - new Date(iso).getTime();

  beforeAll(async () => {
    ctx = await createTestContext();
    customerId = await newCustomer();
    otherCustomerId = await newCustomer();
    planId = await newProduct();
    plan2Id = await newProduct({ amount: 20 });
    serviceId = await newProduct({ type: 'service' });
  });
  afterAll(() => ctx.close());

  describe('create', () => {
    test('minimal body: every field with its default and JSON type', async () => {
      const m = await create();
      expect(m).toEqual({
        id: expect.any(Number),
        model: 'membership',
        customer_id: customerId,
        plan_id: planId,
        addon_products: [],
        currency: 'USD',
        initial_amount: 0,
        recurring: true,
        auto_renew: false,
        duration: 1,
        duration_unit: 'month',
        amount: 0,
        discount_code: null,
        date_activated: null,
        date_trial_end: null,
        date_renewed: null,
        date_cancellation: null,
        date_expiration: null,
        times_billed: 0,
        billing_cycles: 0,
        status: 'pending',
        gateway: '',
        gateway_customer_id: '',
        gateway_subscription_id: '',
        migrated_from_id: null,
        date_created: expect.any(String),
        date_modified: expect.any(String),
        // Written by plan changes only (membership-change.test.ts).
        scheduled_change: null,
        credit_balance: 0,
        // WordPress' links: the record, its collection, and the records it names (embeddable).
        _links: {
          self: [{ href: expect.stringMatching(new RegExp(`^http://127\\.0\\.0\\.1:\\d+${BASE}/memberships/${m.id}$`)) }],
          collection: [{ href: expect.stringMatching(new RegExp(`${BASE}/memberships$`)) }],
          customer: [{ embeddable: true, href: expect.stringMatching(new RegExp(`${BASE}/customers/${customerId}$`)) }],
          plan: [{ embeddable: true, href: expect.stringMatching(new RegExp(`${BASE}/products/${planId}$`)) }],
        },
      });
      expect(new Date(m.date_created).toISOString()).toBe(m.date_created);
    });

    test('full body on the singular path; money exact; currency upper-cased; dates ISO', async () => {
      const res = await ctx.http
        .post(`${BASE}/membership`)
        .set(auth())
        .send({
          customer_id: customerId,
          plan_id: planId,
          addon_products: [{ product_id: serviceId, quantity: 2 }],
          currency: 'eur',
          initial_amount: '5.5',
          amount: 19.99,
          recurring: false,
          auto_renew: 1,
          duration: 3,
          duration_unit: 'week',
          date_trial_end: '2026-12-01',
          date_expiration: '2027-01-31T12:00:00+01:00',
          date_renewed: null,
          times_billed: 2,
          billing_cycles: 12,
          status: 'on-hold',
          gateway: 'stripe',
          gateway_customer_id: 'cus_123',
          gateway_subscription_id: 'sub_abc',
        });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        addon_products: [{ product_id: serviceId, quantity: 2 }],
        currency: 'EUR',
        initial_amount: 5.5,
        amount: 19.99,
        recurring: false,
        auto_renew: true,
        duration: 3,
        duration_unit: 'week',
        date_trial_end: '2026-12-01T00:00:00.000Z',
        date_expiration: '2027-01-31T11:00:00.000Z',
        date_renewed: null,
        date_activated: null,
        times_billed: 2,
        billing_cycles: 12,
        status: 'on-hold',
        gateway: 'stripe',
        gateway_customer_id: 'cus_123',
        gateway_subscription_id: 'sub_abc',
      });
      const row = await ctx.db('memberships').where({ id: res.body.id }).first();
      expect(row.amount).toBe('19.9900');
      expect(row.initial_amount).toBe('5.5000');
    });

    test('0.1 + 0.2 style amounts stay exact', async () => {
      const m = await create({ amount: 0.3, initial_amount: '0.1' });
      expect(m.amount).toBe(0.3);
      expect(m.initial_amount).toBe(0.1);
    });

    test.each([
      [{ status: 'paused' }, 'status', 'status is not one of pending, active, trialing, expired, on-hold, and cancelled.'],
      [{ status: 'completed' }, 'status', expect.stringContaining('status is not one of')],
      [{ duration_unit: 'decade' }, 'duration_unit', 'duration_unit is not one of day, week, month, and year.'],
      [{ currency: 'usd1' }, 'currency', expect.stringContaining('ISO 4217')],
      [{ currency: 'XYZ' }, 'currency', expect.stringContaining('ISO 4217')],
      [{ amount: -1 }, 'amount', 'amount must be a non-negative amount, e.g. 19.99.'],
      [{ amount: 1.23456 }, 'amount', 'amount must have at most 4 decimal places.'],
      [{ amount: 'abc' }, 'amount', 'amount must be a non-negative amount, e.g. 19.99.'],
      [{ initial_amount: true }, 'initial_amount', expect.any(String)],
      [{ auto_renew: 'maybe' }, 'auto_renew', 'auto_renew is not of type boolean.'],
      [{ recurring: 2 }, 'recurring', 'recurring is not of type boolean.'],
      [{ duration: 0 }, 'duration', 'duration must be greater than or equal to 1.'],
      [{ duration: 1.5 }, 'duration', 'duration is not of type integer.'],
      [{ times_billed: -1 }, 'times_billed', 'times_billed must be greater than or equal to 0.'],
      // validation.ts reports a non-number for an int field as "not of type number" (WordPress says integer).
      [{ customer_id: 'x' }, 'customer_id', expect.stringMatching(/^customer_id is not of type (integer|number)\.$/)],
      [{ customer_id: undefined }, 'customer_id', 'customer_id is required.'],
      [{ plan_id: undefined }, 'plan_id', 'plan_id is required.'],
      [{ plan_id: 0 }, 'plan_id', 'plan_id must be greater than 0.'],
      [{ addon_products: 'x' }, 'addon_products', 'addon_products is not of type array.'],
      [{ addon_products: [{ product_id: 1, quantity: 0 }] }, 'addon_products.0.quantity', 'addon_products.0.quantity must be greater than or equal to 1.'],
      [{ addon_products: [{ product_id: 1 }] }, 'addon_products.0.quantity', 'addon_products.0.quantity is required.'],
      [{ addon_products: [{ product_id: 1, quantity: 1, price: 3 }] }, 'addon_products.0.price', 'addon_products.0.price is not a valid parameter.'],
      [{ addon_products: [{ product_id: 1, quantity: 1 }, { product_id: 1, quantity: 2 }] }, 'addon_products', expect.stringContaining('twice')],
      [{ date_expiration: 'tomorrow' }, 'date_expiration', expect.stringContaining('not a valid date')],
      [{ date_activated: 5 }, 'date_activated', 'date_activated is not of type string.'],
      [{ gateway: 7 }, 'gateway', 'gateway is not of type string.'],
      [{ invoice_number: 1 }, 'invoice_number', 'invoice_number is not a valid parameter.'],
      [{ id: 5 }, 'id', 'id is not a valid parameter.'],
    ])('bad %o is 400 naming %s, nothing created', async (patch, name, message) => {
      const before = await count();
      const res = await ctx.http.post(`${BASE}/memberships`).set(auth()).send({ customer_id: customerId, plan_id: planId, ...patch });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(res.body.data.params[name]).toEqual(message);
      expect(await count()).toBe(before);
    });

    test('unknown customer_id and plan_id: 400 naming both, nothing created', async () => {
      const before = await count();
      const res = await ctx.http.post(`${BASE}/memberships`).set(auth()).send({ customer_id: 987654, plan_id: 987655 });
      expect(res.status).toBe(400);
      expect(res.body.data.params).toEqual({
        customer_id: 'customer_id 987654 does not match any customer.',
        plan_id: 'plan_id 987655 does not match any product.',
      });
      expect(await count()).toBe(before);
    });

    test('plan_id of a product that is not a plan: 400 naming plan_id', async () => {
      const before = await count();
      const res = await ctx.http.post(`${BASE}/memberships`).set(auth()).send({ customer_id: customerId, plan_id: serviceId });
      expect(res.status).toBe(400);
      expect(res.body.data.params.plan_id).toBe(`plan_id ${serviceId} is a product of type service, not a plan.`);
      expect(await count()).toBe(before);
    });

    test('unknown add-on product: 400 naming addon_products, nothing created', async () => {
      const before = await count();
      const res = await ctx.http
        .post(`${BASE}/memberships`)
        .set(auth())
        .send({ customer_id: customerId, plan_id: planId, addon_products: [{ product_id: serviceId, quantity: 1 }, { product_id: 876543, quantity: 1 }] });
      expect(res.status).toBe(400);
      expect(res.body.data.params.addon_products).toBe('addon_products: product_id 876543 does not match any product.');
      expect(await count()).toBe(before);
    });

    test('a plan as an add-on: 400 naming addon_products (add-ons are packages or services), on create and update', async () => {
      const before = await count();
      const res = await ctx.http
        .post(`${BASE}/memberships`)
        .set(auth())
        .send({ customer_id: customerId, plan_id: planId, addon_products: [{ product_id: serviceId, quantity: 1 }, { product_id: planId, quantity: 1 }] });
      expect(res.status).toBe(400);
      expect(res.body.data.params.addon_products).toBe(`addon_products: product_id ${planId} is a plan; add-ons are products of type package or service.`);
      expect(await count()).toBe(before);
      const m = await create({ addon_products: [{ product_id: serviceId, quantity: 1 }] });
      const upd = await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ addon_products: [{ product_id: planId, quantity: 1 }] });
      expect(upd.status).toBe(400);
      expect((await ctx.db('memberships').where({ id: m.id }).first('addon_products')).addon_products).toEqual([{ product_id: serviceId, quantity: 1 }]);
    });

    test('malformed JSON and a non-object body', async () => {
      const bad = await ctx.http.post(`${BASE}/memberships`).set(auth()).set('Content-Type', 'application/json').send('{"customer_id":');
      expect(bad.status).toBe(400);
      expect(bad.body.code).toBe('rest_invalid_json');
      const arr = await ctx.http.post(`${BASE}/memberships`).set(auth()).send([1, 2]);
      expect(arr.status).toBe(400);
    });
  });

  describe('get, update, delete', () => {
    test('get on the plural and the singular path, and through the list', async () => {
      await expectGetOnBothPaths(ctx, { plural: 'memberships', singular: 'membership' }, await create({ gateway: 'manual' }));
    });

    test('unknown ids: 404 wu_rest_membership_invalid_id on every method and path; non-numeric id: rest_no_route', async () => {
      await expectUnknownIds(ctx, { plural: 'memberships', singular: 'membership' }, 'membership');
    });

    test('update with PUT, PATCH and POST on the id (both paths); date_modified moves', async () => {
      const m = await create();
      const put = await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send({ amount: 19.99, gateway: 'stripe', plan_id: plan2Id });
      expect(put.status).toBe(200);
      expect(put.body).toMatchObject({ amount: 19.99, gateway: 'stripe', plan_id: plan2Id });
      expect(new Date(put.body.date_modified).getTime()).toBeGreaterThanOrEqual(new Date(m.date_modified).getTime());
      const patch = await ctx.http.patch(`${BASE}/membership/${m.id}`).set(auth()).send({ addon_products: [{ product_id: serviceId, quantity: 3 }], date_expiration: '2027-03-01T00:00:00Z' });
      expect(patch.body).toMatchObject({ amount: 19.99, addon_products: [{ product_id: serviceId, quantity: 3 }], date_expiration: '2027-03-01T00:00:00.000Z' });
      const post = await ctx.http.post(`${BASE}/membership/${m.id}`).set(auth()).send({ date_expiration: null, customer_id: otherCustomerId });
      expect(post.body).toMatchObject({ date_expiration: null, customer_id: otherCustomerId });
      const overridden = await ctx.http.post(`${BASE}/memberships/${m.id}`).set(auth()).set('X-HTTP-Method-Override', 'PATCH').send({ gateway: 'paypal' });
      expect(overridden.body.gateway).toBe('paypal');
    });

    test('an update that changes nothing answers 200 with the record', async () => {
      const m = await create();
      const res = await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send({});
      expect(res.status).toBe(200);
      expect(res.body).toEqual(m);
    });

    test('update with an unknown or read-only key: 400 wu_rest_membership_invalid_set_method, nothing changes', async () => {
      const m = await create();
      for (const body of [{ invoice_number: 3 }, { id: 5 }, { date_created: '2026-01-01' }, { model: 'x' }, { colour: 'blue', amount: 3 }]) {
        const res = await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send(body);
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('wu_rest_membership_invalid_set_method');
      }
      expect((await ctx.http.get(`${BASE}/memberships/${m.id}`).set(auth())).body).toEqual(m);
    });

    test('update with invalid values or references: 400 naming each field, nothing changes', async () => {
      const m = await create();
      const bad = await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: 'done', currency: 'XYZ', amount: -3, duration_unit: 'hour' });
      expect(bad.status).toBe(400);
      expect(Object.keys(bad.body.data.params).sort()).toEqual(['amount', 'currency', 'duration_unit', 'status']);
      const refs = await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ customer_id: 999999, plan_id: 999998, status: 'active' });
      expect(refs.status).toBe(400);
      expect(Object.keys(refs.body.data.params).sort()).toEqual(['customer_id', 'plan_id']);
      const notPlan = await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ plan_id: serviceId, status: 'active' });
      expect(notPlan.status).toBe(400);
      expect(Object.keys(notPlan.body.data.params)).toEqual(['plan_id']);
      const addon = await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ addon_products: [{ product_id: 999997, quantity: 1 }] });
      expect(addon.status).toBe(400);
      expect(Object.keys(addon.body.data.params)).toEqual(['addon_products']);
      const nullCustomer = await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ customer_id: null });
      expect(nullCustomer.status).toBe(400);
      expect(nullCustomer.body.data.params.customer_id).toMatch(/^customer_id is not of type (integer|number)\.$/);
      expect((await ctx.http.get(`${BASE}/memberships/${m.id}`).set(auth())).body).toEqual(m);
    });

    test('the customer of a membership with payments cannot change (payments must stay with their membership)', async () => {
      const m = await create();
      await ctx.db('payments').insert({ customer_id: customerId, membership_id: m.id });
      const res = await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send({ customer_id: otherCustomerId });
      expect(res.status).toBe(400);
      expect(Object.keys(res.body.data.params)).toEqual(['customer_id']);
      expect((await ctx.http.get(`${BASE}/memberships/${m.id}`).set(auth())).body).toEqual(m);
      expect((await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send({ customer_id: customerId })).status).toBe(200);
    });

    test('delete answers true, then the id is unknown', async () => {
      const m = await create();
      const del = await ctx.http.delete(`${BASE}/memberships/${m.id}`).set(auth());
      expect(del.status).toBe(200);
      expect(del.body).toBe(true);
      expect((await ctx.http.get(`${BASE}/memberships/${m.id}`).set(auth())).status).toBe(404);
      const again = await ctx.http.delete(`${BASE}/membership/${m.id}`).set(auth());
      expect(again.status).toBe(404);
      expect(again.body.code).toBe('wu_rest_membership_invalid_id');
    });

    test('delete of a membership with payments or sites: 409 wu_rest_membership_in_use, nothing deleted', async () => {
      const withPayment = await create();
      await ctx.db('payments').insert({ customer_id: customerId, membership_id: withPayment.id });
      const r1 = await ctx.http.delete(`${BASE}/memberships/${withPayment.id}`).set(auth());
      expect(r1.status).toBe(409);
      expect(r1.body.code).toBe('wu_rest_membership_in_use');
      expect(r1.body.data).toMatchObject({ status: 409, referenced_by: 'payments' });
      const withSite = await create();
      await insertSite(withSite.id, 'customer_owned');
      const r2 = await ctx.http.delete(`${BASE}/membership/${withSite.id}`).set(auth());
      expect(r2.status).toBe(409);
      expect(r2.body.data.referenced_by).toBe('sites');
      expect((await ctx.http.get(`${BASE}/memberships/${withPayment.id}`).set(auth())).status).toBe(200);
      expect((await ctx.http.get(`${BASE}/memberships/${withSite.id}`).set(auth())).status).toBe(200);
    });

    test('the plan and the customer of a membership cannot be deleted (409)', async () => {
      const c = await newCustomer();
      const p = await newProduct();
      await create({ customer_id: c, plan_id: p });
      expect((await ctx.http.delete(`${BASE}/products/${p}`).set(auth())).status).toBe(409);
      expect((await ctx.http.delete(`${BASE}/customers/${c}`).set(auth())).status).toBe(409);
    });
  });

  describe('status rules', () => {
    test('created cancelled: date_cancellation now, auto_renew forced off', async () => {
      const m = await create({ status: 'cancelled', auto_renew: true });
      expect(m.auto_renew).toBe(false);
      expect(sinceMs(m.date_cancellation)).toBeLessThan(60_000);
      const dated = await create({ status: 'cancelled', date_cancellation: '2026-05-01T10:00:00Z' });
      expect(dated.date_cancellation).toBe('2026-05-01T10:00:00.000Z');
    });

    test('updated to cancelled: date_cancellation recorded, auto_renew off; it cannot be turned back on while cancelled', async () => {
      const m = await create({ status: 'active', auto_renew: true });
      expect(m.date_cancellation).toBeNull();
      const res = await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: 'cancelled' });
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('cancelled');
      expect(res.body.auto_renew).toBe(false);
      expect(sinceMs(res.body.date_cancellation)).toBeLessThan(60_000);
      const again = await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send({ auto_renew: true });
      expect(again.body.auto_renew).toBe(false);
      expect(again.body.date_cancellation).toBe(res.body.date_cancellation);
      const explicit = await create({ status: 'active' });
      const cancelled = await ctx.http.put(`${BASE}/memberships/${explicit.id}`).set(auth()).send({ status: 'cancelled', date_cancellation: '2026-02-02' });
      expect(cancelled.body.date_cancellation).toBe('2026-02-02T00:00:00.000Z');
    });

    test('created active or trialing: date_activated set (unless given)', async () => {
      const active = await create({ status: 'active' });
      expect(sinceMs(active.date_activated)).toBeLessThan(60_000);
      const trialing = await create({ status: 'trialing' });
      expect(trialing.date_activated).not.toBeNull();
      const given = await create({ status: 'active', date_activated: '2026-03-03T03:03:03Z' });
      expect(given.date_activated).toBe('2026-03-03T03:03:03.000Z');
      expect((await create()).date_activated).toBeNull();
    });

    test('pending -> active publishes the pending sites of that membership only, and sets date_activated', async () => {
      const m = await create();
      const other = await create();
      const pending1 = await insertSite(m.id);
      const pending2 = await insertSite(m.id);
      const template = await insertSite(m.id, 'site_template');
      const otherPending = await insertSite(other.id);
      const res = await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: 'active' });
      expect(res.status).toBe(200);
      expect(sinceMs(res.body.date_activated)).toBeLessThan(60_000);
      for (const s of [pending1, pending2]) expect(await siteRow(s.id)).toMatchObject({ type: 'customer_owned', active: true });
      expect(await siteRow(template.id)).toMatchObject({ type: 'site_template', active: false });
      expect(await siteRow(otherPending.id)).toMatchObject({ type: 'pending', active: false });
      // Each published site is a site_published event (issue 19), written with the activation.
      const published = await ctx.db('events').where({ slug: 'site_published' }).whereIn('object_id', [pending1.id, pending2.id, template.id, otherPending.id]).orderBy('object_id');
      expect(published.map((e) => [Number(e.object_id), e.payload.type, e.payload.active])).toEqual([
        [pending1.id, 'customer_owned', true],
        [pending2.id, 'customer_owned', true],
      ]);
    });

    test('on-hold -> trialing publishes too; date_activated kept when already set', async () => {
      const m = await create({ status: 'on-hold', date_activated: '2026-01-05T00:00:00Z' });
      const site = await insertSite(m.id);
      const res = await ctx.http.patch(`${BASE}/membership/${m.id}`).set(auth()).send({ status: 'trialing' });
      expect(res.body.date_activated).toBe('2026-01-05T00:00:00.000Z');
      expect(await siteRow(site.id)).toMatchObject({ type: 'customer_owned', active: true });
    });

    test('other moves do not publish: expired -> active, active -> active, pending -> expired', async () => {
      const expired = await create({ status: 'expired' });
      const s1 = await insertSite(expired.id);
      await ctx.http.put(`${BASE}/memberships/${expired.id}`).set(auth()).send({ status: 'active' });
      expect((await siteRow(s1.id)).type).toBe('pending');
      const active = await create({ status: 'active' });
      const s2 = await insertSite(active.id);
      await ctx.http.put(`${BASE}/memberships/${active.id}`).set(auth()).send({ status: 'active', gateway: 'x' });
      expect((await siteRow(s2.id)).type).toBe('pending');
      const pending = await create();
      const s3 = await insertSite(pending.id);
      await ctx.http.put(`${BASE}/memberships/${pending.id}`).set(auth()).send({ status: 'expired' });
      expect((await siteRow(s3.id)).type).toBe('pending');
    });

    test('status changes follow one state machine: every illegal move is a 409 naming both statuses, and changes nothing', async () => {
      const legal: Record<string, string[]> = {
        pending: ['active', 'trialing', 'on-hold', 'cancelled', 'expired'],
        trialing: ['active', 'on-hold', 'cancelled', 'expired'],
        active: ['on-hold', 'cancelled', 'expired'],
        'on-hold': ['active', 'trialing', 'cancelled', 'expired'],
        cancelled: ['active', 'expired'],
        expired: ['active'],
      };
      const statuses = Object.keys(legal);
      for (const from of statuses) {
        for (const to of statuses) {
          const m = await create({ status: from });
          const res = await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: to, gateway: 'moved' });
          if (from === to || legal[from].includes(to)) {
            expect([from, to, res.status]).toEqual([from, to, 200]);
            expect(res.body.status).toBe(to);
          } else {
            expect([from, to, res.status]).toEqual([from, to, 409]);
            expect(res.body).toMatchObject({ code: 'wu_rest_membership_invalid_status_transition', data: { status: 409, from, to, allowed: legal[from] } });
            expect(res.body.message).toBe(`Membership ${m.id} cannot go from ${from} to ${to}; from ${from} it can become ${legal[from].join(', ')}.`);
            expect(await ctx.db('memberships').where({ id: m.id }).first('status', 'gateway')).toEqual({ status: from, gateway: m.gateway });
          }
        }
      }
    });

    test('a cancelled membership set back to active is reactivated: the cancellation cleared, a recurring one renews again', async () => {
      const m = await create({ status: 'active', auto_renew: true, recurring: true });
      await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: 'cancelled' });
      const back = await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: 'active' });
      expect(back.status).toBe(200);
      expect(back.body).toMatchObject({ status: 'active', auto_renew: true, date_cancellation: null });
      // The write may say otherwise; a one-off membership does not renew.
      await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: 'cancelled' });
      expect((await ctx.http.patch(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: 'active', auto_renew: false })).body).toMatchObject({ auto_renew: false, date_cancellation: null });
      const once = await create({ status: 'cancelled', recurring: false });
      expect((await ctx.http.patch(`${BASE}/memberships/${once.id}`).set(auth()).send({ status: 'active' })).body).toMatchObject({ status: 'active', auto_renew: false, date_cancellation: null });
      const expired = await create({ status: 'expired', recurring: true, date_cancellation: '2026-01-01T00:00:00Z' });
      expect((await ctx.http.patch(`${BASE}/memberships/${expired.id}`).set(auth()).send({ status: 'active' })).body).toMatchObject({ status: 'active', auto_renew: true, date_cancellation: null });
    });

    test('a refused activation changes nothing: the site stays pending', async () => {
      const m = await create();
      const site = await insertSite(m.id);
      const res = await ctx.http.put(`${BASE}/memberships/${m.id}`).set(auth()).send({ status: 'active', plan_id: serviceId });
      expect(res.status).toBe(400);
      expect((await siteRow(site.id)).type).toBe('pending');
      expect((await ctx.http.get(`${BASE}/memberships/${m.id}`).set(auth())).body).toEqual(m);
    });
  });

  describe('list', () => {
    let c: number;
    let plan: number;
    let ids: number[];
    const get = (query: Record<string, unknown> | string) => ctx.http.get(`${BASE}/memberships`).set(auth()).query(query);
    const idsOf = (body: { id: number }[]) => body.map((m) => m.id);

    beforeAll(async () => {
      c = await newCustomer();
      plan = await newProduct();
      ids = [];
      const specs = [
        { status: 'active', amount: 30, gateway: 'stripe', gateway_subscription_id: 'sub_LIST_a', auto_renew: true, currency: 'EUR', duration_unit: 'year' },
        { status: 'pending', amount: 10, gateway: 'paypal', gateway_customer_id: 'cust_LIST_b' },
        { status: 'active', amount: 20, gateway: 'stripe', gateway_subscription_id: 'sub_LIST_c', auto_renew: true },
        { status: 'cancelled', amount: 5, gateway: 'manual', date_expiration: '2026-06-01' },
        { status: 'trialing', amount: 40, gateway: 'stripe', plan_id: planId, date_expiration: '2026-03-01' },
      ];
      for (const s of specs) ids.push((await create({ customer_id: c, plan_id: plan, ...s })).id);
    });

    test('filter by customer_id: newest first, paging headers', async () => {
      const res = await get({ customer_id: c, per_page: 2 });
      expect(res.status).toBe(200);
      expect(idsOf(res.body)).toEqual([ids[4], ids[3]]);
      expect(res.headers['x-wp-total']).toBe('5');
      expect(res.headers['x-wp-totalpages']).toBe('3');
      expect(res.headers.link).toMatch(/rel="next"/);
      const p3 = await get({ customer_id: c, per_page: 2, page: 3 });
      expect(idsOf(p3.body)).toEqual([ids[0]]);
      expect((await get({ customer_id: c, per_page: 2, page: 4 })).body).toEqual([]);
    });

    test('exact filters: status, plan_id, gateway, auto_renew, currency, duration_unit, __in', async () => {
      expect(idsOf((await get({ customer_id: c, status: 'active' })).body)).toEqual([ids[2], ids[0]]);
      expect(idsOf((await get({ customer_id: c, plan_id: planId })).body)).toEqual([ids[4]]);
      expect(idsOf((await get({ customer_id: c, plan_id: plan, gateway: 'stripe' })).body)).toEqual([ids[2], ids[0]]);
      expect(idsOf((await get({ customer_id: c, auto_renew: 'false' })).body)).toEqual([ids[4], ids[3], ids[1]]);
      expect(idsOf((await get({ customer_id: c, currency: 'EUR' })).body)).toEqual([ids[0]]);
      expect(idsOf((await get({ customer_id: c, duration_unit: 'year' })).body)).toEqual([ids[0]]);
      expect(idsOf((await get({ customer_id: c, status__in: 'pending,trialing' })).body)).toEqual([ids[4], ids[1]]);
      expect(idsOf((await get({ customer_id: c, status__not_in: 'active,pending' })).body)).toEqual([ids[4], ids[3]]);
    });

    test('orderby amount, date_expiration, status; order asc', async () => {
      expect(idsOf((await get({ customer_id: c, orderby: 'amount', order: 'asc' })).body)).toEqual([ids[3], ids[1], ids[2], ids[0], ids[4]]);
      expect(idsOf((await get({ customer_id: c, orderby: 'amount' })).body)).toEqual([ids[4], ids[0], ids[2], ids[1], ids[3]]);
      const byExp = idsOf((await get({ customer_id: c, orderby: 'date_expiration', order: 'asc' })).body);
      expect(byExp.slice(0, 2)).toEqual([ids[4], ids[3]]);
      expect((await get({ customer_id: c, orderby: 'status', order: 'asc' })).body.map((m: { status: string }) => m.status)).toEqual([
        'active',
        'active',
        'cancelled',
        'pending',
        'trialing',
      ]);
    });

    test('date ranges on date_expiration, date_trial_end and date_renewed (what a renewal job selects by); records without the date do not match', async () => {
      expect(idsOf((await get({ customer_id: c, 'date_expiration[before]': '2026-04-01' })).body)).toEqual([ids[4]]);
      expect(idsOf((await get({ customer_id: c, 'date_expiration[after]': '2026-03-01' })).body)).toEqual([ids[4], ids[3]]);
      expect(idsOf((await get({ customer_id: c, 'date_expiration[after]': '2026-03-01T00:00:01Z', 'date_expiration[before]': '2026-06-01' })).body)).toEqual([ids[3]]);
      const counted = await get({ customer_id: c, 'date_expiration[before]': '2027-01-01', per_page: 1 });
      expect(counted.headers['x-wp-total']).toBe('2');
      // With the other filters, and with date_created's own range.
      expect(idsOf((await get({ customer_id: c, status: 'cancelled', 'date_expiration[after]': '2026-01-01', 'date_created[after]': '2000-01-01' })).body)).toEqual([ids[3]]);
      await ctx.http.patch(`${BASE}/memberships/${ids[2]}`).set(auth()).send({ date_trial_end: '2026-05-05T10:00:00Z', date_renewed: '2026-04-04' });
      expect(idsOf((await get({ customer_id: c, 'date_trial_end[after]': '2026-05-05T10:00:00Z' })).body)).toEqual([ids[2]]);
      expect(idsOf((await get({ customer_id: c, 'date_trial_end[before]': '2026-05-05T09:59:59Z' })).body)).toEqual([]);
      expect(idsOf((await get({ customer_id: c, 'date_renewed[before]': '2026-04-04' })).body)).toEqual([ids[2]]);
    });

    test.each([
      [{ 'date_expiration[before]': 'soon' }, 'date_expiration[before]', 'date_expiration[before] is not a valid date (use ISO 8601, e.g. 2026-01-31 or 2026-01-31T12:00:00Z).'],
      [{ 'date_expiration[after]': '2026-02-30' }, 'date_expiration[after]', expect.stringContaining('is not a valid date')],
      [{ date_expiration: '2026-01-01' }, 'date_expiration', 'date_expiration is a range: use date_expiration[after] and/or date_expiration[before].'],
      [{ 'date_renewed[after]': '2026-02-01', 'date_renewed[before]': '2026-01-01' }, 'date_renewed[after]', 'date_renewed[after] must not be later than date_renewed[before].'],
      [{ 'date_expiration[during]': '2026-01-01' }, 'date_expiration[during]', 'date_expiration[during] is not a valid parameter.'],
      [{ 'date_cancellation[after]': '2026-01-01' }, 'date_cancellation[after]', 'date_cancellation[after] is not a valid parameter.'],
      [{ 'date_expiration[before]': ['2026-01-01', '2026-02-01'] }, 'date_expiration[before]', expect.any(String)],
    ])('bad date range %o is 400 naming %s', async (query, name, message) => {
      const res = await get(query);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(res.body.data.params[name]).toEqual(message);
    });

    test('search covers gateway_subscription_id, gateway_customer_id and gateway', async () => {
      expect(idsOf((await get({ search: 'sub_list' })).body)).toEqual([ids[2], ids[0]]);
      expect(idsOf((await get({ search: 'CUST_LIST' })).body)).toEqual([ids[1]]);
      expect(idsOf((await get({ customer_id: c, search: 'payp' })).body)).toEqual([ids[1]]);
      expect((await get({ search: 'LIST_%' })).body).toEqual([]);
    });

    test.each([
      [{ status: 'paused' }, 'status', 'status must be one of pending, active, trialing, expired, on-hold, and cancelled.'],
      [{ customer_id: 'x' }, 'customer_id', 'customer_id must be of type integer.'],
      [{ auto_renew: 'perhaps' }, 'auto_renew', 'auto_renew must be of type boolean.'],
      [{ duration_unit: 'hour' }, 'duration_unit', expect.stringContaining('duration_unit must be one of')],
      [{ orderby: 'gateway_customer_id' }, 'orderby', 'orderby is not one of id, amount, status, date_created, date_modified, date_expiration, customer_id, and plan_id.'],
      [{ gateway_customer_id: 'x' }, 'gateway_customer_id', 'gateway_customer_id is not a valid parameter.'],
      [{ per_page: 101 }, 'per_page', 'per_page must be between 1 (inclusive) and 100 (inclusive)'],
    ])('bad list parameter %o is 400 naming %s', async (query, name, message) => {
      const res = await get(query);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(res.body.data.params[name]).toEqual(message);
    });

    test('the singular path lists too', async () => {
      const res = await ctx.http.get(`${BASE}/membership`).set(auth()).query({ customer_id: c });
      expect(idsOf(res.body)).toEqual([...ids].reverse());
    });
  });
});
