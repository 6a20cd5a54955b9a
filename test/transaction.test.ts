import type { Knex } from 'knex';
import { createDb, poolStats } from '../src/db/knex';
import { runInTransaction, statementName, statementRows } from '../src/db/transaction';
import { createTestContext, statementsAndTrips, type TestContext } from './helpers';

/** runInTransaction (src/db/transaction.ts): the resources' writes run in it, with knex.transaction's semantics. */
describe('runInTransaction', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.db.raw('CREATE TABLE tx_probe (id serial PRIMARY KEY, v text NOT NULL UNIQUE)');
  });
  afterAll(() => ctx.close());

  const values = async () => (await ctx.db('tx_probe').orderBy('id').pluck('v')) as string[];
  const statements = async (fn: () => Promise<unknown>) => {
    const sql: string[] = [];
    const listener = (q: { sql: string }) => sql.push(q.sql);
    ctx.db.on('query', listener);
    try {
      await fn();
    } finally {
      ctx.db.off('query', listener);
    }
    return sql;
  };

  beforeEach(() => ctx.db('tx_probe').delete());

  test('commits what the function wrote, answers its result, and sends BEGIN, the statements, COMMIT (seen by db.on("query"))', async () => {
    let out: unknown;
    const sql = await statements(async () => {
      out = await runInTransaction(ctx.db, async (trx) => {
        const [row] = await trx('tx_probe').insert({ v: 'a' }).returning('*');
        await trx.raw('UPDATE tx_probe SET v = ? WHERE id = ?', ['b', row.id]);
        await trx('tx_probe').where({ id: row.id }).update({ v: trx.raw('v || ?', ['!']) });
        return row.id as number;
      });
    });
    expect(typeof out).toBe('number');
    expect(await values()).toEqual(['b!']);
    expect(sql[0]).toBe('BEGIN;');
    expect(sql[sql.length - 1]).toBe('COMMIT;');
    expect(sql).toHaveLength(5);
  });

  /** The round trips to PostgreSQL (ReadyForQuery messages) on the pool's connections while `fn` runs. */
  const roundTrips = async (fn: () => Promise<unknown>) => (await statementsAndTrips(ctx.db, fn)).trips;

  test('BEGIN travels with the first statement: a one-statement transaction is two round trips (BEGIN and the statement, then COMMIT)', async () => {
    let sql: string[] = [];
    const trips = await roundTrips(async () => {
      sql = await statements(() => runInTransaction(ctx.db, (trx) => trx('tx_probe').insert({ v: 'one' })));
    });
    expect(sql).toEqual(['BEGIN;', 'insert into "tx_probe" ("v") values ($1)', 'COMMIT;']);
    expect(trips).toBe(2);
    expect(await values()).toEqual(['one']);
    // Three statements: BEGIN with the first, the other two, COMMIT.
    const more = await roundTrips(() =>
      runInTransaction(ctx.db, async (trx) => {
        await trx('tx_probe').insert({ v: 'two' });
        await trx.raw('SELECT 1');
        await trx('tx_probe').where({ v: 'two' }).update({ v: 'three' });
      }),
    );
    expect(more).toBe(4);
    expect(await values()).toEqual(['one', 'three']);
  });

  test('a first statement that fails is rolled back with its BEGIN, its rows and error as pg gives them, and leaves the connection clean', async () => {
    await ctx.db('tx_probe').insert({ v: 'taken' });
    const sql = await statements(() =>
      expect(runInTransaction(ctx.db, (trx) => trx('tx_probe').insert({ v: 'taken' }))).rejects.toMatchObject({ code: '23505', constraint: 'tx_probe_v_key' }),
    );
    expect(sql).toEqual(['BEGIN;', 'insert into "tx_probe" ("v") values ($1)', 'ROLLBACK;']);
    // A first statement with rows answers them, typed as pg types them.
    const rows = await runInTransaction(ctx.db, (trx) => trx.raw('SELECT 7::int AS n, now() AS at, ? ::text AS t', ['é']));
    expect(rows.rows).toEqual([{ n: 7, at: expect.any(Date), t: 'é' }]);
    expect(rows.command).toBe('SELECT');
    // Every connection of the pool is out of any transaction: the next ones commit.
    for (let i = 0; i < 4; i++) await runInTransaction(ctx.db, (trx) => trx('tx_probe').insert({ v: `after ${i}` }));
    expect(await values()).toEqual(['taken', 'after 0', 'after 1', 'after 2', 'after 3']);
    const open = await ctx.db.raw("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'");
    expect(open.rows[0].n).toBe(0);
  });

  test('a function that sends no statement sends nothing: no BEGIN, no COMMIT, no ROLLBACK', async () => {
    const sql = await statements(async () => {
      expect(await runInTransaction(ctx.db, async () => 'nothing to write')).toBe('nothing to write');
      await expect(
        runInTransaction(ctx.db, async () => {
          throw new Error('refused before any statement');
        }),
      ).rejects.toThrow('refused before any statement');
    });
    expect(sql).toEqual([]);
    expect(poolStats(ctx.db).used).toBe(0);
  });

  test('a statement with pg options of its own sends BEGIN alone first; a stream is refused', async () => {
    let sql: string[] = [];
    const trips = await roundTrips(async () => {
      sql = await statements(() => runInTransaction(ctx.db, (trx) => trx('tx_probe').insert({ v: 'opt' }).options({ rowMode: 'array' })));
    });
    expect(sql).toEqual(['BEGIN;', 'insert into "tx_probe" ("v") values ($1)', 'COMMIT;']);
    expect(trips).toBe(3);
    expect(await values()).toEqual(['opt']);
    await expect(
      runInTransaction(ctx.db, async (trx) => {
        await new Promise((resolve, reject) => {
          const s = trx('tx_probe').select('v').stream();
          s.on('error', reject);
          s.on('end', resolve);
          s.resume();
        });
      }),
    ).rejects.toThrow(/streams are not supported/);
  });

  test('the statements run on one connection, inside the transaction (another connection does not see them before the commit)', async () => {
    await runInTransaction(ctx.db, async (trx) => {
      await trx('tx_probe').insert({ v: 'pending' });
      const pid = (await trx.raw('SELECT pg_backend_pid() AS pid')).rows[0].pid;
      expect((await trx.raw('SELECT pg_backend_pid() AS pid')).rows[0].pid).toBe(pid);
      expect((await trx.raw('SELECT now() = statement_timestamp() AS fresh')).rows[0].fresh).toBe(false);
      expect(await values()).toEqual([]);
    });
    expect(await values()).toEqual(['pending']);
  });

  test('rolls back everything when the function throws, a database error too, and gives the error', async () => {
    await ctx.db('tx_probe').insert({ v: 'taken' });
    const thrown = new Error('refused');
    await expect(
      runInTransaction(ctx.db, async (trx) => {
        await trx('tx_probe').insert({ v: 'x' });
        throw thrown;
      }),
    ).rejects.toBe(thrown);
    await expect(
      runInTransaction(ctx.db, async (trx) => {
        await trx('tx_probe').insert({ v: 'y' });
        await trx('tx_probe').insert({ v: 'taken' });
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(await values()).toEqual(['taken']);
  });

  test('gives the connection back to the pool after a commit and after a rollback', async () => {
    await runInTransaction(ctx.db, async (trx) => trx('tx_probe').insert({ v: 'a' }));
    await runInTransaction(ctx.db, async () => {
      throw new Error('no');
    }).catch(() => undefined);
    expect(poolStats(ctx.db).used).toBe(0);
  });

  test('refuses statements once the transaction has ended (as knex.transaction does), so a kept reference cannot write outside it', async () => {
    let kept: Knex.Transaction | undefined;
    await runInTransaction(ctx.db, async (trx) => {
      kept = trx;
      await trx('tx_probe').insert({ v: 'a' });
    });
    expect(kept!.isCompleted()).toBe(true);
    await expect(kept!('tx_probe').insert({ v: 'late' })).rejects.toThrow(/Transaction query already complete/);
    await expect(kept!.raw('SELECT 1')).rejects.toThrow(/Transaction query already complete/);
    expect(await values()).toEqual(['a']);
  });

  test('a nested transaction is a savepoint: its failure rolls back only its own statements', async () => {
    await runInTransaction(ctx.db, async (trx) => {
      await trx('tx_probe').insert({ v: 'outer' });
      await trx
        .transaction(async (inner) => {
          await inner('tx_probe').insert({ v: 'inner' });
          throw new Error('inner fails');
        })
        .catch(() => undefined);
      await trx.transaction(async (inner) => inner('tx_probe').insert({ v: 'kept' }));
    });
    expect(await values()).toEqual(['outer', 'kept']);
  });

  describe("statementRows' last statement", () => {
    const insert = 'insert into "tx_probe" ("v") values (?) returning *';
    beforeAll(() => ctx.db.raw('CREATE TABLE tx_later (id int PRIMARY KEY, probe int REFERENCES tx_probe (id) DEFERRABLE INITIALLY DEFERRED)'));
    beforeEach(() => ctx.db('tx_later').delete());

    test('the only statement runs on its own: one round trip, no BEGIN nor COMMIT, committed; after it the transaction refuses statements', async () => {
      let sql: string[] = [];
      let rows: Record<string, unknown>[] = [];
      let kept: Knex.Transaction | undefined;
      const trips = await roundTrips(async () => {
        sql = await statements(() =>
          runInTransaction(ctx.db, async (trx) => {
            kept = trx;
            rows = await statementRows(trx, insert, ['alone'], { last: true });
            expect(trx.isCompleted()).toBe(true);
            await expect(trx.raw('SELECT 1')).rejects.toThrow(/Transaction query already complete/);
          }),
        );
      });
      expect(rows).toEqual([{ id: expect.any(Number), v: 'alone' }]);
      expect(sql).toEqual(['insert into "tx_probe" ("v") values ($1) returning *']);
      expect(trips).toBe(1);
      expect(kept!.isCompleted()).toBe(true);
      expect(await values()).toEqual(['alone']);
      // Failing, it leaves nothing, and no transaction open.
      await ctx.db('tx_probe').insert({ v: 'taken' });
      await expect(runInTransaction(ctx.db, (trx) => statementRows(trx, insert, ['taken'], { last: true }))).rejects.toMatchObject({ code: '23505' });
      expect(await values()).toEqual(['alone', 'taken']);
      expect(poolStats(ctx.db).used).toBe(0);
    });

    test('after other statements it carries the COMMIT: the statements seen are the same, one round trip fewer', async () => {
      const run = (last: boolean) =>
        runInTransaction(ctx.db, async (trx) => {
          const [first] = await statementRows(trx, insert, [`first ${last}`]);
          const [second] = await statementRows(trx, insert, [`second ${last}`], { last });
          return [first.v, second.v];
        });
      const sql: Record<string, string[]> = {};
      const trips: Record<string, number> = {};
      for (const last of [false, true]) {
        trips[String(last)] = await roundTrips(async () => {
          sql[String(last)] = await statements(async () => expect(await run(last)).toEqual([`first ${last}`, `second ${last}`]));
        });
      }
      expect(sql.true).toEqual(sql.false);
      expect(sql.true).toEqual(['BEGIN;', 'insert into "tx_probe" ("v") values ($1) returning *', 'insert into "tx_probe" ("v") values ($1) returning *', 'COMMIT;']);
      expect(trips).toEqual({ false: 3, true: 2 });
      expect(await values()).toEqual(['first false', 'second false', 'first true', 'second true']);
    });

    test('a last statement that fails rolls back the statements before it; a COMMIT that fails (a deferred constraint) fails the write and keeps nothing', async () => {
      await ctx.db('tx_probe').insert({ v: 'taken' });
      const sql = await statements(() =>
        expect(
          runInTransaction(ctx.db, async (trx) => {
            await statementRows(trx, insert, ['before']);
            await statementRows(trx, insert, ['taken'], { last: true });
          }),
        ).rejects.toMatchObject({ code: '23505' }),
      );
      expect(sql[sql.length - 1]).toBe('ROLLBACK;');
      // The deferred reference is checked at COMMIT, which travels with the last statement.
      await expect(
        runInTransaction(ctx.db, async (trx) => {
          await statementRows(trx, insert, ['kept only if committed']);
          await statementRows(trx, 'insert into tx_later (id, probe) values (?, ?)', [1, 999999], { last: true });
        }),
      ).rejects.toMatchObject({ code: '23503' });
      expect(await values()).toEqual(['taken']);
      expect(await ctx.db('tx_later').pluck('id')).toEqual([]);
      const open = await ctx.db.raw("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'");
      expect(open.rows[0].n).toBe(0);
      // The connections serve the next transactions as before.
      for (let i = 0; i < 4; i++) await runInTransaction(ctx.db, (trx) => statementRows(trx, insert, [`next ${i}`], { last: i % 2 === 0 }));
      expect(await values()).toEqual(['taken', 'next 0', 'next 1', 'next 2', 'next 3']);
    });

    test("if pg's Query stopped taking the COMMIT along (its internals changed), the write fails and is rolled back: never left uncommitted", async () => {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { Query } = require('pg') as { Query: { prototype: Record<string, any> } };
      const prepare = Query.prototype.prepare;
      // As a pg whose prepare wrote Execute and Sync itself, without the hook withCommit sets.
      Query.prototype.prepare = function (this: Record<string, any>, connection: unknown) {
        const own = this._getRows;
        this._getRows = Query.prototype._getRows;
        try {
          return prepare.call(this, connection);
        } finally {
          this._getRows = own;
        }
      };
      try {
        await expect(
          runInTransaction(ctx.db, async (trx) => {
            await statementRows(trx, insert, ['first']);
            await statementRows(trx, insert, ['second'], { last: true });
          }),
        ).rejects.toThrow(/1 CommandComplete for a statement sent with BEGIN or COMMIT, not 2/);
      } finally {
        Query.prototype.prepare = prepare;
      }
      expect(await values()).toEqual([]);
      const open = await ctx.db.raw("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'");
      expect(open.rows[0].n).toBe(0);
    });

    test('inside a savepoint, or in a transaction that is not a light one, last changes nothing: the outer transaction goes on and commits', async () => {
      await runInTransaction(ctx.db, async (trx) => {
        await trx.transaction(async (inner) => statementRows(inner, insert, ['in savepoint'], { last: true }));
        expect(trx.isCompleted()).toBe(false);
        await statementRows(trx, insert, ['after savepoint']);
      });
      await ctx.db.transaction(async (trx) => {
        await statementRows(trx, insert, ['knex transaction'], { last: true });
        await statementRows(trx, insert, ['knex transaction, after']);
      });
      await statementRows(ctx.db, insert, ['no transaction'], { last: true });
      expect(await values()).toEqual(['in savepoint', 'after savepoint', 'knex transaction', 'knex transaction, after', 'no transaction']);
    });
  });

  test('trx has what services use: fn.now(), isTransaction, query methods, builders bound with transacting()', async () => {
    await runInTransaction(ctx.db, async (trx) => {
      expect(trx.isTransaction).toBe(true);
      const [{ now }] = (await trx.select({ now: trx.fn.now() })) as { now: Date }[];
      expect(now).toBeInstanceOf(Date);
      await ctx.db('tx_probe').insert({ v: 'via transacting' }).transacting(trx);
      expect(await trx('tx_probe').pluck('v')).toEqual(['via transacting']);
      expect(await values()).toEqual([]);
    });
    expect(await values()).toEqual(['via transacting']);
  });
  describe("statementRows' prepared statements", () => {
    const insert = 'insert into "tx_probe" ("v") values (?) returning "id", "v"';
    /** ONE connection: the statements prepared on it are the ones the next transactions use. */
    let one: Knex;
    beforeAll(() => {
      one = createDb(ctx.dbUrl, 1);
    });
    afterAll(() => one.destroy());

    test('named by their text; BEGIN goes alone before a first use on a connection, and travels with it after; the statements seen are the same', async () => {
      const run = (tag: string) =>
        runInTransaction(one, async (trx) => {
          const [a] = await statementRows(trx, insert, [`${tag} a`], { prepared: true });
          const [b] = await statementRows(trx, insert, [`${tag} b`], { prepared: true, last: true });
          return [a.v, b.v];
        });
      let out: unknown;
      const first = await statementsAndTrips(one, async () => {
        out = await run('first');
      });
      expect(out).toEqual(['first a', 'first b']);
      const second = await statementsAndTrips(one, async () => {
        out = await run('second');
      });
      expect(out).toEqual(['second a', 'second b']);
      expect(first.sql).toEqual(['BEGIN;', 'insert into "tx_probe" ("v") values ($1) returning "id", "v"', 'insert into "tx_probe" ("v") values ($1) returning "id", "v"', 'COMMIT;']);
      expect(second.sql).toEqual(first.sql);
      // BEGIN alone, the insert (prepared), the insert with COMMIT; then BEGIN with the first insert, the second with COMMIT.
      expect([first.trips, second.trips]).toEqual([3, 2]);
      const { rows } = await one.raw<{ rows: { name: string; statement: string }[] }>('select name, statement from pg_prepared_statements');
      expect(rows).toEqual([{ name: statementName(insert), statement: 'insert into "tx_probe" ("v") values ($1) returning "id", "v"' }]);
      expect(await values()).toEqual(['first a', 'first b', 'second a', 'second b']);
    });

    test('a statement whose preparation fails fails its transaction, keeps nothing, and is prepared once it can be', async () => {
      const later = 'insert into "tx_made_later" ("v") values (?) returning "v"';
      await expect(
        runInTransaction(one, async (trx) => {
          await statementRows(trx, insert, ['before the failure'], { prepared: true });
          return statementRows(trx, later, ['too early'], { prepared: true, last: true });
        }),
      ).rejects.toMatchObject({ code: '42P01' });
      expect(await values()).toEqual([]);
      await ctx.db.raw('CREATE TABLE tx_made_later (v text)');
      expect(await runInTransaction(one, (trx) => statementRows(trx, later, ['in time'], { prepared: true, last: true }))).toEqual([{ v: 'in time' }]);
      expect(await runInTransaction(one, (trx) => statementRows(trx, later, ['again'], { prepared: true, last: true }))).toEqual([{ v: 'again' }]);
      expect((await ctx.db('tx_made_later').pluck('v')).sort()).toEqual(['again', 'in time']);
    });

    test('outside runInTransaction the option changes nothing: the statement runs unnamed', async () => {
      const outside = 'insert into "tx_probe" ("v") values (?) returning "v"';
      expect(await statementRows(one, outside, ['outside'], { prepared: true })).toEqual([{ v: 'outside' }]);
      const { rows: named } = await one.raw<{ rows: { statement: string }[] }>('select statement from pg_prepared_statements');
      expect(named.map((r) => r.statement)).not.toContain('insert into "tx_probe" ("v") values ($1) returning "v"');
    });
  });
});
