import { BASE, createTestContext, newCustomerBody, type TestContext } from './helpers';

/** Amounts hold no more decimals than their currency's minor unit: USD 2, JPY 0, KWD 3. */
describe("amounts in their currency's minor unit", () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  let customerId: number;
  let planId: number;
  let n = 0;

  beforeAll(async () => {
    ctx = await createTestContext();
    customerId = (await ctx.http.post(`${BASE}/customers`).set(auth()).send(newCustomerBody())).body.id;
    planId = (await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: 'minor-plan', name: 'Minor plan', amount: 29, type: 'plan' })).body.id;
  });
  afterAll(() => ctx.close());

  const resources = {
    products: { body: () => ({ slug: `minor-${++n}`, name: `Minor ${n}`, type: 'plan' }), amounts: ['amount', 'setup_fee'] },
    memberships: { body: () => ({ customer_id: customerId, plan_id: planId }), amounts: ['amount', 'initial_amount'] },
    payments: { body: () => ({ customer_id: customerId }), amounts: ['subtotal', 'discount_total', 'tax_total', 'total'] },
  } as const;

  describe.each(Object.keys(resources) as (keyof typeof resources)[])('%s', (plural) => {
    const { body, amounts } = resources[plural];
    const count = async () => Number((await ctx.db(plural).count({ n: '*' }))[0].n);

    test.each(amounts)('%s: 290.005 USD, 1.5 JPY and 1.0001 KWD are 400s naming it; 290.01 USD, 1500 JPY and 1.125 KWD are taken', async (field) => {
      const before = await count();
      for (const [currency, value, digits] of [
        ['USD', '290.005', 2],
        ['usd', 290.005, 2],
        ['JPY', '1.5', 0],
        ['KWD', '1.0001', 3],
      ] as const) {
        const res = await ctx.http.post(`${BASE}/${plural}`).set(auth()).send({ ...body(), currency, [field]: value });
        expect(res.status).toBe(400);
        expect(res.body.code).toBe('wu_rest_invalid_parameter');
        expect(res.body.data.params[field]).toBe(`must have at most ${digits} decimal places in ${currency.toUpperCase()}.`);
      }
      // No currency given: the default, USD.
      expect((await ctx.http.post(`${BASE}/${plural}`).set(auth()).send({ ...body(), [field]: '0.001' })).body.data.params[field]).toBe('must have at most 2 decimal places in USD.');
      expect(await count()).toBe(before);
      for (const [currency, value] of [
        ['USD', '290.01'],
        ['JPY', 1500],
        ['KWD', '1.125'],
        ['USD', '290.0100'],
      ] as const) {
        const res = await ctx.http.post(`${BASE}/${plural}`).set(auth()).send({ ...body(), currency, [field]: value });
        expect(res.status).toBe(200);
        expect(res.body[field]).toBe(Number(value));
      }
    });

    test('an update checks against the currency it writes, or the one stored; changing the currency checks the amounts it keeps', async () => {
      const field = amounts[0];
      const created = await ctx.http.post(`${BASE}/${plural}`).set(auth()).send({ ...body(), currency: 'KWD', [field]: '10.125' });
      expect(created.status).toBe(200);
      const id = created.body.id as number;
      expect((await ctx.http.patch(`${BASE}/${plural}/${id}`).set(auth()).send({ [field]: '10.1255' })).body.data.params[field]).toBe('must have at most 3 decimal places in KWD.');
      const toUsd = await ctx.http.patch(`${BASE}/${plural}/${id}`).set(auth()).send({ currency: 'USD' });
      expect(toUsd.status).toBe(400);
      expect(toUsd.body.data.params[field]).toBe('10.125 has more decimals than USD (2): give it again with the currency.');
      expect(await ctx.db(plural).where({ id }).first('currency')).toEqual({ currency: 'KWD' });
      // Every amount the record keeps must fit the new currency (a payment's total was made from its subtotal).
      const all = Object.fromEntries(amounts.map((a) => [a, '10.13']));
      const both = await ctx.http.patch(`${BASE}/${plural}/${id}`).set(auth()).send({ currency: 'USD', ...all });
      expect(both.status).toBe(200);
      expect(both.body).toMatchObject({ currency: 'USD', [field]: 10.13 });
    });
  });
});
