import { spawnSync } from 'node:child_process';
import path from 'node:path';
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
  test('rows of any column names are what pg gives: quotes, unicode, __proto__, duplicates, 60 columns, and deleting the last ones (named statements and Knex\'s)', async () => {
    const odd = ['a', 'with "quote', "it's", 'back\\slash', 'ünï', '😀', '__proto__', 'constructor', 'toString', '1digit', ' spaced ', 'line\nbreak', '\u2028'];
    const many = Array.from({ length: 60 }, (_, i) => `c${i}`);
    for (const names of [odd, many, ['x', 'y', 'x']]) {
      const sql = `SELECT ${names.map((n, i) => `${i % 3 === 0 ? 'NULL' : i}::int AS "${n.replace(/"/g, '""')}"`).join(', ')}, now() AS at`;
      // What pg's own row would be, from its rows as arrays (which src/db/knex.ts leaves to pg):
      // each column an own property, in order, the last of a repeated name winning.
      const asArrays = (await ctx.db.raw(sql).options({ rowMode: 'array' })) as { rows: unknown[][]; fields: { name: string }[] };
      const expected = Object.fromEntries(asArrays.fields.map((f, i) => [f.name, asArrays.rows[0][i]])) as Record<string, unknown>;
      for (let i = 0; i < 3; i++) {
        const [viaKnex] = (await ctx.db.raw(sql)).rows as Record<string, unknown>[];
        const [viaName] = await preparedRows<Record<string, unknown>>(ctx.db, `prep_names_${names.length}_${names[0]}`, sql, []);
        for (const row of [viaKnex, viaName]) {
          // The same own keys in the same order, the same values, and a plain prototype.
          expect(Object.keys(row)).toEqual(Object.keys(expected));
          expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
          for (const k of Object.keys(expected)) if (k !== 'at') expect(row[k]).toEqual(expected[k]);
          expect(row.at).toBeInstanceOf(Date);
          // runList deletes the last columns, last first: what is left is the rest, in order.
          delete row.at;
          delete row[names[names.length - 1]];
          expect(Object.keys(row)).toEqual(Object.keys(expected).filter((k) => k !== 'at' && k !== names[names.length - 1]));
        }
      }
    }
  });

  test('a row keeps fast properties through runList\'s deletions of its last three columns and the _links added after (V8, with --allow-natives-syntax)', () => {
    const code = `
      const { rowBuilder } = require(${JSON.stringify(path.join(__dirname, '../src/db/rows'))});
      const names = [...Array.from({ length: 40 }, (_, i) => 'c' + i), '_hf_sort_key', '_hf_sort_id', '_hf_count'];
      const row = rowBuilder(names)(names.slice(), names.map(() => (v) => v));
      const fast = [eval('%HasFastProperties(row)')];
      delete row._hf_count; delete row._hf_sort_id; delete row._hf_sort_key;
      fast.push(eval('%HasFastProperties(row)'));
      row._links = {};
      fast.push(eval('%HasFastProperties(row)'), Object.keys(row).length);
      process.stdout.write(JSON.stringify(fast));`;
    const out = spawnSync(process.execPath, ['--allow-natives-syntax', '--require', 'tsx/cjs', '-e', code], { encoding: 'utf8', timeout: 30_000 });
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toEqual([true, true, true, 41]);
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
