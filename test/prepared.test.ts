import { poolStats } from '../src/db/knex';
import { takeConnection, giveBack } from '../src/db/pool';
import { parameterValue, preparedRows } from '../src/db/prepared';
import { createTestContext, type TestContext } from './helpers';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const pgPrepareValue = (require('pg/lib/utils') as { prepareValue: (v: unknown) => unknown }).prepareValue;

/**
 * preparedRows (src/db/prepared.ts): a named statement whose row description is kept per
 * connection after its first execution, on a connection taken from the pool without tarn's
 * acquire when one is idle (src/db/pool.ts).
 */
describe('preparedRows and takeConnection', () => {
  let ctx: TestContext;
  const SQL = 'SELECT id, label, n, at, doc, flag FROM prep_probe WHERE id >= $1 ORDER BY id LIMIT $2';
  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.db.raw('CREATE TABLE prep_probe (id bigserial PRIMARY KEY, label text, n int, at timestamptz, doc jsonb, flag boolean)');
    await ctx.db('prep_probe').insert([
      { label: 'a', n: 1, at: '2026-11-27T10:00:00.123Z', doc: JSON.stringify({ k: [1, 2] }), flag: true },
      { label: null, n: null, at: null, doc: null, flag: null },
      { label: 'c "quoted"', n: -3, at: '1999-12-31T23:59:59Z', doc: JSON.stringify('s'), flag: false },
    ]);
  });
  afterAll(() => ctx.close());

  test('answers what the same statement answers through Knex, on its first execution on a connection and on every later one', async () => {
    const expected = (await ctx.db.raw(SQL.replace('$1', '?').replace('$2', '?'), [1, 10])).rows;
    expect(expected).toHaveLength(3);
    expect(expected[0].at).toBeInstanceOf(Date);
    expect(typeof expected[0].id).toBe('number');
    // More executions than the pool has connections, one after another and at once: every
    // connection describes the statement once, then reads with what it kept.
    for (let i = 0; i < 25; i++) expect(await preparedRows(ctx.db, 'prep_probe_v1', SQL, [1, 10])).toEqual(expected);
    const together = await Promise.all(Array.from({ length: 30 }, () => preparedRows(ctx.db, 'prep_probe_v1', SQL, [1, 10])));
    for (const rows of together) expect(rows).toEqual(expected);
    expect(await preparedRows(ctx.db, 'prep_probe_v1', SQL, [2, 1])).toEqual([expected[1]]);
    expect(await preparedRows(ctx.db, 'prep_probe_v1', SQL, [100, 10])).toEqual([]);
    expect(poolStats(ctx.db).used).toBe(0);
  });

  test('the statement is seen by db.on("query")', async () => {
    const seen: string[] = [];
    const listener = (q: { sql: string }) => seen.push(q.sql);
    ctx.db.on('query', listener);
    try {
      await preparedRows(ctx.db, 'prep_probe_v1', SQL, [1, 1]);
    } finally {
      ctx.db.off('query', listener);
    }
    expect(seen).toEqual([SQL]);
  });

  test('an error rejects, gives the connection back, and the next execution works (describing again)', async () => {
    await expect(preparedRows(ctx.db, 'prep_probe_v1', SQL, ['not a number', 1])).rejects.toMatchObject({ code: '22P02' });
    expect(poolStats(ctx.db).used).toBe(0);
    const rows = await Promise.all(Array.from({ length: 12 }, () => preparedRows<{ id: number }>(ctx.db, 'prep_probe_v1', SQL, [1, 10])));
    for (const r of rows) expect(r.map((x) => x.id)).toEqual([1, 2, 3]);
    // A name already used for another text on a connection is refused, as pg refuses it.
    await expect(preparedRows(ctx.db, 'prep_probe_v1', 'SELECT 1 AS one', [])).rejects.toThrow(/Prepared statements must be unique/);
    expect(poolStats(ctx.db).used).toBe(0);
  });

  test('a statement whose result columns changed (a migration under `select *`) is prepared again: the new columns, never the kept description', async () => {
    await ctx.db.raw('CREATE TABLE prep_shape (id int PRIMARY KEY, a text)');
    await ctx.db('prep_shape').insert({ id: 1, a: 'x' });
    const STAR = 'SELECT * FROM prep_shape WHERE id = $1';
    // Prepared on every connection of the pool first.
    const before = await Promise.all(Array.from({ length: 10 }, () => preparedRows(ctx.db, 'prep_shape_v1', STAR, [1])));
    for (const rows of before) expect(rows).toEqual([{ id: 1, a: 'x' }]);
    await ctx.db.raw('ALTER TABLE prep_shape ADD COLUMN b int DEFAULT 7');
    const after = await Promise.all(Array.from({ length: 10 }, () => preparedRows(ctx.db, 'prep_shape_v1', STAR, [1])));
    for (const rows of after) expect(rows).toEqual([{ id: 1, a: 'x', b: 7 }]);
    await ctx.db.raw('ALTER TABLE prep_shape DROP COLUMN a');
    for (let i = 0; i < 12; i++) expect(await preparedRows(ctx.db, 'prep_shape_v1', STAR, [1])).toEqual([{ id: 1, b: 7 }]);
    expect(poolStats(ctx.db).used).toBe(0);
    // What a statement gets wrong is still an error.
    await expect(preparedRows(ctx.db, 'prep_shape_v1', STAR, ['x'])).rejects.toMatchObject({ code: '22P02' });
  });

  test('takeConnection: an idle connection counts as used until given back; with none idle, it waits for one as Knex does', async () => {
    await preparedRows(ctx.db, 'prep_probe_v1', SQL, [1, 1]);
    const max = poolStats(ctx.db).max;
    const held = await Promise.all(Array.from({ length: max }, () => takeConnection(ctx.db)));
    expect(new Set(held).size).toBe(max);
    expect(poolStats(ctx.db).used).toBe(max);
    let got: unknown;
    const waiting = takeConnection(ctx.db).then((c) => (got = c));
    await new Promise((r) => setTimeout(r, 50));
    expect(got).toBeUndefined();
    expect(poolStats(ctx.db).pending).toBe(1);
    await giveBack(ctx.db, held[0]);
    await waiting;
    expect(got).toBe(held[0]);
    for (const c of [got, ...held.slice(1)]) await giveBack(ctx.db, c);
    expect(poolStats(ctx.db).used).toBe(0);
    expect(poolStats(ctx.db).free).toBe(max);
  });
  describe('parameterValue: arrays of strings written as one join, the same literal pg writes', () => {
    const hostile = [
      ['a', 'b'],
      ['with "quotes"', 'back\\slash', '\\"', '"', '\\'],
      ['NULL', 'null', '', ' padded ', '{braces}', 'a,b', 'tab\there', 'new\nline'],
      ['ünïcödé', '日本語', '😀 emoji', 'é"\\ü'],
      ['x'.repeat(10_000)],
    ];
    test.each(hostile.map((values) => [values.slice(0, 3).join('|').slice(0, 40), values]))('%s: the literal pg writes, and PostgreSQL reads it back unchanged', async (_name, values) => {
      expect(parameterValue(values)).toBe(pgPrepareValue(values));
      const [row] = await preparedRows<{ back: string[] }>(ctx.db, 'prep_array_v1', 'SELECT $1::text[] AS back', [values]);
      expect(row.back).toEqual(values);
    });
    test('anything else goes to pg: an empty array, numbers, nulls inside, nested arrays, scalars, dates, null', () => {
      for (const value of [[], [1, 2], ['a', null], [['a'], ['b']], ['a', 1], 'text', 42, null, undefined, new Date('2026-11-29T12:00:00Z'), { a: 1 }]) {
        expect(parameterValue(value)).toEqual(pgPrepareValue(value));
      }
    });
    test('a NUL inside is refused by PostgreSQL, as through pg', async () => {
      await expect(preparedRows(ctx.db, 'prep_array_v1', 'SELECT $1::text[] AS back', [['a\u0000b']])).rejects.toThrow();
      await expect(ctx.db.raw('SELECT ?::text[] AS back', [['a\u0000b']])).rejects.toThrow();
    });
  });
});
