import { BASE, createTestContext, type TestContext } from './helpers';
import { expectGetOnBothPaths, expectUnknownIds } from './resource-helpers';

/** Issue 21: the discount codes resource, its fields and every validation rule of the original. */
describe('discount codes', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  let n = 0;
  const body = (extra: Record<string, unknown> = {}) => ({ name: `Promo ${++n}`, code: `PROMO${n}`, ...extra });
  const create = (b: Record<string, unknown>) => ctx.http.post(`${BASE}/discount-codes`).set(auth()).send(b);
  const count = async () => Number((await ctx.db('discount_codes').count({ n: '*' }))[0].n);
  let productId: number;

  beforeAll(async () => {
    ctx = await createTestContext();
    const p = await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: 'dc-plan', name: 'DC plan', amount: 10 });
    productId = p.body.id;
  });
  afterAll(() => ctx.close());

  test('create with defaults: every field with its JSON type; value exact; both paths answer it', async () => {
    const res = await create(body({ value: '12.5' }));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: 'discount_code',
      description: '',
      value: 12.5,
      type: 'percentage',
      setup_fee_value: 0,
      setup_fee_type: 'percentage',
      apply_to_renewals: false,
      active: true,
      max_uses: 0,
      uses: 0,
      date_start: null,
      date_expiration: null,
      allowed_products: [],
      limit_products: false,
    });
    expect((await ctx.db('discount_codes').where({ id: res.body.id }).first()).value).toBe('12.5000');
    const { _links, ...record } = res.body;
    expect(_links.self[0].href).toMatch(/\/discount-codes\/\d+$/);
    await expectGetOnBothPaths(ctx, { plural: 'discount-codes', singular: 'discount_code' }, res.body);
    expect(record.code).toBe(`PROMO${n}`);
  });

  test('the singular path of the original creates, updates and deletes too; unknown ids are 404 wu_rest_discount_code_invalid_id', async () => {
    const res = await ctx.http.post(`${BASE}/discount_code`).set(auth()).send(body({ type: 'absolute', value: 5 }));
    expect(res.status).toBe(200);
    const upd = await ctx.http.patch(`${BASE}/discount_code/${res.body.id}`).set(auth()).send({ active: false, description: 'off' });
    expect(upd.body).toMatchObject({ active: false, description: 'off', type: 'absolute', value: 5 });
    expect((await ctx.http.delete(`${BASE}/discount_code/${res.body.id}`).set(auth())).body).toBe(true);
    await expectUnknownIds(ctx, { plural: 'discount-codes', singular: 'discount_code' }, 'discount_code');
  });

  test('code: 2 to 20 letters, digits, - and _; anything else is a 400 naming code, and nothing is created', async () => {
    const before = await count();
    for (const code of ['A', 'x'.repeat(21), 'has space', 'bad!', 'é-code', '']) {
      const res = await create(body({ code }));
      expect({ code, status: res.status, body: res.body }).toMatchObject({ status: 400, body: { code: 'wu_rest_invalid_parameter', data: { params: { code: expect.stringContaining('2 to 20 characters') } } } });
    }
    expect(await count()).toBe(before);
    for (const code of ['AB', 'x'.repeat(20), 'Summer_2026-b']) expect((await create(body({ code }))).status).toBe(200);
  });

  test('code is unique without regard to case, on create and on update', async () => {
    expect((await create(body({ code: 'Unique-1' }))).status).toBe(200);
    const dup = await create(body({ code: 'uNIQUE-1' }));
    expect(dup.status).toBe(400);
    expect(dup.body.data.params).toEqual({ code: expect.stringContaining('already used by another discount code') });
    const other = await create(body({ code: 'Unique-2' }));
    const upd = await ctx.http.put(`${BASE}/discount-codes/${other.body.id}`).set(auth()).send({ code: 'UNIQUE-1' });
    expect(upd.status).toBe(400);
    expect(upd.body.data.params).toHaveProperty('code');
    // Its own code in another case is fine.
    expect((await ctx.http.put(`${BASE}/discount-codes/${other.body.id}`).set(auth()).send({ code: 'unique-2' })).body.code).toBe('unique-2');
  });

  test('value: a non-negative decimal (at most 4 places), at most 100 as a percentage; the same for setup_fee_value', async () => {
    for (const value of [-1, 'abc', '1.23456']) {
      const res = await create(body({ value }));
      expect({ value, status: res.status, params: Object.keys(res.body.data?.params ?? {}) }).toEqual({ value, status: 400, params: ['value'] });
    }
    const pct = await create(body({ value: '100.01' }));
    expect(pct.status).toBe(400);
    expect(pct.body.data.params).toEqual({ value: 'value is a percentage (type percentage): at most 100.' });
    expect((await create(body({ setup_fee_value: 101 }))).body.data.params).toEqual({ setup_fee_value: 'setup_fee_value is a percentage (setup_fee_type percentage): at most 100.' });
    expect((await create(body({ value: 100, setup_fee_value: 100 }))).status).toBe(200);
    // An absolute amount may be more than 100.
    const abs = await create(body({ type: 'absolute', value: '250.75', setup_fee_type: 'absolute', setup_fee_value: 500 }));
    expect(abs.body).toMatchObject({ value: 250.75, setup_fee_value: 500 });
    // Switching it to a percentage keeps the rule against the stored value.
    const sw = await ctx.http.patch(`${BASE}/discount-codes/${abs.body.id}`).set(auth()).send({ type: 'percentage' });
    expect(sw.status).toBe(400);
    expect(sw.body.data.params.value).toMatch(/more than 100/);
    expect((await ctx.http.patch(`${BASE}/discount-codes/${abs.body.id}`).set(auth()).send({ type: 'percentage', value: 20 })).body).toMatchObject({ type: 'percentage', value: 20 });
    expect((await create(body({ type: 'fixed' }))).body.data.params).toHaveProperty('type');
  });

  test('date_expiration must be after date_start, on create and on update', async () => {
    const bad = await create(body({ date_start: '2026-05-01T00:00:00Z', date_expiration: '2026-05-01T00:00:00Z' }));
    expect(bad.status).toBe(400);
    expect(bad.body.data.params).toEqual({ date_expiration: 'date_expiration must be after date_start.' });
    const ok = await create(body({ date_start: '2026-05-01', date_expiration: '2026-06-01T12:00:00Z' }));
    expect(ok.body).toMatchObject({ date_start: '2026-05-01T00:00:00.000Z', date_expiration: '2026-06-01T12:00:00.000Z' });
    const upd = await ctx.http.patch(`${BASE}/discount-codes/${ok.body.id}`).set(auth()).send({ date_start: '2026-07-01' });
    expect(upd.status).toBe(400);
    expect(upd.body.data.params).toEqual({ date_start: 'date_expiration must be after date_start.' });
    expect((await create(body({ date_start: 'soon' }))).body.data.params).toHaveProperty('date_start');
  });

  test('allowed_products name existing products, each once; max_uses and uses are non-negative integers', async () => {
    const bad = await create(body({ allowed_products: [productId, 987654], limit_products: true }));
    expect(bad.status).toBe(400);
    expect(bad.body.data.params).toEqual({ allowed_products: 'allowed_products 987654 does not match any product.' });
    expect((await create(body({ allowed_products: [productId, productId] }))).body.data.params).toHaveProperty('allowed_products');
    const ok = await create(body({ allowed_products: [productId], limit_products: true, max_uses: 3 }));
    expect(ok.body).toMatchObject({ allowed_products: [productId], limit_products: true, max_uses: 3, uses: 0 });
    for (const f of ['max_uses', 'uses']) expect(Object.keys((await create(body({ [f]: -1 }))).body.data.params)).toEqual([f]);
  });

  test('list: search, and the code filter without regard to case', async () => {
    await create(body({ code: 'ListMe-XY', name: 'Listed' }));
    const byCode = await ctx.http.get(`${BASE}/discount-codes`).set(auth()).query({ code: 'listme-xy' });
    expect(byCode.body.map((d: { code: string }) => d.code)).toEqual(['ListMe-XY']);
    const search = await ctx.http.get(`${BASE}/discount_code`).set(auth()).query({ search: 'listme' });
    expect(search.body).toHaveLength(1);
    expect(Number(search.headers['x-wp-total'])).toBe(1);
  });
});
