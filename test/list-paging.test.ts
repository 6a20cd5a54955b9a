import { sessionListSpec } from '../src/chat/sessions';
import { customerListSpec } from '../src/customers/service';
import { ESTIMATE_KEPT_MS, runList, type ListSpec } from '../src/db/list';
import { sampleCommonTrigrams } from '../src/db/search-trigrams';
import { domainListSpec } from '../src/domains/service';
import { parseListQuery } from '../src/http/list';
import { membershipListSpec } from '../src/memberships/service';
import { paymentListSpec } from '../src/payments/service';
import { productListSpec } from '../src/products/service';
import { siteListSpec } from '../src/sites/service';
import { jobListSpec } from '../src/translations/jobs';
import { projectListSpec } from '../src/translations/projects';
import { BASE, createTestContext, type TestContext } from './helpers';
import { pagesBothWays } from './link-pages';

/**
 * Paging by keyset cursor (the Link URLs), X-WP-Total's bounds, and the trigger-kept counts.
 * 1,100 customers seeded with one set-based statement: ids 1..1100; every third one is a VIP;
 * last_login is NULL for the ids divisible by 4, else a day that repeats (ties across ids).
 */
describe('list paging at depth and counts', () => {
  let ctx: TestContext;
  const N = 1100;
  const get = (path: string, query: Record<string, unknown> = {}) => ctx.http.get(`${BASE}${path}`).set('Authorization', ctx.basic).query(query);
  const follow = (url: string) => ctx.http.get(url.replace(/^https?:\/\/[^/]+/, '')).set('Authorization', ctx.basic);
  const linkOf = (link: string | undefined, rel: 'next' | 'prev') => new RegExp(`<([^>]+)>; rel="${rel}"`).exec(link ?? '')?.[1];

  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.db.raw(`
      WITH u AS (
        INSERT INTO users (username, email, password_hash, display_name)
        SELECT 'pager' || i, 'pager' || i || '@example.com', 'x', 'Pager ' || (i % 7) FROM generate_series(1, ${N}) i
        RETURNING id)
      INSERT INTO customers (user_id, vip, last_login)
      SELECT id, id % 3 = 0, CASE WHEN id % 4 = 0 THEN NULL ELSE timestamptz '2026-01-01' + (id % 5) * interval '1 day' END FROM u ORDER BY id`);
    await ctx.db.raw('ANALYZE users; ANALYZE customers');
    // The users' trigram sample, taken now: a search would otherwise start one in the background, whose statements could land amid those a test counts.
    await sampleCommonTrigrams(ctx.db, 'users', ['username', 'email', 'display_name'], { force: true });
  });
  afterAll(() => ctx.close());

  /** Every id, page after page through rel="next"; then back through rel="prev". */
  async function walk(query: Record<string, unknown>): Promise<{ forward: number[]; backward: number[]; pages: number }> {
    const forward: number[] = [];
    const pageIds: number[][] = [];
    let res = await get('/customers', { per_page: 100, ...query });
    for (;;) {
      expect(res.status).toBe(200);
      pageIds.push(res.body.map((c: { id: number }) => c.id));
      forward.push(...pageIds[pageIds.length - 1]);
      const next = linkOf(res.headers.link, 'next');
      if (!next) break;
      expect(next).toMatch(/[?&]cursor=/);
      res = await follow(next);
    }
    // Back from the last page to the first, each page equal to the one seen going forward.
    const backward: number[] = [];
    for (let i = pageIds.length - 1; ; i--) {
      const ids = res.body.map((c: { id: number }) => c.id);
      expect(ids).toEqual(pageIds[i]);
      backward.unshift(...ids);
      const prev = linkOf(res.headers.link, 'prev');
      if (!prev) {
        expect(i).toBe(0);
        break;
      }
      res = await follow(prev);
      expect(res.status).toBe(200);
    }
    return { forward, backward, pages: pageIds.length };
  }

  test('following Link rel="next" visits every row once, in order; rel="prev" walks back', async () => {
    const { forward, backward, pages } = await walk({});
    expect(pages).toBe(11);
    expect(forward).toEqual(Array.from({ length: N }, (_, i) => N - i));
    expect(backward).toEqual(forward);
  });

  test.each([
    ['last_login', 'asc'],
    ['last_login', 'desc'],
    ['display_name', 'asc'],
    ['vip', 'desc'],
  ])('orderby=%s order=%s: ties and NULLs, every row once, in the order of the page query', async (orderby, order) => {
    const { forward, backward } = await walk({ orderby, order });
    expect(forward).toHaveLength(N);
    expect(new Set(forward).size).toBe(N);
    expect(backward).toEqual(forward);
    // The same order as one query sorting by the column, then id (NULLs as PostgreSQL sorts them).
    const column = { last_login: 'c.last_login', display_name: 'u.display_name', vip: 'c.vip' }[orderby]!;
    const expected: number[] = await ctx.db('customers as c').join('users as u', 'u.id', 'c.user_id').orderBy(column, order).orderBy('c.id', order).pluck('c.id');
    expect(forward).toEqual(expected.map(Number));
  });

  test('a filter keeps applying along the cursor links', async () => {
    const { forward } = await walk({ vip: true, orderby: 'last_login', order: 'asc' });
    expect(forward).toHaveLength(Math.floor(N / 3));
    expect(forward.every((id) => id % 3 === 0)).toBe(true);
  });

  test('a tampered, foreign or malformed cursor is a 400 naming cursor, and answers no rows', async () => {
    const first = await get('/customers', { per_page: 5, orderby: 'last_login' });
    const next = linkOf(first.headers.link, 'next')!;
    const cursor = new URL(next).searchParams.get('cursor')!;
    const [payload, mac] = cursor.split('.');
    const forged = Buffer.from(JSON.stringify(['last_login', 'desc', '2026-01-02 00:00:00+00', '1', 0])).toString('base64url');
    const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
    const cases: Record<string, unknown>[] = [
      { cursor: `${forged}.${mac}` }, // another payload under the same MAC
      { cursor: `${payload}.${flip(mac)}` }, // the MAC changed
      { cursor: cursor, orderby: 'id' }, // given out for another orderby
      { cursor: cursor, orderby: 'last_login', order: 'asc' }, // ... or another order
      { cursor: 'not-a-cursor' },
      { cursor: `${'A'.repeat(5000)}.${mac}` },
      { cursor: `ü${payload}.${mac}` },
      { 'cursor[]': [cursor, cursor] },
    ];
    for (const query of cases) {
      const res = await get('/customers', { per_page: 5, orderby: 'last_login', ...query });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(Object.keys(res.body.data.params)).toEqual(['cursor']);
    }
    // The genuine one works.
    expect((await get('/customers', { per_page: 5, orderby: 'last_login', cursor })).status).toBe(200);
  });

  test('X-WP-Total: exact from the kept counts unfiltered; exact up to 1000 matches, then an estimate, said so', async () => {
    const all = await get('/customers', { per_page: 1 });
    expect(all.headers['x-wp-total']).toBe(String(N));
    expect(all.headers['x-wp-total-exact']).toBe('true');
    expect(all.headers['x-wp-totalpages']).toBe(String(N));
    // 366 VIPs: counted exactly.
    const vip = await get('/customers', { vip: true, per_page: 1 });
    expect(vip.headers['x-wp-total']).toBe(String(Math.floor(N / 3)));
    expect(vip.headers['x-wp-total-exact']).toBe('true');
    // 734 not VIP: exact too; 1,100 with a match-all search: more than 1000, an estimate.
    const search = await get('/customers', { search: 'pager', per_page: 1 });
    expect(search.headers['x-wp-total-exact']).toBe('false');
    expect(Number(search.headers['x-wp-total'])).toBeGreaterThan(1000);
    expect(search.body).toHaveLength(1);
    expect(linkOf(search.headers.link, 'next')).toBeDefined();
    // A rare term: exact.
    const rare = await get('/customers', { search: 'pager1099' });
    expect(rare.headers['x-wp-total']).toBe('1');
    expect(rare.headers['x-wp-total-exact']).toBe('true');
  });

  test('the page carries its count: one statement for page 1 and page=N, kept or capped; an empty page counts on its own', async () => {
    const statements = async (query: Record<string, unknown> | string) => {
      const sql: string[] = [];
      const listen = (q: { sql: string }) => sql.push(q.sql);
      ctx.db.on('query', listen);
      try {
        const res = await (typeof query === 'string' ? follow(query) : get('/customers', query));
        expect(res.status).toBe(200);
        // search_trigram_stats: a search's common trigrams, read once a minute per table (search-trigrams.test.ts).
        return { res, sql: sql.filter((s) => !/idempotency|rate_limit|settings|search_trigram_stats/.test(s)) };
      } finally {
        ctx.db.off('query', listen);
      }
    };
    // Unfiltered (the kept count), filters with no kept count (counted up to 1000), in another
    // order, page=N: one statement each. (Kept counts of a filter __in: the memberships below.)
    const expected = async (where: (qb: import('knex').Knex.QueryBuilder) => void) => Number((await ctx.db('customers').modify(where).count({ n: '*' }))[0].n);
    const cases: [Record<string, unknown>, number][] = [
      [{ per_page: 5 }, await expected(() => undefined)],
      [{ per_page: 5, vip: true, orderby: 'last_login', order: 'asc' }, await expected((qb) => void qb.where('vip', true))],
      [{ per_page: 5, vip: true }, await expected((qb) => void qb.where('vip', true))],
      [{ per_page: 5, page: 3, vip: false }, await expected((qb) => void qb.where('vip', false))],
    ];
    for (const [query, total] of cases) {
      const { res, sql } = await statements(query);
      expect(sql).toHaveLength(1);
      expect(sql[0]).toMatch(/AS "_hf_count" from/);
      expect(res.headers['x-wp-total']).toBe(String(total));
      expect(res.body).toHaveLength(5);
      expect(res.body.every((c: Record<string, unknown>) => !Object.keys(c).some((k) => k.startsWith('_hf_')))).toBe(true);
    }
    // A page reached through Link rel="next" (a keyset cursor, in another order): one statement too.
    const first = await get('/customers', { per_page: 5, orderby: 'last_login', order: 'asc' });
    const next = await statements(linkOf(first.headers.link, 'next')!);
    expect(next.sql).toHaveLength(1);
    expect(next.sql[0]).toMatch(/AS "_hf_count" from/);
    expect(next.res.headers['x-wp-total']).toBe(String(cases[0][1]));
    expect(next.res.body).toHaveLength(5);
    // A search on its first pages: one statement too (the matches' keys stay in PostgreSQL), in
    // the list's order, NULLs where PostgreSQL puts them; none matching: 0, still one statement.
    const naive = async (order: 'asc' | 'desc') =>
      (await ctx.db('customers as c').join('users as u', 'u.id', 'c.user_id').where('u.username', 'ilike', '%pager109%').orderByRaw(`c.last_login ${order}, c.id ${order}`).pluck('c.id')).map(Number);
    for (const order of ['asc', 'desc'] as const) {
      const want = await naive(order);
      expect(want).toHaveLength(11);
      const pages: number[] = [];
      for (const page of [1, 2, 3]) {
        const found = await statements({ search: 'pager109', per_page: 5, page, orderby: 'last_login', order });
        expect(found.sql).toHaveLength(1);
        expect(found.res.headers['x-wp-total']).toBe('11');
        pages.push(...found.res.body.map((c: { id: number }) => c.id));
      }
      expect(pages).toEqual(want);
    }
    const none = await statements({ search: 'no such pager' });
    expect(none.res.body).toEqual([]);
    expect(none.res.headers['x-wp-total']).toBe('0');
    expect(none.sql).toHaveLength(1);
    // Past the matches: none, the total counted on its own.
    const pastMatches = await statements({ search: 'pager109', per_page: 5, page: 4 });
    expect(pastMatches.res.body).toEqual([]);
    expect(pastMatches.res.headers['x-wp-total']).toBe('11');
    expect(pastMatches.sql).toHaveLength(2);
    // A page past the end answers none, and its total still: the count then runs on its own.
    const past = await statements({ per_page: 100, page: 12 });
    expect(past.res.body).toEqual([]);
    expect(past.res.headers['x-wp-total']).toBe(String(cases[0][1]));
    expect(past.sql).toHaveLength(2);
  });

  test('the kept counts follow every write: API creates and deletes, bulk SQL, status changes; folding keeps them exact', async () => {
    const total = async (path: string, query: Record<string, unknown> = {}) => {
      const res = await get(path, { per_page: 1, ...query });
      expect(res.headers['x-wp-total-exact']).toBe('true');
      return Number(res.headers['x-wp-total']);
    };
    const before = await total('/customers');
    const created: number[] = [];
    for (let i = 0; i < 70; i++) {
      const res = await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).send({ username: `counted${i}`, email: `counted${i}@example.com`, password: 'secret123' });
      expect(res.status).toBe(200);
      created.push(res.body.id);
    }
    expect(await total('/customers')).toBe(before + 70);
    // More than 64 deltas: the read folded them (in the background) into one row.
    for (let i = 0; i < 50; i++) {
      const [{ n }] = await ctx.db('row_counts').where({ tbl: 'customers', key: '' }).count({ n: '*' });
      if (Number(n) === 1) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect((await ctx.db('row_counts').where({ tbl: 'customers', key: '' }).pluck('n')).map(Number)).toEqual([before + 70]);
    for (const id of created.slice(0, 5)) expect((await ctx.http.delete(`${BASE}/customers/${id}`).set('Authorization', ctx.basic)).status).toBe(200);
    expect(await total('/customers')).toBe(before + 65);
    // A rolled-back write leaves the count alone.
    await ctx.db.transaction(async (trx) => {
      await trx('customers').whereIn('id', created.slice(5, 10)).delete();
      await trx.rollback();
    }).catch(() => undefined);
    expect(await total('/customers')).toBe(before + 65);

    // Memberships by status: counted exactly per status, through creates and status changes.
    const [plan] = await ctx.db('products').insert({ slug: 'count-plan', name: 'Count plan', type: 'plan', amount: '9' }).returning('id');
    await ctx.db.raw(`INSERT INTO memberships (customer_id, plan_id, status) SELECT id, ?, 'pending' FROM customers WHERE id <= 30`, [plan.id]);
    expect(await total('/memberships', { status: 'pending' })).toBe(30);
    await ctx.db('memberships').where('customer_id', '<=', 10).update({ status: 'active' });
    expect(await total('/memberships', { status: 'pending' })).toBe(20);
    expect(await total('/memberships', { status: 'active' })).toBe(10);
    expect(await total('/memberships', { status__in: ['active', 'pending'] })).toBe(30);
    expect(await total('/memberships')).toBe(30);
    // An update that does not change the status counts nothing.
    await ctx.db('memberships').update({ gateway: 'manual' });
    expect(await total('/memberships', { status: 'active' })).toBe(10);
    await ctx.db('memberships').where('customer_id', '<=', 5).delete();
    expect(await total('/memberships', { status: 'active' })).toBe(5);
    expect(await total('/memberships')).toBe(25);
  });

  test('a date range ordered by id: the same rows as one naive query, though dates do not follow ids (every strategy)', async () => {
    // Dates scattered over ids (a migrated table): row id gets hour (id * 7919) % N of 2025.
    await ctx.db.raw(`UPDATE customers SET date_created = timestamptz '2025-01-01' + ((id * 7919) % ${N}) * interval '1 hour' WHERE id <= ${N}`);
    // But 40 rows in the middle of the ids got dates that follow them (the window from the range's first id holds their pages).
    const all = (await ctx.db('customers').orderBy('id').pluck('id')).map(Number);
    const block = all.slice(Math.floor(all.length / 2), Math.floor(all.length / 2) + 40);
    await ctx.db.raw(`UPDATE customers SET date_created = timestamptz '2019-06-01' + id * interval '1 minute' WHERE id BETWEEN ? AND ?`, [block[0], block[block.length - 1]]);
    const ranges = [
      { 'date_created[after]': '2025-01-01T00:00:00Z', 'date_created[before]': '2025-01-02T00:00:00Z' }, // 25 scattered rows
      { 'date_created[after]': '2025-01-10T00:00:00Z' }, // the later hours
      { 'date_created[before]': '2025-01-05T00:00:00Z' }, // the 40 rows, and scattered ones
      { 'date_created[before]': '2019-12-31T00:00:00Z' }, // the 40 rows (bounded on one side: read oldest first, no second window)
      { 'date_created[after]': '2019-01-01T00:00:00Z', 'date_created[before]': '2019-12-31T00:00:00Z' }, // the 40 rows, both ways from the range's first id
    ];
    for (const range of ranges) {
      for (const order of ['desc', 'asc'] as const) {
        const naive = ctx.db('customers').orderBy('id', order);
        if (range['date_created[after]']) naive.where('date_created', '>=', range['date_created[after]']);
        if ('date_created[before]' in range) naive.where('date_created', '<=', range['date_created[before]']!);
        const expected = (await naive.pluck('id')).map(Number);
        // Small pages: the window of ids (50 a row) is short, so older rows take the range's index.
        // Back through rel="prev" (the window then runs the other way from the cursor): the same pages, and none before the first.
        const pages = await pagesBothWays(ctx, await get('/customers', { per_page: 7, order, ...range }));
        expect(pages.flat()).toEqual(expected);
        // page=N (OFFSET) agrees.
        const third = await get('/customers', { per_page: 7, page: 3, order, ...range });
        expect(third.body.map((c: { id: number }) => c.id)).toEqual(expected.slice(14, 21));
      }
    }
  });

  test('a date range ordered by id is one statement: its window of ids when the page is there, else one from the range\'s first id, else the range off its index (each run only then)', async () => {
    // Dates scattered over ids, as in the test above. Per page 5, each window is 300 ids.
    await ctx.db.raw(`UPDATE customers SET date_created = timestamptz '2025-01-01' + ((id * 7919) % ${N}) * interval '1 hour' WHERE id <= ${N}`);
    // But 40 rows in the middle of the ids, far from both ends, got dates that follow them (an older import).
    const all = (await ctx.db('customers').orderBy('id').pluck('id')).map(Number);
    const block = all.slice(Math.floor(all.length / 2), Math.floor(all.length / 2) + 40);
    await ctx.db.raw(`UPDATE customers SET date_created = timestamptz '2019-06-01' + id * interval '1 minute' WHERE id BETWEEN ? AND ?`, [block[0], block[block.length - 1]]);
    const cases = [
      { range: { 'date_created[after]': '2025-01-02T00:00:00Z' }, strategy: 'window', many: true }, // most rows (and those added by the tests above): past 1,000, an estimate
      { range: { 'date_created[after]': '2019-01-01T00:00:00Z', 'date_created[before]': '2019-12-31T00:00:00Z' }, strategy: 'anchored', many: false }, // the 40 rows in the middle
      { range: { 'date_created[after]': '2025-01-01T00:00:00Z', 'date_created[before]': '2025-01-01T10:00:00Z' }, strategy: 'ranged', many: false }, // 11 scattered rows
    ];
    // Customers keep their hours' id bounds (test/id-bounds.test.ts); the same list without them finds the range's first id by its index.
    expect(customerListSpec.idBounds).toBe('customers');
    const unbounded: ListSpec = { ...customerListSpec, idBounds: undefined };
    for (const [{ range, strategy, many }, spec] of cases.flatMap((c) => [[c, customerListSpec] as const, [c, unbounded] as const])) {
      for (const order of ['desc', 'asc'] as const) {
        const naive = ctx.db('customers').orderBy('id', order);
        if (range['date_created[after]']) naive.where('date_created', '>=', range['date_created[after]']);
        if (range['date_created[before]']) naive.where('date_created', '<=', range['date_created[before]']);
        const expected = (await naive.pluck('id')).map(Number);
        // What the windows (300 ids from the first id in this order, then from the range's first) hold decides the strategy.
        const within = (from: number) => expected.filter((id) => (order === 'desc' ? id <= from && id > from - 300 : id >= from && id < from + 300)).length;
        const first = order === 'desc' ? all[all.length - 1] : all[0];
        // The second window only for a range bounded on the side the page starts from (else its first id is about the list's).
        const anchoring = (order === 'desc' ? 'date_created[before]' : 'date_created[after]') in range;
        const holds = within(first) >= 6 ? 'window' : anchoring && within(expected[0]) >= 6 ? 'anchored' : 'ranged';
        expect(holds).toBe(strategy);
        const sent: { sql: string; bindings: unknown[] }[] = [];
        const listen = (q: { sql: string; bindings: unknown[] }) => sent.push(q);
        ctx.db.on('query', listen);
        let page;
        try {
          page = await runList<{ id: string }>(ctx.db, () => ctx.db('customers as c').join('users as u', 'u.id', 'c.user_id').select('c.id'), parseListQuery({ per_page: '5', order, ...range }, spec), spec);
        } finally {
          ctx.db.off('query', listen);
        }
        expect(expected.length > 1000).toBe(many);
        expect(page.rows.map((r) => Number(r.id))).toEqual(expected.slice(0, 5));
        expect(page.exact).toBe(!many);
        if (many) expect(page.total).toBeGreaterThan(1000);
        else expect(page.total).toBe(expected.length);
        // The page and its count (past 1,000 matches, the planner's estimate besides; the cursors' key on first use).
        const pages = sent.filter((q) => !q.sql.startsWith('EXPLAIN') && !/"settings"/.test(q.sql));
        expect(pages).toHaveLength(1);
        // The range's index is read only when a window fell short: for the range's first id, then for its sorted ids.
        const plan = await ctx.db.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${pages[0].sql.replace(/\$\d+/g, '?')}`, pages[0].bindings as never);
        const loopsOf = (name: string) => {
          const found: number[] = [];
          const visit = (node: Record<string, unknown>) => {
            if (node['Subplan Name'] === `CTE ${name}`) found.push(node['Actual Loops'] as number);
            for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) visit(child);
          };
          visit(plan.rows[0]['QUERY PLAN'][0].Plan);
          return found;
        };
        if (spec.idBounds) {
          // From the bounds, a range bounded on the side its page starts from tries the window from them alone, which holds the page wherever the first would.
          expect(loopsOf('hf_window')).toEqual(anchoring ? [] : [1]);
          expect(loopsOf('hf_anchor')).toEqual(anchoring ? [1] : []);
          expect(loopsOf('hf_anchored')).toEqual(anchoring ? [1] : []);
        } else {
          expect(loopsOf('hf_window')).toEqual([1]);
          expect(loopsOf('hf_anchor')).toEqual(anchoring ? [strategy === 'window' ? 0 : 1] : []);
          expect(loopsOf('hf_anchored')).toEqual(anchoring ? [strategy === 'window' ? 0 : 1] : []);
        }
        expect(loopsOf('hf_ranged')).toEqual([strategy === 'ranged' ? 1 : 0]);
      }
    }
  });

  test('past 1,000 matches, the planner estimate is asked once per filter set and kept a minute', async () => {
    const explains = async () => {
      const sql: string[] = [];
      const listen = (q: { sql: string }) => sql.push(q.sql);
      ctx.db.on('query', listen);
      try {
        // Every e-mail is pager<i>@example.com: 1,100 matches, past 1,000.
        const page = await runList(ctx.db, () => ctx.db('customers as c').join('users as u', 'u.id', 'c.user_id').select('c.id'), parseListQuery({ search: 'example.com', per_page: '2' }, customerListSpec), customerListSpec);
        expect(page.exact).toBe(false);
        expect(page.total).toBeGreaterThan(1000);
        return sql.filter((s) => s.startsWith('EXPLAIN')).length;
      } finally {
        ctx.db.off('query', listen);
      }
    };
    expect(await explains()).toBe(1);
    expect(await explains()).toBe(0);
    const now = Date.now();
    const clock = jest.spyOn(Date, 'now').mockReturnValue(now + ESTIMATE_KEPT_MS + 1);
    try {
      expect(await explains()).toBe(1);
      expect(await explains()).toBe(0);
    } finally {
      clock.mockRestore();
    }
  });

  test('a page whose second part fails while its count runs on its own leaves no unhandled rejection', async () => {
    // Ordered by last_login descending after a row whose last_login is NULL, a page has two
    // parts: the rest of the NULLs, then the rows with a value. When the first finds no row, the
    // count runs on its own, and the page goes on to the second meanwhile.
    const spec = customerListSpec;
    const real = () => ctx.db('customers as c').leftJoin('users as u', 'u.id', 'c.user_id').select('c.id');
    const first = await runList(ctx.db, real, parseListQuery({ vip: 'false', orderby: 'last_login', order: 'desc', per_page: '3' }, spec), spec);
    expect(first.next).toBeDefined();
    const q = parseListQuery({ vip: 'false', orderby: 'last_login', order: 'desc', per_page: '3', cursor: first.next }, spec);
    // The first part finds no row (so the count it carries is never run); the count, run on its
    // own then, fails on its first row; the second part reads a table that does not exist.
    let calls = 0;
    const base = () => {
      calls++;
      if (calls === 1) return real().whereRaw('c.id / (c.id - c.id) = 1');
      return calls === 2 ? real().whereRaw('false') : ctx.db('hf_no_such_table as c').select('c.id');
    };
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await expect(runList(ctx.db, base, q, spec)).rejects.toThrow(/hf_no_such_table" does not exist/);
      expect(calls).toBe(3);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  test('page=N keeps working (what WordPress clients send) and answers the rows the cursor links answer', async () => {
    const byPage = await get('/customers', { per_page: 100, page: 7, orderby: 'last_login', order: 'asc' });
    let res = await get('/customers', { per_page: 100, orderby: 'last_login', order: 'asc' });
    for (let p = 1; p < 7; p++) res = await follow(linkOf(res.headers.link, 'next')!);
    expect(res.body.map((c: { id: number }) => c.id)).toEqual(byPage.body.map((c: { id: number }) => c.id));
    // Its links go on by cursor, page numbers carried along.
    expect(linkOf(byPage.headers.link, 'next')).toMatch(/page=8&cursor=/);
    expect(linkOf(byPage.headers.link, 'prev')).toMatch(/page=6&cursor=/);
  });

  test('every enum filter is a NOT NULL column whose CHECK lists exactly its values (what turns __not_in into __in)', async () => {
    const specs: [string, ListSpec][] = [
      ['customers', customerListSpec], ['domains', domainListSpec], ['memberships', membershipListSpec], ['payments', paymentListSpec],
      ['products', productListSpec], ['sites', siteListSpec], ['chat_sessions', sessionListSpec], ['translation_projects', projectListSpec], ['translation_jobs', jobListSpec],
    ];
    let checked = 0;
    for (const [table, spec] of specs) {
      for (const [name, f] of Object.entries(spec.filters)) {
        if (typeof f.type !== 'object') continue;
        const column = f.column.replace(/^\w+\./, '');
        const { rows } = await ctx.db.raw(
          `SELECT a.attnotnull AS not_null, array_agg(pg_get_constraintdef(c.oid)) FILTER (WHERE c.oid IS NOT NULL) AS checks
             FROM pg_attribute a LEFT JOIN pg_constraint c ON c.conrelid = a.attrelid AND c.contype = 'c' AND c.conkey = ARRAY[a.attnum]
            WHERE a.attrelid = ?::regclass AND a.attname = ? GROUP BY a.attnotnull`,
          [table, column],
        );
        expect({ filter: `${table}.${name}`, found: rows.length }).toEqual({ filter: `${table}.${name}`, found: 1 });
        expect({ filter: `${table}.${name}`, notNull: rows[0].not_null }).toEqual({ filter: `${table}.${name}`, notNull: true });
        const allowed = (rows[0].checks ?? []).map((def: string) => [...def.matchAll(/'((?:[^']|'')*)'::text/g)].map((m) => m[1]).sort());
        expect({ filter: `${table}.${name}`, checks: allowed }).toEqual({ filter: `${table}.${name}`, checks: [[...f.type.enum].sort()] });
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(10);
  });

  test('__not_in on an enum: the rows NOT IN gives, with an exact total; excluding every value answers none', async () => {
    await ctx.db.raw("UPDATE customers SET email_verification = CASE WHEN id % 5 = 0 THEN 'pending' WHEN id % 7 = 0 THEN 'verified' ELSE 'none' END WHERE user_id IN (SELECT id FROM users WHERE username LIKE 'pager%')");
    try {
      const expected = (await ctx.db('customers').whereNot('email_verification', 'none').orderBy('id', 'desc').limit(100).pluck('id')).map(Number);
      const total = Number((await ctx.db('customers').whereNot('email_verification', 'none').count({ n: '*' }))[0].n);
      const res = await get('/customers', { email_verification__not_in: 'none', per_page: 100 });
      expect(res.status).toBe(200);
      expect(res.body.map((c: { id: number }) => c.id)).toEqual(expected);
      expect(res.headers['x-wp-total']).toBe(String(total));
      expect(res.headers['x-wp-total-exact']).toBe('true');
      const none = await get('/customers', { email_verification__not_in: 'none,pending,verified' });
      expect(none.status).toBe(200);
      expect(none.body).toEqual([]);
      expect(none.headers['x-wp-total']).toBe('0');
      const bad = await get('/customers', { email_verification__not_in: 'none,bogus' });
      expect(bad.status).toBe(400);
      expect(bad.body.data.params).toHaveProperty('email_verification__not_in');
    } finally {
      await ctx.db.raw("UPDATE customers SET email_verification = 'none'");
    }
  });

  test('a date range counted off its index, wherever its rows sit in the table (no LIMIT-planned sequential scan)', async () => {
    const { rows } = await ctx.db.raw('SELECT max(date_created) AS newest FROM customers');
    const after = new Date(new Date(rows[0].newest).getTime() - 1000).toISOString();
    const res = await get('/customers', { 'date_created[after]': after });
    expect(res.status).toBe(200);
    const exact = Number((await ctx.db('customers').where('date_created', '>=', after).count({ n: '*' }))[0].n);
    expect(res.headers['x-wp-total']).toBe(String(exact));
    const plan = await ctx.db.raw(`EXPLAIN (FORMAT JSON) SELECT count(*) FROM (SELECT 1 FROM customers c WHERE c.date_created >= ? ORDER BY c.date_created LIMIT 1001) s`, [after]);
    expect(JSON.stringify(plan.rows[0]['QUERY PLAN'])).toContain('customers_date_created_idx');
  });
});
