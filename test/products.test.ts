import { createProductService } from '../src/products/service';
import { BASE, createTestContext, statementsAndTrips, type TestContext } from './helpers';

describe('products', () => {
  let ctx: TestContext;
  const auth = () => ({ Authorization: ctx.basic });
  let n = 0;
  const body = (extra: Record<string, unknown> = {}) => ({ slug: `plan-${++n}`, name: `Plan ${n}`, amount: 29.99, ...extra });
  const count = async () => Number((await ctx.db('products').count({ n: '*' }))[0].n);

  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  test('create with defaults: every field with its JSON type; money exact', async () => {
    const res = await ctx.http.post(`${BASE}/products`).set(auth()).send(body({ amount: '19.99', setup_fee: 0.1 }));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      model: 'product',
      name: expect.stringMatching(/^Plan /),
      description: '',
      currency: 'USD',
      pricing_type: 'paid',
      amount: 19.99,
      setup_fee: 0.1,
      recurring: true,
      duration: 1,
      duration_unit: 'month',
      trial_duration: 0,
      trial_duration_unit: 'day',
      billing_cycles: 0,
      active: true,
      type: 'plan',
      list_order: 10,
    });
    expect(typeof res.body.id).toBe('number');
    const row = await ctx.db('products').where({ id: res.body.id }).first();
    expect(row.amount).toBe('19.9900');
    expect(row.setup_fee).toBe('0.1000');
  });

  test('free and contact_us force amount and setup fee to 0, on create and on update', async () => {
    const free = await ctx.http.post(`${BASE}/products`).set(auth()).send(body({ pricing_type: 'free', amount: 50, setup_fee: 5 }));
    expect(free.body).toMatchObject({ amount: 0, setup_fee: 0 });
    const paid = (await ctx.http.post(`${BASE}/products`).set(auth()).send(body({ amount: 12 }))).body;
    const contact = await ctx.http.put(`${BASE}/products/${paid.id}`).set(auth()).send({ pricing_type: 'contact_us' });
    expect(contact.body).toMatchObject({ pricing_type: 'contact_us', amount: 0 });
    const stillZero = await ctx.http.patch(`${BASE}/products/${paid.id}`).set(auth()).send({ amount: 99 });
    expect(stillZero.body.amount).toBe(0);
  });

  test('slug is unique: 400 naming slug on create and on update', async () => {
    const a = (await ctx.http.post(`${BASE}/products`).set(auth()).send(body())).body;
    const before = await count();
    const dup = await ctx.http.post(`${BASE}/products`).set(auth()).send(body({ slug: a.slug }));
    expect(dup.status).toBe(400);
    expect(dup.body.data.params.slug).toBe('slug is already used by another product.');
    expect(await count()).toBe(before);
    const b = (await ctx.http.post(`${BASE}/products`).set(auth()).send(body())).body;
    const upd = await ctx.http.put(`${BASE}/products/${b.id}`).set(auth()).send({ slug: a.slug });
    expect(upd.status).toBe(400);
    expect(upd.body.data.params.slug).toBeDefined();
  });

  test.each([
    [{ slug: 'Not A Slug' }, 'slug'],
    [{ name: '' }, 'name'],
    [{ currency: 'usd1' }, 'currency'],
    [{ currency: 'XYZ' }, 'currency'],
    [{ pricing_type: 'cheap' }, 'pricing_type'],
    [{ type: 'bundle' }, 'type'],
    [{ duration_unit: 'fortnight' }, 'duration_unit'],
    [{ amount: -1 }, 'amount'],
    [{ amount: '1.23456' }, 'amount'],
    [{ amount: 'abc' }, 'amount'],
    [{ setup_fee: true }, 'setup_fee'],
    [{ duration: 0 }, 'duration'],
    [{ duration: 1.5 }, 'duration'],
    [{ active: 'sometimes' }, 'active'],
    [{ colour: 'red' }, 'colour'],
  ])('create with bad %o is 400 naming %s, nothing created', async (patch, name) => {
    const before = await count();
    const res = await ctx.http.post(`${BASE}/products`).set(auth()).send(body(patch));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(Object.keys(res.body.data.params)).toEqual([name]);
    expect(await count()).toBe(before);
  });

  test('enumeration errors name the allowed values', async () => {
    const res = await ctx.http.post(`${BASE}/products`).set(auth()).send(body({ pricing_type: 'cheap' }));
    expect(res.body.data.params.pricing_type).toBe('pricing_type is not one of free, paid, contact_us, and pay_what_you_want.');
    const cur = await ctx.http.post(`${BASE}/products`).set(auth()).send(body({ currency: 'XYZ' }));
    expect(cur.body.data.params.currency).toMatch(/ISO 4217/);
  });

  test('slug and name are required on create', async () => {
    const res = await ctx.http.post(`${BASE}/products`).set(auth()).send({ amount: 5 });
    expect(res.status).toBe(400);
    expect(res.body.data.params).toEqual({ slug: 'slug is required.', name: 'name is required.' });
  });

  test('currency is normalised to upper case, and filtered case-insensitively', async () => {
    const res = await ctx.http.post(`${BASE}/products`).set(auth()).send(body({ currency: 'eur' }));
    expect(res.body.currency).toBe('EUR');
    const list = await ctx.http.get(`${BASE}/products`).set(auth()).query({ currency: 'eur' });
    expect(list.body.map((p: { id: number }) => p.id)).toEqual([res.body.id]);
  });

  test('get, update (PUT/PATCH/POST), delete on plural and singular paths; unknown ids', async () => {
    const p = (await ctx.http.post(`${BASE}/product`).set(auth()).send(body())).body;
    expect((await ctx.http.get(`${BASE}/product/${p.id}`).set(auth())).body).toEqual(p);
    const post = await ctx.http.post(`${BASE}/products/${p.id}`).set(auth()).send({ name: 'Renamed', list_order: 1 });
    expect(post.body).toMatchObject({ name: 'Renamed', list_order: 1 });
    const noop = await ctx.http.patch(`${BASE}/product/${p.id}`).set(auth()).send({});
    expect(noop.status).toBe(200);
    expect(noop.body).toEqual(post.body);
    const bad = await ctx.http.put(`${BASE}/products/${p.id}`).set(auth()).send({ id: 9, price: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('wu_rest_product_invalid_set_method');
    const del = await ctx.http.delete(`${BASE}/products/${p.id}`).set(auth());
    expect(del.body).toBe(true);
    for (const method of ['get', 'put', 'delete'] as const) {
      const res = await ctx.http[method](`${BASE}/products/${p.id}`).set(auth()).send({ name: 'x' });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('wu_rest_product_invalid_id');
    }
  });

  test('a create is its one insert, without BEGIN or COMMIT; an update is two round trips, its COMMIT carried by the update; a refused one keeps nothing', async () => {
    const products = createProductService(ctx.db);
    const run = (fn: () => Promise<unknown>) => statementsAndTrips(ctx.db, fn);
    let id = 0;
    // A service's first write reads its table's columns (once, in that write's transaction: tableColumns).
    const first = await run(() => products.create(body()));
    expect(first).toEqual({ sql: ['BEGIN;', expect.stringMatching(/^select attname as name from pg_attribute /), expect.stringMatching(/^insert into "products" /), 'COMMIT;'], trips: 2 });
    const created = await run(async () => {
      id = Number((await products.create(body())).id);
    });
    expect(created).toEqual({ sql: [expect.stringMatching(/^insert into "products" .* returning "id", "slug", /)], trips: 1 });
    const updated = await run(() => products.update(id, { name: 'Renamed in two trips' }));
    expect(updated.sql).toEqual(['BEGIN;', expect.stringMatching(/^select "id", "slug", .* from "products" .* for update$/), expect.stringMatching(/^update "products" set/), 'COMMIT;']);
    expect(updated.trips).toBe(2);
    expect((await ctx.db('products').where({ id }).first()).name).toBe('Renamed in two trips');
    // A taken slug: the insert fails on its own, nothing is kept, no transaction is left open.
    const before = await count();
    await expect(products.create(body({ slug: (await ctx.db('products').where({ id }).first()).slug }))).rejects.toMatchObject({ kind: 'invalid', message: expect.stringContaining('slug') });
    expect(await count()).toBe(before);
    const open = await ctx.db.raw("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'");
    expect(open.rows[0].n).toBe(0);
  });

  test('deleting a product a membership uses is refused with 409 and changes nothing', async () => {
    const p = (await ctx.http.post(`${BASE}/products`).set(auth()).send(body())).body;
    const [u] = await ctx.db('users').insert({ username: `pu${p.id}`, email: `pu${p.id}@example.com`, password_hash: 'x' }).returning('id');
    const [c] = await ctx.db('customers').insert({ user_id: u.id }).returning('id');
    await ctx.db('memberships').insert({ customer_id: c.id, plan_id: p.id });
    const res = await ctx.http.delete(`${BASE}/products/${p.id}`).set(auth());
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('wu_rest_product_in_use');
    expect(res.body.data.referenced_by).toBe('memberships');
    expect((await ctx.http.get(`${BASE}/products/${p.id}`).set(auth())).status).toBe(200);
  });

  test('list: filters, search, orderby, paging headers', async () => {
    await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: 'addon-backup', name: 'Nightly Backup', type: 'service', amount: 5 });
    await ctx.http.post(`${BASE}/products`).set(auth()).send({ slug: 'pkg-seo', name: 'SEO Pack', type: 'package', amount: 7, active: false });
    const services = await ctx.http.get(`${BASE}/products`).set(auth()).query({ type: 'service' });
    expect(services.body.map((p: { slug: string }) => p.slug)).toEqual(['addon-backup']);
    const search = await ctx.http.get(`${BASE}/products`).set(auth()).query({ search: 'backup' });
    expect(search.body.map((p: { slug: string }) => p.slug)).toEqual(['addon-backup']);
    const inactive = await ctx.http.get(`${BASE}/products`).set(auth()).query({ active: false });
    expect(inactive.body.map((p: { slug: string }) => p.slug)).toEqual(['pkg-seo']);
    const cheap = await ctx.http.get(`${BASE}/products`).set(auth()).query({ orderby: 'amount', order: 'asc', per_page: 2 });
    expect(cheap.body.map((p: { amount: number }) => p.amount)).toEqual([0, 0]);
    expect(Number(cheap.headers['x-wp-total'])).toBeGreaterThan(2);
    const bad = await ctx.http.get(`${BASE}/products`).set(auth()).query({ type: 'bundle', orderby: 'price' });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.data.params).sort()).toEqual(['orderby', 'type']);
  });
});
