/**
 * List pages whose plan does not depend on their values are prepared (runList's preparedList,
 * src/db/list.ts): page 1 or a page after a cursor, in any order, with no filter, search or
 * date range. The others stay unnamed: a generic plan made for a filter value of average
 * frequency can walk a whole table for a rare one. Run on a Knex of ONE connection, so
 * pg_prepared_statements shows what the lists prepared.
 */
import type { Knex } from 'knex';
import { createCustomerService, customerListSpec } from '../src/customers/service';
import { createDb } from '../src/db/knex';
import { PREPARE_LIST_AFTER, PREPARED_LISTS } from '../src/db/list';
import type { TableService } from '../src/db/table-service';
import { statementName } from '../src/db/transaction';
import { parseListQuery } from '../src/http/list';
import { createTestContext, type TestContext } from './helpers';

describe('prepared list pages', () => {
  let ctx: TestContext;
  let db: Knex;
  let customers: TableService;
  beforeAll(async () => {
    ctx = await createTestContext();
    db = createDb(ctx.dbUrl, 1);
    customers = createCustomerService(db);
    for (let i = 1; i <= 30; i++) {
      const [u] = await ctx.db('users')
        .insert({ username: `plist${i}`, email: `plist${i}@example.com`, password_hash: 'x', display_name: `List member ${String(i).padStart(2, '0')}` })
        .returning('id');
      await ctx.db('customers').insert({ user_id: u.id, vip: i % 3 === 0, email_verification: i <= 10 ? 'verified' : 'none', date_created: new Date(Date.UTC(2026, 0, i)) });
    }
  });
  afterAll(async () => {
    await db.destroy();
    await ctx.close();
  });

  /** The list statements prepared on the one connection (name -> text). */
  const prepared = async () => {
    const { rows } = await db.raw<{ rows: { name: string; statement: string }[] }>("select name, statement from pg_prepared_statements where statement like '%_hf_sort_id%'");
    return new Map(rows.map((r) => [r.name, r.statement]));
  };
  /** A query as a request's query string gives it: every value a string. */
  const asked = (query: Record<string, unknown>) => parseListQuery(Object.fromEntries(Object.entries(query).map(([k, v]) => [k, String(v)])), customerListSpec);
  const list = (query: Record<string, unknown>) => customers.list(asked(query));
  /** A page asked for as often as a text must run to be named; the last answer. */
  const listed = async (query: Record<string, unknown>) => {
    for (let i = 1; i < PREPARE_LIST_AFTER; i++) await list(query);
    return list(query);
  };
  /** The same page read unnamed: in a transaction, where lists never name their statement. */
  const unnamed = (query: Record<string, unknown>) => db.transaction((trx) => createCustomerService(trx as unknown as Knex).list(asked(query)));

  test(`a page is named at its run number ${PREPARE_LIST_AFTER}, not before`, async () => {
    for (let i = 1; i < PREPARE_LIST_AFTER; i++) await list({ per_page: 9 });
    expect((await prepared()).size).toBe(0);
    await list({ per_page: 9 });
    expect([...(await prepared()).values()]).toEqual([expect.stringMatching(/ limit 10$/)]);
  });

  test('page 1, a page after its cursor and another order are named after their texts, with literal limits, and answer what the unnamed statements answer', async () => {
    const first = await listed({ per_page: 7 });
    expect(first.rows.map((r) => r.id)).toHaveLength(7);
    const next = await listed({ per_page: 7, cursor: first.next });
    const byName = await listed({ per_page: 7, orderby: 'display_name', order: 'asc' });
    const texts = [...(await prepared())].filter(([, text]) => / limit 8$/.test(text));
    expect(texts).toHaveLength(3);
    for (const [name, text] of texts) {
      expect(name).toBe(statementName(text));
      expect(text).not.toMatch(/limit \$\d/i);
    }
    expect(next.rows.map((r) => r.id)).toEqual((await unnamed({ per_page: 7, cursor: first.next })).rows.map((r) => r.id));
    expect(byName.rows).toEqual((await unnamed({ per_page: 7, orderby: 'display_name', order: 'asc' })).rows);
    expect(first).toMatchObject({ total: 30, exact: true });
    expect(first.rows).toEqual((await unnamed({ per_page: 7 })).rows);
  });

  test('a filter, a search, a date range and page=N stay unnamed, however often asked: nothing more is prepared', async () => {
    const before = [...(await prepared()).keys()].sort();
    const filtered = await listed({ per_page: 7, vip: 'true' });
    expect(filtered.rows.map((r) => r.id)).toEqual((await unnamed({ per_page: 7, vip: 'true' })).rows.map((r) => r.id));
    expect(filtered.rows.length).toBeGreaterThan(0);
    await listed({ per_page: 7, email_verification: 'verified' });
    await listed({ per_page: 7, search: 'member 1' });
    await listed({ per_page: 7, 'date_created[after]': '2026-01-10' });
    const third = await listed({ per_page: 7, page: 3 });
    expect(third.rows.map((r) => r.id)).toEqual((await unnamed({ per_page: 7, page: 3 })).rows.map((r) => r.id));
    expect([...(await prepared()).keys()].sort()).toEqual(before);
  });

  test('a column added under a prepared page: the page is prepared again and answers', async () => {
    await listed({ per_page: 5 });
    expect([...(await prepared()).values()]).toContainEqual(expect.stringMatching(/ limit 6$/));
    await ctx.db.raw('alter table customers add column hf_test_list_extra text');
    try {
      const page = await list({ per_page: 5 });
      expect(page.rows).toHaveLength(5);
      expect(page.rows[0]).not.toHaveProperty('hf_test_list_extra');
    } finally {
      await ctx.db.raw('alter table customers drop column if exists hf_test_list_extra');
    }
    expect((await list({ per_page: 5 })).rows).toHaveLength(5);
  });

  test(`at most ${PREPARED_LISTS} list texts are named in a process; the others still answer, unnamed`, async () => {
    // One text per page size (its limit is in the text).
    for (let perPage = 1; perPage <= 100 && (await prepared()).size < PREPARED_LISTS; perPage++) await listed({ per_page: perPage });
    expect((await prepared()).size).toBe(PREPARED_LISTS);
    const sizes = [...(await prepared()).values()].map((t) => Number(/ limit (\d+)$/.exec(t)?.[1]) - 1);
    const notYet = Array.from({ length: 100 }, (_, i) => i + 1).filter((n) => !sizes.includes(n));
    expect(notYet.length).toBeGreaterThan(0);
    const page = await listed({ per_page: notYet[0], orderby: 'date_created' });
    expect(page.rows).toHaveLength(Math.min(notYet[0], 30));
    expect((await prepared()).size).toBe(PREPARED_LISTS);
  });
});
