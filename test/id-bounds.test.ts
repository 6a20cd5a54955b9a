import { HOUR_OF, ID_BOUNDED } from '../migrations/20261208000010_id_bounds';
import { customerListSpec } from '../src/customers/service';
import { foldIdBounds, hourOf, startIdBoundsFolding } from '../src/db/id-bounds';
import { runList, type ListSpec } from '../src/db/list';
import { parseListQuery } from '../src/http/list';
import { membershipListSpec } from '../src/memberships/service';
import { paymentListSpec } from '../src/payments/service';
import { siteListSpec } from '../src/sites/service';
import { BASE, createTestContext, type TestContext } from './helpers';
import { pagesBothWays } from './link-pages';

/**
 * `id_bounds` (migrations/20261208000010_id_bounds.ts): the hours' bounds of the ids created in
 * them, and the date ranges that start their pages from them (src/db/list.ts, datePage).
 * 1,200 customers, id i created at 2020-01-01 + i * 10 minutes: six an hour, ids following dates.
 */
describe('id_bounds: where a date range ordered by id starts', () => {
  let ctx: TestContext;
  const N = 1200;
  const get = (query: Record<string, unknown>) => ctx.http.get(`${BASE}/customers`).set('Authorization', ctx.basic).query(query);
  const at = (id: number) => new Date(Date.UTC(2020, 0, 1) + id * 600_000).toISOString();

  /** Every row of `table` whose hour's rows do not bound its id (none, when the bounds hold). */
  const unbounded = async (table: string) =>
    (
      await ctx.db.raw(
        `SELECT t.id FROM ${table} t WHERE t.date_created IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM id_bounds b WHERE b.tbl = ? AND b.bucket = ${HOUR_OF('t.date_created')} AND b.min_id <= t.id AND t.id <= b.max_id)`,
        [table],
      )
    ).rows;

  /** The ids of the range's rows in `order`, as one naive query has them. */
  const naive = async (order: 'asc' | 'desc', after?: string, before?: string) => {
    const qb = ctx.db('customers').orderBy('id', order);
    if (after) qb.where('date_created', '>=', after);
    if (before) qb.where('date_created', '<=', before);
    return (await qb.pluck('id')).map(Number);
  };

  /** Every page through rel="next", then back through rel="prev" (pagesBothWays), and page 3 by `page=N`: each as the naive query has it. */
  const pagesAgree = async (order: 'asc' | 'desc', after?: string, before?: string) => {
    const expected = await naive(order, after, before);
    const range = { ...(after && { 'date_created[after]': after }), ...(before && { 'date_created[before]': before }) };
    expect((await pagesBothWays(ctx, await get({ per_page: 5, order, ...range }))).flat()).toEqual(expected);
    const third = await get({ per_page: 5, page: 3, order, ...range });
    expect(third.body.map((c: { id: number }) => c.id)).toEqual(expected.slice(10, 15));
  };

  /** The list's statement for a range (runList, 5 a page), and how it ran: rows each CTE's scans read. */
  const statementOf = async (order: 'asc' | 'desc', after: string, before: string) => {
    const sent: { sql: string; bindings: unknown[] }[] = [];
    const listen = (q: { sql: string; bindings: unknown[] }) => sent.push(q);
    ctx.db.on('query', listen);
    let page;
    try {
      page = await runList<{ id: string }>(ctx.db, () => ctx.db('customers as c').select('c.id'), parseListQuery({ per_page: '5', order, 'date_created[after]': after, 'date_created[before]': before }, customerListSpec), customerListSpec);
    } finally {
      ctx.db.off('query', listen);
    }
    const [statement] = sent.filter((q) => !q.sql.startsWith('EXPLAIN') && !/"settings"/.test(q.sql));
    const plan = await ctx.db.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement.sql.replace(/\$\d+/g, '?')}`, statement.bindings as never);
    /** Per CTE: its loops, and the rows its scans of `customers` read (their actual rows, times their loops). */
    const ctes = new Map<string, { loops: number; customersRead: number }>();
    const visit = (node: Record<string, unknown>, cte?: string) => {
      const name = typeof node['Subplan Name'] === 'string' && node['Subplan Name'].startsWith('CTE ') ? node['Subplan Name'].slice(4) : undefined;
      if (name) ctes.set(name, { loops: node['Actual Loops'] as number, customersRead: 0 });
      const within = name ?? cte;
      if (within && node['Relation Name'] === 'customers') ctes.get(within)!.customersRead += (node['Actual Rows'] as number) * (node['Actual Loops'] as number);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) visit(child, within);
    };
    visit(plan.rows[0]['QUERY PLAN'][0].Plan);
    return { ids: page.rows.map((r) => Number(r.id)), ctes, sql: statement.sql };
  };

  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.db.raw(`
      WITH u AS (
        INSERT INTO users (username, email, password_hash, display_name)
        SELECT 'bound' || i, 'bound' || i || '@example.com', 'x', 'Bound ' || i FROM generate_series(1, ${N}) i
        RETURNING id)
      INSERT INTO customers (user_id, date_created)
      SELECT id, timestamptz '2020-01-01 00:00:00+00' + id * interval '10 minutes' FROM u ORDER BY id`);
    await ctx.db.raw('ANALYZE customers; ANALYZE id_bounds');
  });
  afterAll(() => ctx.close());

  test('the lists of the bounded tables say so, and only those', () => {
    const specs: ListSpec[] = [customerListSpec, membershipListSpec, paymentListSpec, siteListSpec];
    expect(specs.map((s) => s.idBounds)).toEqual(ID_BOUNDED);
    for (const s of specs) expect(s.idBounds).toBe(s.table);
  });

  test('hourOf is the migration\'s hour: at the hour\'s edges, within a millisecond, before 1970, in any time zone of the session', async () => {
    const instants = ['2020-01-01T00:00:00.000Z', '2020-01-01T00:59:59.999Z', '2020-01-01T01:00:00.000Z', '1969-12-31T23:30:00.000Z', '1900-06-01T12:00:00.001Z', '2026-11-29T08:14:03.876Z'];
    await ctx.db.transaction(async (trx) => {
      // A session in a zone half an hour off UTC: the hour is the epoch's, not the zone's.
      await trx.raw("SET LOCAL TIME ZONE 'Asia/Kolkata'");
      for (const iso of instants) {
        const { rows } = await trx.raw(`SELECT ${HOUR_OF('?::timestamptz')} AS h`, [iso]);
        expect(Number(rows[0].h)).toBe(hourOf(new Date(iso)));
      }
    });
  });

  test('every row is bounded: after a multi-row insert, single inserts through the API, and updates of date_created', async () => {
    expect(await unbounded('customers')).toEqual([]);
    // The seed: one statement, one row for each of its hours (ids 1 to 5 in the first, then six an hour).
    const [{ n }] = (await ctx.db.raw(`SELECT count(*)::int AS n FROM id_bounds WHERE tbl = 'customers' AND bucket < ?`, [hourOf(new Date('2021-01-01'))])).rows;
    expect(n).toBe(Math.floor(N / 6) + 1);
    for (let i = 0; i < 3; i++) {
      const res = await ctx.http
        .post(`${BASE}/customers`)
        .set('Authorization', ctx.basic)
        .send({ username: `boundapi${i}`, email: `boundapi${i}@example.com`, password: 'correct horse battery staple' });
      expect(res.status).toBe(200);
    }
    expect(await unbounded('customers')).toEqual([]);
    // Moved to another hour: bounded there. An update that leaves date_created alone appends nothing.
    const before = Number((await ctx.db('id_bounds').count({ n: '*' }))[0].n);
    await ctx.db('customers').where({ id: 1 }).update({ vip: true });
    await ctx.db('customers').where({ id: 2 }).update({ date_created: ctx.db.raw('date_created') });
    expect(Number((await ctx.db('id_bounds').count({ n: '*' }))[0].n)).toBe(before);
    const ids = (await ctx.db('customers').orderBy('id').limit(3).pluck('id')).map(Number);
    await ctx.db('customers').whereIn('id', ids).update({ date_created: '2031-05-05T05:05:05Z' });
    expect(await unbounded('customers')).toEqual([]);
    await ctx.db('customers').whereIn('id', ids).update({ date_created: ctx.db.raw(`timestamptz '2020-01-01 00:00:00+00' + id * interval '10 minutes'`) });
    expect(await unbounded('customers')).toEqual([]);
    for (const table of ID_BOUNDED) expect(await unbounded(table)).toEqual([]);
  });

  test('a fold leaves one row an hour with the same bounds, also when three run at once', async () => {
    for (let i = 0; i < 5; i++) {
      await ctx.db.raw(`INSERT INTO users (username, email, password_hash) VALUES (?, ?, 'x')`, [`boundfold${i}`, `boundfold${i}@example.com`]);
      await ctx.db.raw(`INSERT INTO customers (user_id, date_created) SELECT id, '2031-06-01T10:30:00Z' FROM users WHERE username = ?`, [`boundfold${i}`]);
    }
    const bounds = () =>
      ctx.db('id_bounds').select('tbl', 'bucket').min({ lo: 'min_id' }).max({ hi: 'max_id' }).groupBy('tbl', 'bucket').orderBy(['tbl', 'bucket']);
    const hour = hourOf(new Date('2031-06-01T10:30:00Z'));
    expect(Number((await ctx.db('id_bounds').where({ tbl: 'customers', bucket: hour }).count({ n: '*' }))[0].n)).toBe(5);
    const wanted = await bounds();
    const folded = await Promise.all([foldIdBounds(ctx.db), foldIdBounds(ctx.db), foldIdBounds(ctx.db)]);
    expect(folded.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(4);
    expect(await bounds()).toEqual(wanted);
    const [{ n, hours }] = (await ctx.db.raw('SELECT count(*)::int AS n, count(DISTINCT (tbl, bucket))::int AS hours FROM id_bounds')).rows;
    expect(n).toBe(hours);
    expect(await foldIdBounds(ctx.db)).toBe(0);
    expect(await unbounded('customers')).toEqual([]);
  });

  test('the fold timer (startIdBoundsFolding, which startHttp runs) folds, and stops when told', async () => {
    const hour = hourOf(new Date('2032-02-02T02:02:00Z'));
    const rowsOfHour = async () => Number((await ctx.db('id_bounds').where({ tbl: 'customers', bucket: hour }).count({ n: '*' }))[0].n);
    const insertOne = async (i: number) => {
      await ctx.db.raw(`INSERT INTO users (username, email, password_hash) VALUES (?, ?, 'x')`, [`boundtimer${i}`, `boundtimer${i}@example.com`]);
      await ctx.db.raw(`INSERT INTO customers (user_id, date_created) SELECT id, '2032-02-02T02:02:00Z' FROM users WHERE username = ?`, [`boundtimer${i}`]);
    };
    await insertOne(0);
    await insertOne(1);
    expect(await rowsOfHour()).toBe(2);
    const stop = startIdBoundsFolding(ctx.db, 20);
    try {
      for (let waited = 0; (await rowsOfHour()) > 1; waited += 20) {
        if (waited > 5000) throw new Error('no fold within 5 s');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      stop();
    }
    await new Promise((r) => setTimeout(r, 100));
    await insertOne(2);
    await new Promise((r) => setTimeout(r, 200));
    expect(await rowsOfHour()).toBe(2);
  });

  test('a range whose ids follow its dates: its page from the bounds, reading an hour of the range at most', async () => {
    // Two ranges over 300 ids (the window, 5 a page) from the list's first id in their order, where the first window would fall short.
    // Descending, hours 33 to 100 (ids 200 to 600): its last hour is in it at its first instant only (id 600).
    // Ascending, hours 100 to 166 (ids 600 to 1,000): its first hour whole (ids 600 to 605).
    // And one of the newest rows, where it would not.
    const ranges = [['desc', at(200), at(600)], ['asc', at(600), at(1000)], ['desc', at(1000), at(1195)]] as const;
    for (const [order, after, before] of ranges) {
      const { ids, ctes } = await statementOf(order, after, before);
      expect(ids).toEqual((await naive(order, after, before)).slice(0, 5));
      // The window from the bound, alone (no first window from the list's first id); the range's sorted ids never.
      expect(ctes.has('hf_window')).toBe(false);
      expect(ctes.get('hf_anchor')?.loops).toBe(1);
      expect(ctes.get('hf_ranged')?.loops).toBe(0);
      // Its first id: the whole hours' bounds, and the range's rows of its partial hour alone (one here, at most six).
      expect(ctes.get('hf_anchor')!.customersRead).toBeLessThanOrEqual(6);
      await pagesAgree(order, after, before);
    }
  });

  test('bounds wider than the rows: a row moved into the range comes first; rows deleted or moved out leave their bounds, and the pages are still the naive query\'s', async () => {
    const after = at(60);
    const before = at(240);
    // The newest customer, backdated into the range (an import): its id is the range's greatest.
    const newest = Number((await ctx.db('customers').max({ m: 'id' }))[0].m);
    await ctx.db('customers').where({ id: newest }).update({ date_created: at(150) });
    const desc = await statementOf('desc', after, before);
    expect(desc.ids[0]).toBe(newest);
    expect(desc.ids).toEqual((await naive('desc', after, before)).slice(0, 5));
    await pagesAgree('desc', after, before);
    await pagesAgree('asc', after, before);
    // Moved out again: its hour's bound stays, 350 ids and more past the range's greatest, beyond the second window (300 ids at 5 a page): the range's sorted ids answer.
    await ctx.db('customers').where({ id: newest }).update({ date_created: at(5000) });
    const stale = await statementOf('desc', after, before);
    expect(stale.ids).toEqual((await naive('desc', after, before)).slice(0, 5));
    expect(stale.ctes.get('hf_ranged')?.loops).toBe(1);
    await pagesAgree('desc', after, before);
    // The range's top rows deleted: their bounds stay, the pages skip them.
    const top = (await naive('desc', after, before)).slice(0, 8);
    await ctx.db('customers').whereIn('id', top).delete();
    expect((await statementOf('desc', after, before)).ids).toEqual((await naive('desc', after, before)).slice(0, 5));
    await pagesAgree('desc', after, before);
    await pagesAgree('asc', after, before);
    // Within one hour, and with one edge only.
    await pagesAgree('desc', at(301), at(304));
    await pagesAgree('asc', at(301), at(304));
    await pagesAgree('desc', undefined, at(100));
    await pagesAgree('asc', at(500), undefined);
  });
});
