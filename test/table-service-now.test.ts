/**
 * TableService's `NOW` (src/db/table-service.ts): a hook sets a column to the transaction's
 * time. With plain values beside it the write is the statement compiled once per set of
 * columns; with a raw value beside it (which only Knex's builder can write) the builder writes
 * it, with `fn.now()` in NOW's place. No hook sets such a pair today, so this reaches the
 * builder's branch through a service configured for the test.
 */
import type { Knex } from 'knex';
import { NOW, TableService, type Row } from '../src/db/table-service';
import { productListSpec } from '../src/products/service';
import { createTestContext, statementsAndTrips, type TestContext } from './helpers';

describe('TableService: NOW in a write', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  /** Products, with an update hook that adds `extra(trx)` to what is written. */
  const products = (extra: (trx: Knex.Transaction) => Row) =>
    new TableService(ctx.db, {
      table: 'products',
      model: 'product',
      columns: { slug: 'text', name: 'text', description: 'text', amount: 'money', type: 'text' },
      listSpec: productListSpec,
      hooks: {
        async beforeUpdate(trx, _current, cols) {
          Object.assign(cols, extra(trx));
        },
      },
    });
  const created = async (service: TableService, slug: string) => {
    const rec = await service.create({ slug, name: 'Now test', amount: '10', type: 'plan' });
    // Back-dated, so that a write's time is told apart from the create's.
    await ctx.db('products').where({ id: rec.id }).update({ date_created: '2020-01-01T00:00:00Z' });
    return Number(rec.id);
  };
  /** The row's dates as microseconds since the epoch (a JavaScript Date keeps milliseconds only). */
  const micros = async (id: number) =>
    (await ctx.db.raw(`SELECT (extract(epoch FROM date_created) * 1e6)::bigint::text AS created, (extract(epoch FROM date_modified) * 1e6)::bigint::text AS modified FROM products WHERE id = ?`, [id])).rows[0] as {
      created: string;
      modified: string;
    };

  test('beside a raw value: the builder writes the transaction time (CURRENT_TIMESTAMP) and the raw expression', async () => {
    const service = products((trx) => ({ date_created: NOW, description: trx.raw('upper(?)', ['raw text']) }));
    const id = await created(service, `now-raw-${process.pid}`);
    const { sql } = await statementsAndTrips(ctx.db, () => service.update(id, { name: 'Now test, updated' }));
    const update = sql.filter((s) => /^update "products"/.test(s));
    expect(update).toHaveLength(1);
    expect(update[0]).toMatch(/"date_created" = CURRENT_TIMESTAMP/);
    expect(update[0]).toMatch(/"description" = upper\(\$\d+\)/);
    const row = await ctx.db('products').where({ id }).first();
    expect(row).toMatchObject({ name: 'Now test, updated', description: 'RAW TEXT' });
    // Both are the transaction's time, to the microsecond.
    const { created: c, modified: m } = await micros(id);
    expect(c).toBe(m);
    expect(BigInt(c)).toBeGreaterThan(BigInt(Date.parse('2025-01-01T00:00:00Z')) * 1000n);
  });

  test('beside plain values only: the compiled statement, with NOW written as CURRENT_TIMESTAMP', async () => {
    const service = products(() => ({ date_created: NOW, description: 'plain text' }));
    const id = await created(service, `now-plain-${process.pid}`);
    const { sql } = await statementsAndTrips(ctx.db, () => service.update(id, { name: 'Now test, plain' }));
    const update = sql.filter((s) => /^update "products"/.test(s));
    expect(update).toHaveLength(1);
    expect(update[0]).toMatch(/"date_created" = CURRENT_TIMESTAMP/);
    // The other values are bound, not written into the SQL.
    expect(update[0]).not.toMatch(/plain text|Now test/);
    expect(await ctx.db('products').where({ id }).first()).toMatchObject({ name: 'Now test, plain', description: 'plain text' });
    const { created: c, modified: m } = await micros(id);
    expect(c).toBe(m);
  });
});
