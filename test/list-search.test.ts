import { customerListSpec } from '../src/customers/service';
import { COUNT_EXACT_UP_TO, runList, SEARCH_PROBE_PER_ROW, SEARCH_WALK_MAX, SEARCH_WALK_PER_ROW } from '../src/db/list';
import { SEARCH_TRIGRAM_STATS } from '../src/db/search-trigrams';
import { parseListQuery } from '../src/http/list';
import { membershipListSpec } from '../src/memberships/service';
import { paymentListSpec } from '../src/payments/service';
import { siteListSpec } from '../src/sites/service';
import { BASE, createTestContext, type TestContext } from './helpers';
import { pagesBothWays } from './link-pages';

/**
 * A search's first pages ordered by id (runList's searchWalk): up to 1,001 matches in no order
 * for the count; past 1,000, the page from a walk of the newest rows, or from every match
 * sorted. 6,000 customers, ids in the order of i (1..6000); user names carry the terms:
 * - `spreadterm` in every 10th (600 of them) and `spreadmore` in every 4th (1,500): spread over
 *   the table, so the walk finds the page within a few hundred rows;
 * - `clusterterm` in the oldest 1,500: the newest rows hold none, so the walk is not started;
 * - `edgeterm` in the oldest 1,100 and the newest 2: the probe finds a match, the walk falls
 *   short, every match is sorted;
 * - `rareterm` in 7 rows.
 */
describe('a search ordered by id, past 1,000 matches', () => {
  let ctx: TestContext;
  const N = 6000;
  const get = (path: string, query: Record<string, unknown> = {}) => ctx.http.get(`${BASE}${path}`).set('Authorization', ctx.basic).query(query);
  const ids = (body: { id: number }[]) => body.map((c) => c.id);

  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.db.raw(`
      WITH u AS (
        INSERT INTO users (username, email, password_hash, display_name)
        SELECT 'member' || i
            || CASE WHEN i % 10 = 0 THEN '-spreadterm' ELSE '' END
            || CASE WHEN i % 4 = 0 THEN '-spreadmore' ELSE '' END
            || CASE WHEN i <= 1500 THEN '-clusterterm' ELSE '' END
            || CASE WHEN i <= 1100 OR i > ${N - 2} THEN '-edgeterm' ELSE '' END
            || CASE WHEN i % 857 = 0 THEN '-rareterm' ELSE '' END,
          'member' || i || '@example.com', 'x', 'Member ' || i
        FROM generate_series(1, ${N}) i ORDER BY i
        RETURNING id)
      INSERT INTO customers (user_id, vip) SELECT id, id % 3 = 0 FROM u ORDER BY id`);
    await ctx.db.raw('ANALYZE users; ANALYZE customers');
    // The users' sample (search-trigrams.ts), as one taken now would store it had only "member" been common: in every row.
    await ctx.db(SEARCH_TRIGRAM_STATS).insert({ tbl: 'users', trigrams: ['  m', ' me', 'mem', 'emb', 'mbe', 'ber', 'er '], sampled_rows: N, table_rows: N, sampled_at: ctx.db.fn.now() });
  });
  afterAll(() => ctx.close());

  /** Every matching customer id, in the order asked, as one naive query finds them. */
  const naive = async (term: string, order: 'asc' | 'desc', vip?: boolean) =>
    (
      await ctx
        .db('customers as c')
        .join('users as u', 'u.id', 'c.user_id')
        .where((w) => void w.where('u.username', 'ilike', `%${term}%`).orWhere('u.email', 'ilike', `%${term}%`).orWhere('u.display_name', 'ilike', `%${term}%`))
        .modify((qb) => {
          if (vip !== undefined) qb.where('c.vip', vip);
        })
        .orderBy('c.id', order)
        .pluck('c.id')
    ).map(Number);

  /** The statements runList sends for a query, each EXPLAIN ANALYZEd: how often each of its CTEs ran. */
  async function strategy(query: Record<string, string>) {
    const sent: { sql: string; bindings: unknown[] }[] = [];
    const listen = (q: { sql: string; bindings: unknown[] }) => sent.push(q);
    ctx.db.on('query', listen);
    let page;
    try {
      page = await runList<{ id: string }>(
        ctx.db,
        () => ctx.db('customers as c').leftJoin('users as u', 'u.id', 'c.user_id').select('c.id'),
        parseListQuery({ per_page: '10', ...query }, customerListSpec),
        customerListSpec,
      );
    } finally {
      ctx.db.off('query', listen);
    }
    const statements = sent.filter((q) => !q.sql.startsWith('EXPLAIN') && !/"settings"|search_trigram_stats/.test(q.sql));
    const loops: Record<string, number> = {};
    for (const s of statements) {
      const plan = await ctx.db.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.sql.replace(/\$\d+/g, '?')}`, s.bindings as never);
      const visit = (node: Record<string, unknown>) => {
        const name = /^CTE (hf_\w+)$/.exec(String(node['Subplan Name'] ?? ''))?.[1];
        if (name) loops[name] = (loops[name] ?? 0) + (node['Actual Loops'] as number);
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) visit(child);
      };
      visit(plan.rows[0]['QUERY PLAN'][0].Plan);
    }
    return { page, statements: statements.length, loops };
  }

  test('the seeded terms have the shapes the cases below rely on', async () => {
    expect((await naive('spreadterm', 'desc')).length).toBeLessThanOrEqual(COUNT_EXACT_UP_TO);
    expect((await naive('spreadmore', 'desc')).length).toBe(N / 4);
    const cluster = await naive('clusterterm', 'desc');
    expect(cluster).toHaveLength(1500);
    const all = (await ctx.db('customers').orderBy('id', 'desc').pluck('id')).map(Number);
    // No clustered match among the newest rows the probe tests for a page of 20 (nor the walk's).
    expect(cluster[0]).toBeLessThan(all[SEARCH_WALK_PER_ROW * 21 - 1]);
    // Two edge matches among the newest, far fewer than a page within the walk's rows.
    const edge = await naive('edgeterm', 'desc');
    expect(edge.filter((id) => id >= all[SEARCH_PROBE_PER_ROW * 21 - 1])).toHaveLength(2);
    expect(edge.filter((id) => id >= all[SEARCH_WALK_PER_ROW * 21 - 1])).toHaveLength(2);
    expect(edge.length).toBeGreaterThan(COUNT_EXACT_UP_TO);
  });

  test('every strategy answers the rows of one naive query: pages 1 and 3, both orders, with another filter', async () => {
    for (const term of ['spreadmore', 'clusterterm', 'edgeterm', 'spreadterm', 'rareterm']) {
      for (const order of ['desc', 'asc'] as const) {
        for (const vip of [undefined, true]) {
          const expected = await naive(term, order, vip);
          for (const page of [1, 3]) {
            const res = await get('/customers', { search: term, order, per_page: 20, page, ...(vip === undefined ? {} : { vip }) });
            expect(res.status).toBe(200);
            expect(ids(res.body)).toEqual(expected.slice((page - 1) * 20, page * 20));
            if (expected.length > COUNT_EXACT_UP_TO) {
              expect(res.headers['x-wp-total-exact']).toBe('false');
              expect(Number(res.headers['x-wp-total'])).toBeGreaterThan(COUNT_EXACT_UP_TO);
            } else {
              expect(res.headers['x-wp-total']).toBe(String(expected.length));
              expect(res.headers['x-wp-total-exact']).toBe('true');
            }
          }
        }
      }
    }
  });

  test('each strategy runs only the parts it needs: the bounded matches, then the walk or every match sorted', async () => {
    // Up to 1,000 matches: one statement, the page their slice.
    const rare = await strategy({ search: 'rareterm' });
    expect(rare.statements).toBe(1);
    expect(rare.loops).toEqual({ hf_matches: 1 });
    expect(rare.page.total).toBe(7);
    // Spread: the walk finds the page; every match is never sorted.
    const spread = await strategy({ search: 'spreadmore' });
    expect(spread.statements).toBe(2);
    expect(spread.loops.hf_walked).toBe(1);
    expect(spread.loops.hf_ordered ?? 0).toBe(0);
    expect(spread.page.rows.map((r) => Number(r.id))).toEqual((await naive('spreadmore', 'desc')).slice(0, 10));
    // Clustered among old rows: the probe finds no match, so the walk never tests its rows; every match sorted.
    const cluster = await strategy({ search: 'clusterterm' });
    expect(cluster.statements).toBe(2);
    expect(cluster.loops.hf_ordered).toBe(1);
    expect(cluster.page.rows.map((r) => Number(r.id))).toEqual((await naive('clusterterm', 'desc')).slice(0, 10));
    // Edge: the probe finds one, the walk falls short, every match sorted.
    const edge = await strategy({ search: 'edgeterm' });
    expect(edge.loops.hf_ordered).toBe(1);
    expect(edge.page.rows.map((r) => Number(r.id))).toEqual((await naive('edgeterm', 'desc')).slice(0, 10));
    for (const s of [spread, cluster, edge]) {
      expect(s.page.exact).toBe(false);
      expect(s.page.total).toBeGreaterThan(COUNT_EXACT_UP_TO);
    }
  });

  test('the walk tests no more of the newest rows than it needs, and none past the probe\'s when the probe finds no match', async () => {
    // The scans of the newest ids (the probe's and the walk's): how many rows each read, and whether it ran.
    const scans = async (term: string) => {
      const sent: { sql: string; bindings: unknown[] }[] = [];
      const listen = (q: { sql: string; bindings: unknown[] }) => sent.push(q);
      ctx.db.on('query', listen);
      try {
        await runList(ctx.db, () => ctx.db('customers as c').leftJoin('users as u', 'u.id', 'c.user_id').select('c.id'), parseListQuery({ search: term, per_page: '10' }, customerListSpec), customerListSpec);
      } finally {
        ctx.db.off('query', listen);
      }
      const walkStatement = sent.find((q) => q.sql.includes('hf_walked'))!;
      const plan = await ctx.db.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${walkStatement.sql.replace(/\$\d+/g, '?')}`, walkStatement.bindings as never);
      const found: { rows: number; loops: number }[] = [];
      const visit = (node: Record<string, unknown>) => {
        // The newest ids, read off the list table's primary key (not aliased: the list's own alias is `c`).
        if (/^customers(_\d+)?$/.test(String(node['Alias'])) && /Index/.test(String(node['Node Type']))) found.push({ rows: node['Actual Rows'] as number, loops: node['Actual Loops'] as number });
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) visit(child);
      };
      visit(plan.rows[0]['QUERY PLAN'][0].Plan);
      return found;
    };
    // Every 4th row matches: page 1 (10 rows, 11 wanted) within the newest 44, the probe's first match within 4.
    const spread = await scans('spreadmore');
    expect(spread).toHaveLength(2);
    expect(Math.max(...spread.map((s) => s.rows))).toBeLessThanOrEqual(44);
    expect(Math.max(...spread.map((s) => s.rows))).toBeGreaterThanOrEqual(11);
    // Clustered among old rows: the probe reads its rows (SEARCH_PROBE_PER_ROW per row wanted) and finds none; the walk does not start.
    const cluster = await scans('clusterterm');
    expect(cluster.map((s) => s.rows).sort((a, b) => a - b)).toEqual([0, SEARCH_PROBE_PER_ROW * 11]);
    expect(cluster.some((s) => s.loops === 0)).toBe(true);
  });

  test('a deep page=N walks at most SEARCH_WALK_MAX rows (its probe a tenth of them), and answers the naive query\'s rows', async () => {
    const sent: { sql: string; bindings: unknown[] }[] = [];
    const listen = (q: { sql: string; bindings: unknown[] }) => sent.push(q);
    ctx.db.on('query', listen);
    let res;
    try {
      res = await get('/customers', { search: 'spreadmore', per_page: 100, page: 9 });
    } finally {
      ctx.db.off('query', listen);
    }
    expect(res.status).toBe(200);
    expect(ids(res.body)).toEqual((await naive('spreadmore', 'desc')).slice(800, 900));
    // 150 rows per row wanted would be 135,150; 15 per row, 13,515.
    const walk = sent.find((q) => q.sql.includes('hf_walked'))!;
    expect(walk.bindings).toContain(SEARCH_WALK_MAX);
    expect(walk.bindings).toContain(SEARCH_WALK_MAX / 10);
    expect(walk.bindings).not.toContain(SEARCH_WALK_PER_ROW * 901);
  });

  test('following Link through a search\'s pages (a cursor): every match once, in order, then back through rel="prev", for each strategy', async () => {
    for (const [term, order] of [['spreadmore', 'desc'], ['clusterterm', 'desc'], ['edgeterm', 'desc'], ['rareterm', 'desc'], ['spreadmore', 'asc'], ['edgeterm', 'asc']] as const) {
      const expected = await naive(term, order);
      const pages = await pagesBothWays(ctx, await get('/customers', { search: term, order, per_page: 100 }), (res) => {
        // The total on every page: exact up to 1,000 matches, else past them, an estimate.
        if (expected.length > COUNT_EXACT_UP_TO) expect(res.headers['x-wp-total-exact']).toBe('false');
        else expect(res.headers['x-wp-total']).toBe(String(expected.length));
      });
      expect(pages.flat()).toEqual(expected);
    }
  });

  test('a page after a cursor: the walk from the cursor for a spread term; for a term in 1,000 rows or fewer, its matches after the cursor, with no walk', async () => {
    const cursorOf = async (term: string) => {
      const first = await runList<{ id: string }>(ctx.db, () => ctx.db('customers as c').leftJoin('users as u', 'u.id', 'c.user_id').select('c.id'), parseListQuery({ search: term, per_page: '10' }, customerListSpec), customerListSpec);
      return first.next!;
    };
    const spread = await strategy({ search: 'spreadmore', cursor: await cursorOf('spreadmore') });
    expect(spread.statements).toBe(1);
    expect(spread.loops.hf_walked).toBe(1);
    expect(spread.loops.hf_ordered ?? 0).toBe(0);
    expect(spread.page.rows.map((r) => Number(r.id))).toEqual((await naive('spreadmore', 'desc')).slice(10, 20));
    expect(spread.page.exact).toBe(false);
    const few = await strategy({ search: 'spreadterm', cursor: await cursorOf('spreadterm') });
    expect(few.statements).toBe(1);
    expect(few.loops.hf_ordered).toBe(1);
    expect(few.page.rows.map((r) => Number(r.id))).toEqual((await naive('spreadterm', 'desc')).slice(10, 20));
    expect(few.page.total).toBe((await naive('spreadterm', 'desc')).length);
  });

  test('a term whose every trigram is common in the sample takes the first 1,001 matches in order, in one statement (the walk of the id index finds them)', async () => {
    const common = await strategy({ search: 'member' });
    expect(common.statements).toBe(1);
    expect(common.loops).toEqual({ hf_matches: 1 });
    expect(common.page.rows.map((r) => Number(r.id))).toEqual((await naive('member', 'desc')).slice(0, 10));
    expect(common.page.exact).toBe(false);
    // The same list, a term with a trigram the sample does not name: the bounded matches in no order, then the walk.
    const spread = await strategy({ search: 'member1' });
    expect(spread.statements).toBe(2);
    expect(spread.loops.hf_walked).toBe(1);
    expect(spread.page.rows.map((r) => Number(r.id))).toEqual((await naive('member1', 'desc')).slice(0, 10));
  });

  test('every list naming its own table (ListSpec.table) reads from it, aliased as its idColumn\'s qualifier: the rows the walk tests are the list\'s', async () => {
    const specs = { customers: customerListSpec, memberships: membershipListSpec, payments: paymentListSpec, sites: siteListSpec };
    for (const [path, spec] of Object.entries(specs)) {
      expect(spec.table).toBe(path);
      const sent: string[] = [];
      const listen = (q: { sql: string }) => sent.push(q.sql);
      ctx.db.on('query', listen);
      try {
        expect((await get(`/${path}`, { search: 'anything' })).status).toBe(200);
      } finally {
        ctx.db.off('query', listen);
      }
      const alias = spec.idColumn.slice(0, spec.idColumn.indexOf('.'));
      const list = sent.find((q) => q.includes('hf_matches'))!;
      expect(list).toContain(`from "${spec.table}" as "${alias}"`);
    }
  });

  test('_fields cuts a walked page, its cursor pages too; odd and hostile terms answer the naive query\'s rows through the cursor links', async () => {
    const expected = await naive('spreadmore', 'desc');
    const first = await get('/customers', { search: 'spreadmore', _fields: 'id,email', per_page: 10 });
    expect(first.status).toBe(200);
    expect(first.body).toEqual(expected.slice(0, 10).map((id) => ({ id, email: `member${id - (expected[0] - N)}@example.com` })));
    const next = /<([^>]+)>; rel="next"/.exec(first.headers.link ?? '')![1];
    const second = await ctx.http.get(next.replace(/^https?:\/\/[^/]+/, '')).set('Authorization', ctx.basic);
    expect(second.status).toBe(200);
    expect(second.body.map((c: { id: number }) => c.id)).toEqual(expected.slice(10, 20));
    expect(second.body.every((c: Record<string, unknown>) => Object.keys(c).sort().join() === 'email,id')).toBe(true);
    // Terms of punctuation (no trigram: "." is in every row), of a word after one (600 rows), and a quote with LIKE's own characters: through the cursor links as on page 1.
    for (const term of ['.', '-spreadterm', "%' OR 1=1 --"]) {
      const want = await naive(term.replace(/[\\%_]/g, (c) => `\\${c}`), 'desc');
      const seen: number[] = [];
      let res = await get('/customers', { search: term, per_page: 100 });
      for (let pages = 0; pages < 3; pages++) {
        expect(res.status).toBe(200);
        seen.push(...ids(res.body));
        const link = /<([^>]+)>; rel="next"/.exec(res.headers.link ?? '')?.[1];
        if (!link) break;
        res = await ctx.http.get(link.replace(/^https?:\/\/[^/]+/, '')).set('Authorization', ctx.basic);
      }
      expect(seen).toEqual(want.slice(0, seen.length));
      expect(seen.length).toBe(Math.min(want.length, 300));
    }
  });

  test('a list with no table of its own named searches as before, every match in order; a hostile term changes nothing', async () => {
    expect(customerListSpec.table).toBe('customers');
    expect(siteListSpec.table).toBe('sites');
    const { table: _table, ...noTable } = customerListSpec;
    const page = await runList<{ id: string }>(ctx.db, () => ctx.db('customers as c').leftJoin('users as u', 'u.id', 'c.user_id').select('c.id'), parseListQuery({ search: 'spreadmore', per_page: '10' }, noTable), noTable);
    expect(page.rows.map((r) => Number(r.id))).toEqual((await naive('spreadmore', 'desc')).slice(0, 10));
    // LIKE's own characters and SQL quotes are text to find, not patterns.
    for (const term of ["%' OR 1=1 --", '_', '\\', 'ünïcödé', 'x'.repeat(200)]) {
      const res = await get('/customers', { search: term, per_page: 10 });
      expect(res.status).toBe(200);
      expect(ids(res.body)).toEqual((await naive(term.replace(/[\\%_]/g, (c) => `\\${c}`), 'desc')).slice(0, 10));
    }
  });
});
