import type { Knex } from 'knex';
import type { Db } from './knex';
import { giveBack, takeConnection } from './pool';

/*
 * Knex's internals this file builds on (knex is pinned by package-lock.json; test/service.test.ts
 * and the resources' suites run every write through it): the names of the query builder's
 * methods that a Knex instance forwards, and the helper behind `knex.fn`.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const QUERY_METHODS = require('knex/lib/query/method-constants') as string[];
// eslint-disable-next-line @typescript-eslint/no-require-imports
const FunctionHelper = require('knex/lib/knex-builder/FunctionHelper') as new (client: Knex.Client) => Knex.FunctionHelper;

interface Connection {
  __knex__disposed?: unknown;
}

interface TxClient extends Knex.Client {
  transacting: boolean;
  query(conn: Connection, obj: unknown): Promise<unknown>;
  acquireConnection(): Promise<Connection>;
  releaseConnection(conn: Connection): Promise<void>;
}

interface TxState {
  client: TxClient;
  conn: Connection;
  completed: boolean;
  /** Savepoints of nested transactions, for their names. */
  depth: number;
}

const STATE = Symbol('lightTransaction');
let txCount = 0;
type LightTrx = Knex.Transaction & { [STATE]: TxState };

function completedError(): Error {
  return new Error('Transaction query already complete, run with DEBUG=knex:tx for more info');
}

/**
 * What every light transaction shares, built once: the methods a Knex instance has (`trx(...)`
 * itself is the function), each reading the transaction's own client through `this`. Knex's
 * `knex.transaction` builds all of them again, some 150 closures, for every transaction.
 */
const PROTO: Record<string | symbol, unknown> = Object.create(Function.prototype);
for (const m of QUERY_METHODS) {
  PROTO[m] = function (this: LightTrx, ...args: unknown[]) {
    const builder = this.queryBuilder() as unknown as Record<string, (...a: unknown[]) => unknown>;
    return builder[m](...args);
  };
}
Object.assign(PROTO, {
  isTransaction: true,
  queryBuilder(this: LightTrx) {
    return this.client.queryBuilder();
  },
  raw(this: LightTrx, ...args: unknown[]) {
    return (this.client.raw as (...a: unknown[]) => Knex.Raw).apply(this.client, args);
  },
  ref(this: LightTrx, ref: string) {
    return this.client.ref(ref);
  },
  isCompleted(this: LightTrx) {
    return this[STATE].completed;
  },
  /** A nested transaction: a savepoint, released on success and rolled back to on failure. */
  async transaction(this: LightTrx, container?: unknown) {
    if (typeof container !== 'function') throw new Error('transaction(): a nested transaction takes a function');
    const state = this[STATE];
    if (state.completed) throw completedError();
    const name = `hf_sp_${++state.depth}`;
    await this.raw(`SAVEPOINT ${name}`);
    try {
      const out = await (container as (trx: Knex.Transaction) => Promise<unknown>)(this);
      await this.raw(`RELEASE SAVEPOINT ${name}`);
      return out;
    } catch (err) {
      await this.raw(`ROLLBACK TO SAVEPOINT ${name}`).catch(() => undefined);
      throw err;
    } finally {
      state.depth--;
    }
  },
  commit() {
    throw new Error('commit(): a transaction run by runInTransaction commits when its function returns');
  },
  rollback() {
    throw new Error('rollback(): a transaction run by runInTransaction rolls back when its function throws');
  },
});
Object.defineProperties(PROTO, {
  client: {
    get(this: LightTrx) {
      return this[STATE].client;
    },
    configurable: true,
  },
  fn: {
    get(this: LightTrx) {
      return new FunctionHelper(this.client);
    },
    configurable: true,
  },
  schema: {
    get(this: LightTrx) {
      return this.client.schemaBuilder();
    },
    configurable: true,
  },
  userParams: { value: {}, configurable: true },
});

/**
 * A client bound to one connection of the pool: it inherits everything from the database's
 * client (its config, dialect, and its event listeners, so `db.on('query')` sees the
 * transaction's statements as it sees Knex's own transactions'), never acquires nor releases a
 * connection, and refuses statements once the transaction has ended (as Knex's does).
 */
function txClient(db: Db, conn: Connection, state: { completed: boolean }): TxClient {
  const base = db.client as TxClient;
  const client = Object.create(base) as TxClient;
  client.transacting = true;
  client.acquireConnection = () => (state.completed ? Promise.reject(completedError()) : Promise.resolve(conn));
  client.releaseConnection = () => Promise.resolve();
  client.query = (c: Connection, obj: unknown) => {
    if (state.completed) return Promise.reject(completedError());
    if (c !== conn) return Promise.reject(new Error('Invalid connection for transaction query.'));
    return base.query.call(client, c, obj);
  };
  return client;
}

/**
 * Runs `fn` in a transaction on one pooled connection: `BEGIN`, `fn(trx)`, `COMMIT`; when `fn`
 * throws (or the commit fails), `ROLLBACK` and the error. `trx` is what `knex.transaction`
 * gives (`trx(table)`, `trx.raw`, `trx.fn`, every query method, nested transactions as
 * savepoints), but costs one small object per transaction instead of a whole Knex instance:
 * this is the resources' write path (src/db/table-service.ts), where Knex's transaction object
 * was some 17% of what a write allocated (issue 14). The statements sent are the same.
 */
export async function runInTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  const base = db.client as TxClient;
  const conn = await takeConnection<Connection>(db);
  const state: TxState = { client: undefined as unknown as TxClient, conn, completed: false, depth: 0 };
  state.client = txClient(db, conn, state);
  const trx = function (tableName?: string) {
    const qb = trx.queryBuilder();
    return tableName ? qb.table(tableName) : qb;
  } as unknown as LightTrx;
  Object.setPrototypeOf(trx, PROTO);
  trx[STATE] = state;
  // An own enumerable property: Knex's builder.transacting(trx) refuses an "empty" object.
  (trx as unknown as { txid: string }).txid = `hftx${++txCount}`;
  try {
    await send(state, 'BEGIN;', []);
    let out: T;
    try {
      out = await fn(trx);
      await send(state, 'COMMIT;', []);
    } catch (err) {
      state.completed = true;
      // A connection that broke is destroyed by the pool's validation when released.
      await base.query.call(state.client, conn, { sql: 'ROLLBACK;', bindings: [] }).catch(() => undefined);
      throw err;
    }
    state.completed = true;
    return out;
  } finally {
    state.completed = true;
    await giveBack(db, conn);
  }
}

/**
 * One statement on the transaction's connection through the client's `query` (what Knex's
 * runner calls in the end: the 'query' event, `?` bindings numbered, errors naming the SQL),
 * without a builder or a runner: BEGIN and COMMIT, and the statements a service compiles once.
 */
async function send(state: TxState, sql: string, bindings: unknown[]): Promise<{ rows: Record<string, any>[] }> {
  const obj = (await state.client.query(state.conn, { method: 'raw', sql, bindings })) as { response: { rows: Record<string, any>[] } };
  return obj.response;
}

/**
 * The rows of one statement in a transaction, its SQL (with `?` bindings, as `trx.raw` takes)
 * compiled once by the caller: in a transaction of runInTransaction it skips Knex's builder and
 * runner (a builder compiled on every write was a tenth of a product update's CPU, issue 14);
 * in any other (a caller's knex.transaction), `trx.raw`. The statements sent are the same.
 */
export async function statementRows(trx: Knex.Transaction, sql: string, bindings: unknown[]): Promise<Record<string, any>[]> {
  const state = (trx as unknown as { [STATE]?: TxState })[STATE];
  if (state) return (await send(state, sql, bindings)).rows;
  return (await trx.raw(sql, bindings as Knex.RawBinding[])).rows;
}
