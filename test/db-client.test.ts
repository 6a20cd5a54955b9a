import knexFactory from 'knex';
import { createTestContext, type TestContext } from './helpers';

/**
 * The database client's per-statement shortcuts (src/db/knex.ts, useLightQueries): the
 * numbered statement texts kept, and pg's Query made from the text and values. What a caller
 * sees is Knex's: the same numbered SQL, rows, types and errors.
 */
describe('database client', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(() => ctx.close());

  type Positioning = { positionBindings(sql: string): string };
  const plainKnex = knexFactory({ client: 'pg' });
  afterAll(() => plainKnex.destroy());

  test("the numbered text is Knex's own, kept or not: escaped marks stay, past the bound and for long texts too", () => {
    const ours = ctx.db.client as unknown as Positioning;
    const knexs = plainKnex.client as unknown as Positioning;
    const texts = [
      'select ? as a, ? as b',
      'select $$?$$ as q, \\? as escaped, ? as v',
      'select ?::jsonb ?| array[?]',
      `select ${Array.from({ length: 3000 }, () => '?').join(', ')}`, // longer than the texts kept
      ...Array.from({ length: 1200 }, (_, i) => `select ? as n${i}`), // more than the texts kept
    ];
    for (let round = 0; round < 2; round++) {
      for (const sql of texts) expect(ours.positionBindings(sql)).toBe(knexs.positionBindings(sql));
    }
    expect(ours.positionBindings('select ? + ?')).toBe('select $1 + $2');
  });

  test('statements without pg options: rows and types as pg gives them; an error names the statement, as Knex does', async () => {
    const { rows } = await ctx.db.raw('select ?::int as n, ?::text as t, now() as at, ?::numeric as amount, null as none', [7, 'é✓', '12.30']);
    expect(rows).toEqual([{ n: 7, t: 'é✓', at: expect.any(Date), amount: '12.30', none: null }]);
    expect(await ctx.db.raw('select 1 as one')).toMatchObject({ command: 'SELECT', rowCount: 1, rows: [{ one: 1 }] });
    const failure = await ctx.db.raw('select ?::int / 0 as boom', [1]).catch((err: Error & { code?: string }) => err);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as { code?: string }).code).toBe('22012');
    expect((failure as Error).message).toMatch(/^select \$1::int \/ 0 as boom - division by zero$/);
  });

  test('a statement with pg options (rowMode) still goes through Knex with them', async () => {
    const rows = await ctx.db.raw('select 1 as a, 2 as b').options({ rowMode: 'array' });
    expect(rows.rows).toEqual([[1, 2]]);
  });
});
