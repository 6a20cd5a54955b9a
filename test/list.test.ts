import type { ApiError } from '../src/http/errors';
import { parseListQuery } from '../src/http/list';
import { BASE, createTestContext, type TestContext } from './helpers';

/**
 * The shared list machinery, exercised through the customers list. 25 customers seeded
 * straight into the database: ids 1..25, created one day apart from 2026-01-01.
 */
describe('list parameters', () => {
  let ctx: TestContext;
  const get = (query: Record<string, unknown> | string) => ctx.http.get(`${BASE}/customers`).set('Authorization', ctx.basic).query(query);

  beforeAll(async () => {
    ctx = await createTestContext();
    for (let i = 1; i <= 25; i++) {
      const day = new Date(Date.UTC(2026, 0, i));
      const [u] = await ctx.db('users')
        .insert({ username: `member${String(i).padStart(2, '0')}`, email: `m${i}@${i % 2 ? 'odd' : 'even'}.example`, password_hash: 'x', display_name: i === 7 ? 'Lucky Seven' : `Member ${i}` })
        .returning('id');
      await ctx.db('customers').insert({
        user_id: u.id,
        vip: i % 5 === 0,
        email_verification: i <= 10 ? 'verified' : i <= 20 ? 'pending' : 'none',
        date_created: day,
        date_registered: day,
      });
    }
  });
  afterAll(() => ctx.close());

  const ids = (body: { id: number }[]) => body.map((c) => c.id);

  test('defaults: 20 per page, newest id first, X-WP-Total and X-WP-TotalPages', async () => {
    const res = await get({});
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body)).toBe(true);
    expect(ids(res.body)).toEqual(Array.from({ length: 20 }, (_, i) => 25 - i));
    expect(res.headers['x-wp-total']).toBe('25');
    expect(res.headers['x-wp-totalpages']).toBe('2');
    expect(res.headers.link).toMatch(/rel="next"/);
    expect(res.headers.link).not.toMatch(/rel="prev"/);
  });

  test('per_page and page; a page past the end is []', async () => {
    const p2 = await get({ per_page: 10, page: 2 });
    expect(ids(p2.body)).toEqual([15, 14, 13, 12, 11, 10, 9, 8, 7, 6]);
    expect(p2.headers['x-wp-totalpages']).toBe('3');
    expect(p2.headers.link).toMatch(/page=1>; rel="prev"/);
    expect(p2.headers.link).toMatch(/page=3&cursor=[\w-]+\.[\w-]+>; rel="next"/);
    const past = await get({ per_page: 10, page: 9 });
    expect(past.status).toBe(200);
    expect(past.body).toEqual([]);
    expect(past.headers['x-wp-total']).toBe('25');
  });

  test.each([
    [{ per_page: 0 }, 'per_page', 'per_page must be between 1 (inclusive) and 100 (inclusive)'],
    [{ per_page: 101 }, 'per_page', 'per_page must be between 1 (inclusive) and 100 (inclusive)'],
    [{ per_page: 'ten' }, 'per_page', 'per_page must be between 1 (inclusive) and 100 (inclusive)'],
    [{ page: 0 }, 'page', 'page must be greater than or equal to 1'],
    [{ page: '1.5' }, 'page', 'page must be greater than or equal to 1'],
    [{ order: 'sideways' }, 'order', 'order is not one of asc and desc.'],
    [{ orderby: 'password_hash' }, 'orderby', expect.stringContaining('orderby is not one of id, ')],
    [{ vip: 'perhaps' }, 'vip', 'vip must be of type boolean.'],
    [{ email_verification: 'maybe' }, 'email_verification', 'email_verification must be one of none, pending, and verified.'],
    [{ user_id: 'x' }, 'user_id', 'user_id must be of type integer.'],
    [{ unknown_column: '1' }, 'unknown_column', 'unknown_column is not a valid parameter.'],
    [{ 'date_created[after]': 'yesterday' }, 'date_created[after]', expect.stringContaining('is not a valid date')],
    [{ date_created: '2026-01-01' }, 'date_created', expect.stringContaining('is a range')],
  ])('bad %o is 400 naming %s', async (query, name, message) => {
    const res = await get(query);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(res.body.data.params[name]).toEqual(message);
  });

  test.each([
    ['products', '=x', ''],
    ['customers', '%0A=1', '\\u000a'],
    ['customers', 'per_page=5&%0D%0A=1', '\\u000d\\u000a'],
    ['memberships', '=', ''],
  ])('an empty or line-break parameter name on /%s?%s is 400 naming it (it was a 500)', async (resource, query, name) => {
    const res = await ctx.http.get(`${BASE}/${resource}?${query}`).set('Authorization', ctx.basic);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('wu_rest_invalid_parameter');
    expect(Object.keys(res.body.data.params)).toEqual([name]);
  });

  test('the list parser itself names odd keys, and never takes an inherited property for a filter or a sort column', () => {
    const spec = { idColumn: 'c.id', dateCreatedColumn: 'c.date_created', searchable: [], sortable: { id: 'c.id' }, filters: {} };
    const refused = (query: Record<string, unknown>) => {
      try {
        parseListQuery(query, spec);
      } catch (err) {
        return (err as ApiError).extra.params;
      }
      throw new Error('accepted');
    };
    expect(refused({ '': 'x' })).toEqual({ '': 'A query parameter has an empty name (as in "?=x"): remove it.' });
    expect(refused({ '\n__in': '1' })).toEqual({ '\\u000a__in': '\\u000a__in is not a valid parameter.' });
    expect(refused({ constructor: '1' })).toEqual({ constructor: 'constructor is not a valid parameter.' });
    expect(refused({ orderby: 'toString' })).toEqual({ orderby: 'orderby is not one of id.' });
  });

  test('every bad parameter is reported at once', async () => {
    const res = await get({ per_page: 0, page: -1, order: 'up', orderby: 'nope' });
    expect(Object.keys(res.body.data.params).sort()).toEqual(['order', 'orderby', 'page', 'per_page']);
  });

  test('orderby and order', async () => {
    const asc = await get({ orderby: 'username', order: 'asc', per_page: 3 });
    expect(asc.body.map((c: { username: string }) => c.username)).toEqual(['member01', 'member02', 'member03']);
    const byDate = await get({ orderby: 'date_created', order: 'desc', per_page: 2 });
    expect(ids(byDate.body)).toEqual([25, 24]);
    const idAsc = await get({ order: 'ASC', per_page: 2 });
    expect(ids(idAsc.body)).toEqual([1, 2]);
  });

  test('search covers username, email and display name, and escapes LIKE wildcards', async () => {
    expect(ids((await get({ search: 'member1' })).body)).toEqual([19, 18, 17, 16, 15, 14, 13, 12, 11, 10]);
    expect(ids((await get({ search: 'LUCKY' })).body)).toEqual([7]);
    const odd = await get({ search: '@odd.', per_page: 100 });
    expect(odd.body).toHaveLength(13);
    expect(odd.headers['x-wp-total']).toBe('13');
    expect((await get({ search: '%' })).body).toEqual([]);
    expect((await get({ search: 'member_1' })).body).toEqual([]);
  });

  test('exact filters, combined with paging totals', async () => {
    const vip = await get({ vip: 'true' });
    expect(ids(vip.body)).toEqual([25, 20, 15, 10, 5]);
    expect(vip.headers['x-wp-total']).toBe('5');
    const pending = await get({ email_verification: 'pending', vip: 1 });
    expect(ids(pending.body)).toEqual([20, 15]);
    expect(ids((await get({ id: 3 })).body)).toEqual([3]);
  });

  test('__in and __not_in, as repeated [] keys or comma lists', async () => {
    expect(ids((await get('id__in[]=3&id__in[]=5&id__in[]=7')).body)).toEqual([7, 5, 3]);
    expect(ids((await get({ id__in: '1,2' })).body)).toEqual([2, 1]);
    const notIn = await get({ email_verification__not_in: 'verified,pending' });
    expect(ids(notIn.body)).toEqual([25, 24, 23, 22, 21]);
    const bad = await get({ id__in: '1,x' });
    expect(bad.status).toBe(400);
    expect(bad.body.data.params.id__in).toBe('id__in must be a list of values each of type integer.');
  });

  test('date_created range, and the original date_created_query form', async () => {
    const range = await get({ 'date_created[after]': '2026-01-20', 'date_created[before]': '2026-01-22T23:59:59Z' });
    expect(ids(range.body)).toEqual([22, 21, 20]);
    const legacy = await get({ 'date_created_query[after]': '2026-01-24 00:00:00' });
    expect(ids(legacy.body)).toEqual([25, 24]);
    const inverted = await get({ 'date_created[after]': '2026-02-01', 'date_created[before]': '2026-01-01' });
    expect(inverted.status).toBe(400);
  });

  test("WordPress' underscore parameters and context are ignored", async () => {
    const res = await get({ _locale: 'user', _fields: 'id', context: 'view', per_page: 1 });
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
  });

  test('the common list queries have indexes to use (plans with sequential scans disabled)', async () => {
    const plan = (sql: string) =>
      ctx.db.transaction(async (trx) => {
        await trx.raw('SET LOCAL enable_seqscan = off');
        const r = await trx.raw(`EXPLAIN ${sql}`);
        return r.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
      });
    expect(await plan('SELECT c.id FROM customers c ORDER BY c.id DESC LIMIT 20')).toMatch(/Scan Backward using customers_pkey/);
    expect(await plan("SELECT c.id FROM customers c WHERE c.email_verification = 'pending' ORDER BY c.id DESC LIMIT 20")).toMatch(
      /customers_email_verification_idx/,
    );
    // Search: one trigram index per searched table, over the column the list searches, its
    // search_doc (what the planner picks on 25 rows says little).
    const trigram: string[] = await ctx.db('pg_indexes').where('indexdef', 'like', '%gin_trgm_ops%').pluck('indexdef');
    for (const table of ['users', 'memberships', 'payments', 'sites']) {
      expect(trigram.find((d) => d.includes(` ON public.${table} USING gin (`))).toBe(`CREATE INDEX ${table}_search_doc_trgm ON public.${table} USING gin (search_doc gin_trgm_ops)`);
    }
    expect(await plan("SELECT id FROM users WHERE search_doc LIKE lower('%EMBER1%')")).toMatch(/users_search_doc_trgm/);
    expect(await plan("SELECT c.id FROM customers c WHERE c.date_created >= '2026-01-01' ORDER BY c.date_created LIMIT 20")).toMatch(
      /customers_date_created_idx/,
    );
  });
});
