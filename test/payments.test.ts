import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';
import { expectGetOnBothPaths, expectUnknownIds } from './resource-helpers';

describe('payments', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  const count = async (table = 'payments') => Number((await ctx.db(table).count({ n: '*' }))[0].n);
  const counter = async () => Number((await ctx.db('invoice_counter').where({ id: 1 }).first()).value);
  let n = 0;
  let customerId: number;
  let otherCustomerId: number;
  let planId: number;
  let membershipId: number;
  let otherMembershipId: number;

  const newCustomer = async () => (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body.id as number;
  const newProduct = async (extra: Record<string, unknown> = {}) => {
    n += 1;
    const res = await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: `p-plan-${n}`, name: `Plan ${n}`, amount: 10, type: 'plan', ...extra });
    expect(res.status).toBe(200);
    return res.body.id as number;
  };
  const newMembership = async (customer: number) => {
    const res = await ctx.http.post(`${BASE}/memberships`).set(auth()).send({ customer_id: customer, plan_id: planId });
    expect(res.status).toBe(200);
    return res.body.id as number;
  };
  const create = async (extra: Record<string, unknown> = {}) => {
    const res = await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, ...extra });
    expect(res.status).toBe(200);
    return res.body;
  };

  beforeAll(async () => {
    ctx = await createTestContext();
    customerId = await newCustomer();
    otherCustomerId = await newCustomer();
    planId = await newProduct();
    membershipId = await newMembership(customerId);
    otherMembershipId = await newMembership(otherCustomerId);
  });
  afterAll(() => ctx.close());

  describe('create', () => {
    test('minimal body: every field with its default and JSON type', async () => {
      const p = await create();
      expect(p).toEqual({
        id: expect.any(Number),
        model: 'payment',
        customer_id: customerId,
        membership_id: null,
        product_id: null,
        parent_id: null,
        currency: 'USD',
        subtotal: 0,
        refund_total: 0,
        discount_total: 0,
        discount_code: null,
        tax_total: 0,
        total: 0,
        status: 'pending',
        gateway: '',
        gateway_payment_id: '',
        line_items: [],
        invoice_number: null,
        renewal_period_start: null,
        migrated_from_id: null,
        date_created: expect.any(String),
        date_modified: expect.any(String),
        // No membership, product nor parent: only the customer is linked.
        _links: {
          self: [{ href: expect.stringMatching(new RegExp(`${BASE}/payments/${p.id}$`)) }],
          collection: [{ href: expect.stringMatching(new RegExp(`${BASE}/payments$`)) }],
          customer: [{ embeddable: true, href: expect.stringMatching(new RegExp(`${BASE}/customers/${customerId}$`)) }],
        },
      });
      expect(new Date(p.date_created).toISOString()).toBe(p.date_created);
    });

    test('the contract body on the singular path: money exact, currency upper-cased', async () => {
      const res = await ctx.http.post(`${BASE}/payment`).set(auth()).send({
        customer_id: customerId,
        membership_id: membershipId,
        product_id: planId,
        status: 'pending',
        gateway: 'stripe',
        gateway_payment_id: 'pi_123',
        total: 19.99,
        currency: 'eur',
      });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ membership_id: membershipId, product_id: planId, gateway: 'stripe', gateway_payment_id: 'pi_123', total: 19.99, currency: 'EUR' });
      const row = await ctx.db('payments').where({ id: res.body.id }).first();
      expect(row.total).toBe('19.9900');
    });

    test('a gateway payment id names one payment of its gateway: the same one again is a 400 naming it, nothing created', async () => {
      const id = `pi_once_${process.pid}`;
      const first = await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, gateway: 'stripe', gateway_payment_id: id, total: 44 });
      expect(first.status).toBe(200);
      const before = Number((await ctx.db('payments').count({ n: '*' }))[0].n);
      const again = await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, gateway: 'stripe', gateway_payment_id: id, total: 44 });
      expect(again.status).toBe(400);
      expect(again.body).toMatchObject({ code: 'wu_rest_invalid_parameter', data: { params: { gateway_payment_id: 'gateway_payment_id is already recorded for another payment of this gateway.' } } });
      const moved = await ctx.http.patch(`${BASE}/payments/${first.body.id}`).set(auth()).send({ gateway_payment_id: id });
      expect(moved.status).toBe(200);
      const other = (await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, gateway: 'stripe', total: 1 })).body;
      const taken = await ctx.http.patch(`${BASE}/payments/${other.id}`).set(auth()).send({ gateway_payment_id: id });
      expect(taken.status).toBe(400);
      expect(Number((await ctx.db('payments').count({ n: '*' }))[0].n)).toBe(before + 1);
      // Another gateway may use the same id, and '' (no id yet) repeats freely.
      expect((await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, gateway: 'paypal', gateway_payment_id: id, total: 44 })).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, gateway: 'stripe', total: 1 })).status).toBe(200);
    });

    test('total computed with decimals when not given: subtotal - discount_total + tax_total, never below 0', async () => {
      expect((await create({ subtotal: 0.1, tax_total: 0.2 })).total).toBe(0.3);
      expect((await create({ subtotal: '19.99', discount_total: 5, tax_total: '1.5' })).total).toBe(16.49);
      expect((await create({ subtotal: 10, discount_total: 25 })).total).toBe(0);
      expect((await create({ subtotal: 10, tax_total: 2, total: 7.77 })).total).toBe(7.77);
      const big = await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, subtotal: '99999999999.99', tax_total: 0.01 });
      expect(big.status).toBe(400);
      expect(Object.keys(big.body.data.params)).toEqual(['total']);
    });

    test('line items: validated, unit prices exact JSON numbers; subtotal from the lines when not given', async () => {
      const p = await create({
        line_items: [
          { name: 'Plan', quantity: 3, unit_price: 19.99, product_id: planId },
          { name: 'Setup', description: 'one-off', quantity: 1, unit_price: '0.1' },
        ],
        tax_total: 0.2,
      });
      expect(p.line_items).toEqual([
        { name: 'Plan', quantity: 3, unit_price: 19.99, product_id: planId },
        { name: 'Setup', description: 'one-off', quantity: 1, unit_price: 0.1 },
      ]);
      expect(p.subtotal).toBe(60.07);
      expect(p.total).toBe(60.27);
      const given = await create({ line_items: [{ name: 'X', quantity: 1, unit_price: 5 }], subtotal: 4 });
      expect(given).toMatchObject({ subtotal: 4, total: 4 });
    });

    test.each([
      [{ status: 'paid' }, 'status', 'status is not one of pending, completed, refunded, partially-refunded, partially-paid, failed, cancelled, and draft.'],
      [{ status: 'active' }, 'status', expect.stringContaining('status is not one of')],
      [{ currency: 'usd1' }, 'currency', expect.stringContaining('ISO 4217')],
      [{ currency: 'XYZ' }, 'currency', expect.stringContaining('ISO 4217')],
      [{ total: -1 }, 'total', 'total must be a non-negative amount, e.g. 19.99.'],
      [{ total: 1.23456 }, 'total', 'total must have at most 4 decimal places.'],
      [{ total: 'abc' }, 'total', 'total must be a non-negative amount, e.g. 19.99.'],
      [{ subtotal: '1e3' }, 'subtotal', 'subtotal must be a non-negative amount, e.g. 19.99.'],
      [{ tax_total: null }, 'tax_total', expect.any(String)],
      [{ discount_total: -0.01 }, 'discount_total', expect.any(String)],
      [{ refund_total: 'x' }, 'refund_total', expect.any(String)],
      [{ customer_id: undefined }, 'customer_id', 'customer_id is required.'],
      [{ customer_id: 'x' }, 'customer_id', expect.stringMatching(/^customer_id is not of type (integer|number)\.$/)],
      [{ membership_id: 1.5 }, 'membership_id', 'membership_id is not of type integer.'],
      [{ parent_id: -1 }, 'parent_id', 'parent_id must be greater than or equal to 0.'],
      [{ membership_id: '0' }, 'membership_id', 'membership_id is not of type integer.'],
      [{ line_items: [{ name: 'A', quantity: 1, unit_price: 1, product_id: -2 }] }, 'line_items.0.product_id', 'line_items.0.product_id must be greater than or equal to 0.'],
      [{ gateway_payment_id: 5 }, 'gateway_payment_id', 'gateway_payment_id is not of type string.'],
      [{ line_items: 'x' }, 'line_items', 'line_items is not of type array.'],
      [{ line_items: [{ name: 'A', quantity: 0, unit_price: 1 }] }, 'line_items.0.quantity', 'line_items.0.quantity must be greater than or equal to 1.'],
      [{ line_items: [{ quantity: 1, unit_price: 1 }] }, 'line_items.0.name', 'line_items.0.name is required.'],
      [{ line_items: [{ name: 'A', quantity: 1, unit_price: -1 }] }, 'line_items.0.unit_price', expect.stringContaining('non-negative')],
      [{ line_items: [{ name: 'A', quantity: 1, unit_price: 1.00001 }] }, 'line_items.0.unit_price', expect.stringContaining('4 decimal places')],
      [{ line_items: [{ name: 'A', quantity: 1, unit_price: 1, colour: 'red' }] }, 'line_items.0.colour', 'line_items.0.colour is not a valid parameter.'],
      [{ line_items: [1] }, 'line_items.0', 'line_items.0 is not of type object.'],
      [{ invoice_number: 5 }, 'invoice_number', 'invoice_number is not a valid parameter.'],
      [{ id: 5 }, 'id', 'id is not a valid parameter.'],
    ])('bad %o is 400 naming %s, nothing created', async (patch, name, message) => {
      const before = await count();
      const res = await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, ...patch });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(res.body.data.params[name]).toEqual(message);
      expect(await count()).toBe(before);
    });

    test('a reference of 0 is none, as in the original: stored as null on create and update, never as 0', async () => {
      const p = await create({ membership_id: 0, product_id: 0, parent_id: 0, line_items: [{ name: 'A', quantity: 1, unit_price: 5, product_id: 0 }] });
      expect(p).toMatchObject({ membership_id: null, product_id: null, parent_id: null, line_items: [{ name: 'A', quantity: 1, unit_price: 5, product_id: null }] });
      const linked = await ctx.http.put(`${BASE}/payments/${p.id}`).set(auth()).send({ membership_id: membershipId, product_id: planId });
      expect(linked.body).toMatchObject({ membership_id: membershipId, product_id: planId });
      const cleared = await ctx.http.put(`${BASE}/payments/${p.id}`).set(auth()).send({ membership_id: 0, product_id: null });
      expect(cleared.status).toBe(200);
      expect(cleared.body).toMatchObject({ membership_id: null, product_id: null });
      const row = await ctx.db('payments').where({ id: p.id }).first('membership_id', 'product_id', 'parent_id');
      expect(row).toEqual({ membership_id: null, product_id: null, parent_id: null });
    });

    test('unknown references: 400 naming every one, nothing created, no invoice number used', async () => {
      const before = await count();
      const numbers = await counter();
      const res = await ctx.http
        .post(`${BASE}/payments`)
        .set(auth())
        .send({ customer_id: 987654, membership_id: 987655, product_id: 987656, parent_id: 987657, status: 'completed' });
      expect(res.status).toBe(400);
      expect(res.body.data.params).toEqual({
        customer_id: 'customer_id 987654 does not match any customer.',
        membership_id: 'membership_id 987655 does not match any membership.',
        product_id: 'product_id 987656 does not match any product.',
        parent_id: 'parent_id 987657 does not match any payment.',
      });
      const line = await ctx.http
        .post(`${BASE}/payments`)
        .set(auth())
        .send({ customer_id: customerId, status: 'completed', line_items: [{ name: 'A', quantity: 1, unit_price: 1, product_id: 987658 }] });
      expect(line.status).toBe(400);
      expect(line.body.data.params).toEqual({ line_items: 'line_items[0].product_id 987658 does not match any product.' });
      expect(await count()).toBe(before);
      expect(await counter()).toBe(numbers);
    });

    test("a membership of another customer: 400 naming membership_id", async () => {
      const before = await count();
      const res = await ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, membership_id: otherMembershipId });
      expect(res.status).toBe(400);
      expect(Object.keys(res.body.data.params)).toEqual(['membership_id']);
      expect(res.body.data.params.membership_id).toMatch(/belongs to customer/);
      expect(await count()).toBe(before);
    });
  });

  describe('get, update, delete', () => {
    test('get on the plural and the singular path, and through the list', async () => {
      await expectGetOnBothPaths(ctx, { plural: 'payments', singular: 'payment' }, await create({ gateway: 'manual' }));
    });

    test('unknown ids: 404 wu_rest_payment_invalid_id on every method and path; non-numeric id: rest_no_route', async () => {
      await expectUnknownIds(ctx, { plural: 'payments', singular: 'payment' }, 'payment');
    });

    test('update with PUT, PATCH and POST on the id; total is not recomputed unless given', async () => {
      const p = await create({ subtotal: 10 });
      const put = await ctx.http.put(`${BASE}/payments/${p.id}`).set(auth()).send({ gateway: 'stripe', refund_total: 0, membership_id: membershipId });
      expect(put.status).toBe(200);
      expect(put.body).toMatchObject({ gateway: 'stripe', refund_total: 0, membership_id: membershipId, total: 10 });
      const patch = await ctx.http.patch(`${BASE}/payment/${p.id}`).set(auth()).send({ total: 19.99, line_items: [{ name: 'Fee', quantity: 2, unit_price: 9.995 }] });
      expect(patch.body).toMatchObject({ total: 19.99, line_items: [{ name: 'Fee', quantity: 2, unit_price: 9.995 }], subtotal: 10 });
      const post = await ctx.http.post(`${BASE}/payment/${p.id}`).set(auth()).send({ membership_id: null, product_id: planId });
      expect(post.body).toMatchObject({ membership_id: null, product_id: planId });
    });

    test('an update that changes nothing answers 200 with the record', async () => {
      const p = await create();
      const res = await ctx.http.put(`${BASE}/payments/${p.id}`).set(auth()).send({});
      expect(res.status).toBe(200);
      expect(res.body).toEqual(p);
    });

    test('update with an unknown or read-only key: 400 wu_rest_payment_invalid_set_method, nothing changes', async () => {
      const p = await create();
      for (const body of [{ invoice_number: 3 }, { id: 5 }, { date_modified: '2026-01-01' }, { colour: 'blue', total: 3 }]) {
        const res = await ctx.http.put(`${BASE}/payments/${p.id}`).set(auth()).send(body);
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('wu_rest_payment_invalid_set_method');
      }
      expect((await ctx.http.get(`${BASE}/payments/${p.id}`).set(auth())).body).toEqual(p);
    });

    test('update with invalid values or references: 400 naming each field, nothing changes, no invoice number used', async () => {
      const p = await create({ membership_id: membershipId });
      const numbers = await counter();
      const bad = await ctx.http.patch(`${BASE}/payments/${p.id}`).set(auth()).send({ status: 'paid', currency: 'usd1', total: 'abc', line_items: {} });
      expect(bad.status).toBe(400);
      expect(Object.keys(bad.body.data.params).sort()).toEqual(['currency', 'line_items', 'status', 'total']);
      const refs = await ctx.http.patch(`${BASE}/payments/${p.id}`).set(auth()).send({ product_id: 999999, parent_id: 999998, status: 'completed' });
      expect(refs.status).toBe(400);
      expect(Object.keys(refs.body.data.params).sort()).toEqual(['parent_id', 'product_id']);
      const self = await ctx.http.patch(`${BASE}/payments/${p.id}`).set(auth()).send({ parent_id: p.id, status: 'completed' });
      expect(self.status).toBe(400);
      expect(Object.keys(self.body.data.params)).toEqual(['parent_id']);
      // Moving the payment to another customer while it keeps this customer's membership.
      const owner = await ctx.http.patch(`${BASE}/payments/${p.id}`).set(auth()).send({ customer_id: otherCustomerId, status: 'completed' });
      expect(owner.status).toBe(400);
      expect(Object.keys(owner.body.data.params)).toEqual(['membership_id']);
      const otherMembership = await ctx.http.patch(`${BASE}/payments/${p.id}`).set(auth()).send({ membership_id: otherMembershipId });
      expect(otherMembership.status).toBe(400);
      expect(Object.keys(otherMembership.body.data.params)).toEqual(['membership_id']);
      expect((await ctx.http.get(`${BASE}/payments/${p.id}`).set(auth())).body).toEqual(p);
      expect(await counter()).toBe(numbers);
      // Both moved together is fine.
      const both = await ctx.http.patch(`${BASE}/payments/${p.id}`).set(auth()).send({ customer_id: otherCustomerId, membership_id: otherMembershipId });
      expect(both.status).toBe(200);
    });

    test('delete answers true, then the id is unknown; a parent payment cannot be deleted (409)', async () => {
      const parent = await create();
      const child = await create({ parent_id: parent.id });
      expect(child.parent_id).toBe(parent.id);
      const refused = await ctx.http.delete(`${BASE}/payments/${parent.id}`).set(auth());
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('wu_rest_payment_in_use');
      expect((await ctx.http.get(`${BASE}/payments/${parent.id}`).set(auth())).status).toBe(200);
      const del = await ctx.http.delete(`${BASE}/payment/${child.id}`).set(auth());
      expect(del.status).toBe(200);
      expect(del.body).toBe(true);
      expect((await ctx.http.delete(`${BASE}/payments/${parent.id}`).set(auth())).body).toBe(true);
      const again = await ctx.http.delete(`${BASE}/payments/${parent.id}`).set(auth());
      expect(again.status).toBe(404);
      expect(again.body.code).toBe('wu_rest_payment_invalid_id');
    });

    test('the customer or membership of a payment cannot be deleted (409)', async () => {
      const c = await newCustomer();
      const m = await newMembership(c);
      await create({ customer_id: c, membership_id: m });
      const mDel = await ctx.http.delete(`${BASE}/memberships/${m}`).set(auth());
      expect(mDel.status).toBe(409);
      expect(mDel.body.code).toBe('wu_rest_membership_in_use');
      expect((await ctx.http.delete(`${BASE}/customers/${c}`).set(auth())).status).toBe(409);
    });
  });

  describe('invoice numbers', () => {
    test('completed on create or on update gets the next number; once given it never changes', async () => {
      const start = await counter();
      const a = await create({ status: 'completed' });
      expect(a.invoice_number).toBe(start + 1);
      const b = await create();
      expect(b.invoice_number).toBeNull();
      const bDone = await ctx.http.put(`${BASE}/payments/${b.id}`).set(auth()).send({ status: 'completed' });
      expect(bDone.body.invoice_number).toBe(start + 2);
      const again = await ctx.http.put(`${BASE}/payments/${b.id}`).set(auth()).send({ status: 'completed', gateway: 'x' });
      expect(again.body.invoice_number).toBe(start + 2);
      await ctx.http.put(`${BASE}/payments/${b.id}`).set(auth()).send({ status: 'refunded' });
      const back = await ctx.http.put(`${BASE}/payments/${b.id}`).set(auth()).send({ status: 'completed' });
      expect(back.body.invoice_number).toBe(start + 2);
      for (const status of ['pending', 'failed', 'draft', 'refunded', 'partially-paid', 'partially-refunded', 'cancelled']) {
        expect((await create({ status })).invoice_number).toBeNull();
      }
      expect(await counter()).toBe(start + 2);
    });

    test('20 concurrent completions (creates and updates): sequential, gapless, no duplicates', async () => {
      const start = await counter();
      const pending = await Promise.all(Array.from({ length: 10 }, () => create()));
      const results = await Promise.all([
        ...pending.map((p) => ctx.http.put(`${BASE}/payments/${p.id}`).set(auth()).send({ status: 'completed' })),
        ...Array.from({ length: 10 }, () => ctx.http.post(`${BASE}/payments`).set(auth()).send({ customer_id: customerId, status: 'completed', total: 1 })),
      ]);
      expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
      const numbers = results.map((r) => r.body.invoice_number as number).sort((x, y) => x - y);
      expect(numbers).toEqual(Array.from({ length: 20 }, (_, i) => start + 1 + i));
      expect(await counter()).toBe(start + 20);
      const dbNumbers = (await ctx.db('payments').whereNotNull('invoice_number').orderBy('invoice_number').pluck('invoice_number')).map(Number);
      expect(new Set(dbNumbers).size).toBe(dbNumbers.length);
      expect(dbNumbers).toEqual(Array.from({ length: dbNumbers.length }, (_, i) => i + 1));
    });

    test('a refused completion gives its number back', async () => {
      const start = await counter();
      const p = await create();
      const res = await ctx.http.put(`${BASE}/payments/${p.id}`).set(auth()).send({ status: 'completed', product_id: 999999 });
      expect(res.status).toBe(400);
      expect(await counter()).toBe(start);
      expect((await ctx.http.put(`${BASE}/payments/${p.id}`).set(auth()).send({ status: 'completed' })).body.invoice_number).toBe(start + 1);
    });
  });

  describe('list', () => {
    let c: number;
    let m: number;
    let product: number;
    let ids: number[];
    let invoices: (number | null)[];
    const get = (query: Record<string, unknown> | string) => ctx.http.get(`${BASE}/payments`).set(auth()).query(query);
    const idsOf = (body: { id: number }[]) => body.map((p) => p.id);

    beforeAll(async () => {
      c = await newCustomer();
      m = await newMembership(c);
      product = await newProduct({ type: 'service' });
      const specs = [
        { status: 'completed', total: 30, gateway: 'stripe', gateway_payment_id: 'pi_LIST_a', membership_id: m, currency: 'EUR' },
        { status: 'pending', total: 10, gateway: 'paypal', gateway_payment_id: 'PAYID-LIST-b', product_id: product },
        { status: 'completed', total: 20, gateway: 'stripe', gateway_payment_id: 'pi_LIST_c', membership_id: m },
        { status: 'failed', total: 5, gateway: 'manual' },
        { status: 'completed', total: 40, gateway: 'stripe', membership_id: m, product_id: product },
      ];
      ids = [];
      invoices = [];
      for (const s of specs) {
        const p = await create({ customer_id: c, ...s });
        ids.push(p.id);
        invoices.push(p.invoice_number);
      }
    });

    test('filter by customer_id: newest first, paging headers', async () => {
      const res = await get({ customer_id: c, per_page: 2 });
      expect(res.status).toBe(200);
      expect(idsOf(res.body)).toEqual([ids[4], ids[3]]);
      expect(res.headers['x-wp-total']).toBe('5');
      expect(res.headers['x-wp-totalpages']).toBe('3');
      expect(res.headers.link).toMatch(/rel="next"/);
      const p2 = await get({ customer_id: c, per_page: 2, page: 2 });
      expect(idsOf(p2.body)).toEqual([ids[2], ids[1]]);
      expect(p2.headers.link).toMatch(/rel="prev"/);
      expect((await get({ customer_id: c, page: 2 })).body).toEqual([]);
    });

    test('exact filters: status, membership_id, product_id, gateway, currency, invoice_number, __in', async () => {
      expect(idsOf((await get({ customer_id: c, status: 'completed' })).body)).toEqual([ids[4], ids[2], ids[0]]);
      expect(idsOf((await get({ membership_id: m })).body)).toEqual([ids[4], ids[2], ids[0]]);
      expect(idsOf((await get({ product_id: product })).body)).toEqual([ids[4], ids[1]]);
      expect(idsOf((await get({ customer_id: c, gateway: 'paypal' })).body)).toEqual([ids[1]]);
      expect(idsOf((await get({ customer_id: c, currency: 'EUR' })).body)).toEqual([ids[0]]);
      expect(idsOf((await get({ invoice_number: invoices[2] })).body)).toEqual([ids[2]]);
      expect(idsOf((await get({ customer_id: c, status__in: 'failed,pending' })).body)).toEqual([ids[3], ids[1]]);
    });

    test('orderby total, invoice_number; order asc', async () => {
      expect(idsOf((await get({ customer_id: c, orderby: 'total', order: 'asc' })).body)).toEqual([ids[3], ids[1], ids[2], ids[0], ids[4]]);
      expect(idsOf((await get({ customer_id: c, status: 'completed', orderby: 'invoice_number', order: 'asc' })).body)).toEqual([ids[0], ids[2], ids[4]]);
    });

    test('search covers gateway_payment_id and gateway', async () => {
      expect(idsOf((await get({ search: 'pi_list' })).body)).toEqual([ids[2], ids[0]]);
      expect(idsOf((await get({ search: 'payid-list' })).body)).toEqual([ids[1]]);
      expect(idsOf((await get({ customer_id: c, search: 'manu' })).body)).toEqual([ids[3]]);
      expect((await get({ search: 'pi_%' })).body).toEqual([]);
    });

    test.each([
      [{ status: 'paid' }, 'status', expect.stringContaining('status must be one of pending, completed')],
      [{ invoice_number: 'INV-1' }, 'invoice_number', 'invoice_number must be of type integer.'],
      [{ membership_id: 'x' }, 'membership_id', 'membership_id must be of type integer.'],
      [{ orderby: 'gateway' }, 'orderby', 'orderby is not one of id, total, status, invoice_number, date_created, date_modified, and customer_id.'],
      [{ subtotal: '1' }, 'subtotal', 'subtotal is not a valid parameter.'],
      [{ page: 0 }, 'page', 'page must be greater than or equal to 1'],
    ])('bad list parameter %o is 400 naming %s', async (query, name, message) => {
      const res = await get(query);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(res.body.data.params[name]).toEqual(message);
    });

    test('the singular path lists too', async () => {
      const res = await ctx.http.get(`${BASE}/payment`).set(auth()).query({ customer_id: c });
      expect(idsOf(res.body)).toEqual([...ids].reverse());
    });
  });
});
