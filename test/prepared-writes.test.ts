/**
 * The write path's statements are prepared (statementRows' `prepared`, src/db/transaction.ts):
 * named, so PostgreSQL parses and plans them once per connection. They select and return the
 * table's columns as the process first read them from the catalogue (TableService's
 * tableColumns), never `*`: a prepared `*` statement fails once a migration adds a column to its
 * table ("cached plan must not change result type"), and in a write's transaction that failure
 * would be the write's, during a rolling deploy. Run on a Knex of ONE connection, so the
 * statements prepared are the ones the next writes use, and pg_prepared_statements shows them.
 */
import type { Knex } from 'knex';
import { createDb } from '../src/db/knex';
import { statementName } from '../src/db/transaction';
import { createProductService } from '../src/products/service';
import { createTestContext, type TestContext } from './helpers';

describe('prepared writes', () => {
  let ctx: TestContext;
  let db: Knex;
  beforeAll(async () => {
    ctx = await createTestContext();
    db = createDb(ctx.dbUrl, 1);
  });
  afterAll(async () => {
    await db.destroy();
    await ctx.close();
  });

  const body = (slug: string) => ({ slug, name: `Prepared ${slug}`, amount: 12.5, type: 'plan' });
  /** The statements prepared on the one connection: name -> text. */
  const prepared = async () => {
    const { rows } = await db.raw<{ rows: { name: string; statement: string }[] }>('select name, statement from pg_prepared_statements');
    return new Map(rows.map((r) => [r.name, r.statement]));
  };

  test('a create and an update prepare their statements under the names of their texts; none selects or returns *', async () => {
    const products = createProductService(db);
    const first = await products.create(body('prepared-one'));
    const updated = await products.update(Number(first.id), { name: 'Renamed once' });
    expect(updated).toMatchObject({ id: first.id, name: 'Renamed once', slug: 'prepared-one', amount: 12.5 });
    const statements = await prepared();
    const ours = [...statements].filter(([name]) => name.startsWith('hf_s_'));
    // The insert, the lock and the update (and the event's insert, when products record one).
    const texts = ours.map(([, text]) => text);
    expect(texts).toEqual(expect.arrayContaining([expect.stringMatching(/^insert into "products" /), expect.stringMatching(/^select "id", .* from "products" .* for update$/), expect.stringMatching(/^update "products" set /)]));
    for (const [name, text] of ours) {
      expect(name).toBe(statementName(text.replace(/\$\d+/g, '?')));
      expect(text).not.toMatch(/\*/);
    }
    // The second update reuses them: nothing new is prepared.
    await products.update(Number(first.id), { name: 'Renamed twice' });
    expect([...(await prepared()).keys()].filter((n) => n.startsWith('hf_s_')).sort()).toEqual(ours.map(([n]) => n).sort());
  });

  test('a column added by a migration while the statements stay prepared: the writes go on, and do not read it', async () => {
    const products = createProductService(db);
    const p = await products.create(body('prepared-migrated'));
    await products.update(Number(p.id), { name: 'Before the migration' });
    // What the explicit columns avoid: a prepared `select *` on this connection fails after the column is added.
    await db.raw('prepare hf_test_star as select * from products where id = $1');
    await ctx.db.raw('alter table products add column hf_test_extra text');
    try {
      await expect(db.raw(`execute hf_test_star(${Number(p.id)})`)).rejects.toMatchObject({ code: '0A000', message: expect.stringContaining('cached plan must not change result type') });
      await db.raw('deallocate hf_test_star');
      const renamed = await products.update(Number(p.id), { name: 'After the migration' });
      expect(renamed).toMatchObject({ id: p.id, name: 'After the migration' });
      expect(renamed).not.toHaveProperty('hf_test_extra');
      const another = await products.create(body('prepared-after'));
      expect(another).toMatchObject({ slug: 'prepared-after', amount: 12.5 });
      expect((await ctx.db('products').where({ id: p.id }).first()).name).toBe('After the migration');
    } finally {
      await ctx.db.raw('alter table products drop column if exists hf_test_extra');
    }
  });

  test('first writes of a fresh service racing each other each read the columns and succeed', async () => {
    const pool = createDb(ctx.dbUrl, 4);
    try {
      const products = createProductService(pool);
      const made = await Promise.all(Array.from({ length: 8 }, (_, i) => products.create(body(`prepared-race-${i}`))));
      expect(new Set(made.map((m) => m.id)).size).toBe(8);
      const renamed = await Promise.all(made.map((m) => products.update(Number(m.id), { name: `Raced ${m.id}` })));
      expect(renamed.map((r) => r?.name)).toEqual(made.map((m) => `Raced ${m.id}`));
    } finally {
      await pool.destroy();
    }
  });
  test('a service prepares the statements of 16 sets of written columns at most; the other sets run unnamed', async () => {
    const products = createProductService(db);
    const p = await products.create(body('prepared-sets'));
    const updates = async () => [...(await prepared()).values()].filter((text) => text.startsWith('update "products"'));
    const before = await updates();
    const fields = ['name', 'description', 'list_order', 'active', 'slug'] as const;
    const value = (f: (typeof fields)[number], n: number) => (f === 'list_order' ? n : f === 'active' ? n % 2 === 0 : `${f}-${p.id}-${n}`);
    // 24 different sets of fields (the non-empty subsets of five, by their bits).
    for (let bits = 1; bits <= 24; bits++) {
      const input = Object.fromEntries(fields.filter((_, i) => bits & (1 << i)).map((f) => [f, value(f, bits)]));
      expect(await products.update(Number(p.id), input)).toMatchObject(input);
    }
    const added = (await updates()).filter((text) => !before.includes(text));
    // The create took one of the 16 (its insert); every update set the others did not share is unnamed.
    expect(added.length).toBeGreaterThan(0);
    expect(added.length).toBeLessThanOrEqual(15);
  });
  test("a column's type changed, or a column the service read dropped, under the prepared statements: the write that meets it fails, the ones after it succeed", async () => {
    const products = createProductService(db);
    const p = await products.create(body('prepared-changed'));
    await products.update(Number(p.id), { name: 'Prepared' });
    // A type change: the statements name the same columns, but their results' types changed.
    await ctx.db.raw('alter table products alter column list_order type bigint');
    try {
      await expect(products.update(Number(p.id), { name: 'Meets the change' })).rejects.toMatchObject({ code: '0A000' });
      expect(await products.update(Number(p.id), { name: 'After the change' })).toMatchObject({ name: 'After the change' });
      expect(await products.create(body('prepared-changed-2'))).toMatchObject({ slug: 'prepared-changed-2' });
    } finally {
      await ctx.db.raw('alter table products alter column list_order type integer');
    }
    // A column the service read, dropped (the contract step of a migration, with this code still running).
    await ctx.db.raw('alter table products add column hf_test_gone text');
    const fresh = createProductService(db);
    await fresh.update(Number(p.id), { name: 'Reads hf_test_gone' });
    await ctx.db.raw('alter table products drop column hf_test_gone');
    await expect(fresh.update(Number(p.id), { name: 'Meets the drop' })).rejects.toMatchObject({ code: '42703' });
    expect(await fresh.update(Number(p.id), { name: 'After the drop' })).toMatchObject({ name: 'After the drop' });
    expect((await ctx.db('products').where({ id: p.id }).first()).name).toBe('After the drop');
  });
});
