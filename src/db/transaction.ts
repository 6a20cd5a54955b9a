import crypto from 'node:crypto';
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

/*
 * What it uses of `pg` (pinned by package-lock.json): its Query class (exported), whose
 * `submit(connection)` writes a statement's messages and whose `handleCommandComplete` takes
 * each statement's CommandComplete; the connection's protocol messages (parse, bind, execute).
 */
interface PgConnection {
  stream: { cork?(): void; uncork?(): void };
  parse(msg: { text: string; name: string; types: unknown[] }): void;
  bind(msg: { portal: string; statement: string; values: unknown[]; binary: boolean; valueMapper: (v: unknown) => unknown }): void;
  execute(msg: { portal: string; rows: number | undefined }): void;
  sync(): void;
}
interface PgQuery {
  portal: string;
  submit(connection: PgConnection): Error | null;
  handleCommandComplete(msg: unknown, connection: PgConnection): void;
  /** After the statement's Bind and Describe: its Execute, then the Sync (pg's prepare calls it only when Bind could be written). */
  _getRows(connection: PgConnection, rows: number | undefined): void;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { Query } = require('pg') as { Query: new (text: string, values: unknown[], callback: (err: Error | null, res?: unknown) => void) => PgQuery & { queryMode?: string } };
/** The same class given a query object: a named statement (pg prepares it once per connection, then sends only Bind, Describe and Execute). */
const NamedQuery = Query as unknown as new (config: { text: string; values: unknown[]; name: string }, values: undefined, callback: (err: Error | null, res?: unknown) => void) => PgQuery & { queryMode?: string };
// eslint-disable-next-line @typescript-eslint/no-require-imports
const prepareValue = (require('pg/lib/utils') as { prepareValue: (v: unknown) => unknown }).prepareValue;

interface Connection {
  __knex__disposed?: unknown;
  __knexUid?: string;
  __knexTxId?: string;
  query(q: PgQuery): void;
  /** pg's record of the named statements this connection has prepared (its Query reads it too). */
  connection?: { parsedStatements?: Record<string, string> };
}

/** What Knex's runner hands the dialect's `_query`: the statement, its `$n` bindings, pg's options. */
interface QueryObject {
  sql: string;
  bindings?: unknown[];
  options?: { name?: string };
  response?: unknown;
}

interface TxClient extends Knex.Client {
  transacting: boolean;
  query(conn: Connection, obj: unknown): Promise<unknown>;
  _query(conn: Connection, obj: QueryObject): Promise<QueryObject>;
  stream(conn: Connection, obj: unknown, stream: NodeJS.EventEmitter): Promise<unknown>;
  acquireConnection(): Promise<Connection>;
  releaseConnection(conn: Connection): Promise<void>;
}

interface TxState {
  client: TxClient;
  conn: Connection;
  completed: boolean;
  /** BEGIN has been sent (with the transaction's first statement). */
  begun: boolean;
  /** The next statement to reach the connection takes BEGIN along. */
  beginWithNext: boolean;
  /** The next statement to reach the connection takes COMMIT along (statementRows' `last`). */
  commitWithNext: boolean;
  /** The transaction's last statement committed it (or, its only one, ran on its own): nothing is left to commit. */
  finished: boolean;
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
function txClient(db: Db, conn: Connection, state: TxState): TxClient {
  const base = db.client as TxClient;
  const client = Object.create(base) as TxClient;
  client.transacting = true;
  client.acquireConnection = () => (state.completed ? Promise.reject(completedError()) : Promise.resolve(conn));
  client.releaseConnection = () => Promise.resolve();
  client.query = (c: Connection, obj: unknown) => {
    if (state.completed) return Promise.reject(completedError());
    if (c !== conn) return Promise.reject(new Error('Invalid connection for transaction query.'));
    if (!state.begun) {
      // The transaction's first statement: BEGIN goes with it (`_query` below), and is logged first, as it is sent first.
      state.begun = true;
      state.beginWithNext = true;
      client.emit('query', { __knexUid: c.__knexUid, __knexTxId: c.__knexTxId, method: 'raw', sql: BEGIN, bindings: [] });
    }
    return base.query.call(client, c, obj);
  };
  client._query = async (c: Connection, obj: QueryObject) => {
    if (state.commitWithNext) {
      state.commitWithNext = false;
      client.emit('query', { __knexUid: c.__knexUid, __knexTxId: c.__knexTxId, method: 'raw', sql: COMMIT, bindings: [] });
      return withCommit(c, obj);
    }
    if (!state.beginWithNext) return base._query.call(client, c, obj);
    state.beginWithNext = false;
    // BEGIN goes first, alone, before a statement with pg options other than a name, and before
    // a named one this connection has not prepared yet: pg takes any ParseComplete of the flight
    // (BEGIN's) for the named statement's, and would not prepare it again if its Parse failed.
    if (!foldable(obj) || (obj.options?.name !== undefined && !preparedOn(c, obj.options.name))) {
      await base._query.call(client, c, { sql: BEGIN, bindings: [] });
      return base._query.call(client, c, obj);
    }
    return afterBegin(c, obj);
  };
  // A stream (a cursor, pg-query-stream: not a dependency) would bypass `_query`, so would run
  // outside the transaction when first: refused, as a Knex without pg-query-stream refuses it.
  client.stream = (_c: Connection, _obj: unknown, stream: NodeJS.EventEmitter) => {
    const err = new Error('runInTransaction: streams are not supported in these transactions');
    stream.emit('error', err);
    return Promise.reject(err);
  };
  return client;
}

const BEGIN = 'BEGIN;';
const COMMIT = 'COMMIT;';

/**
 * A transaction's first statement with its BEGIN in front, in one flight: BEGIN's Parse, Bind
 * and Execute, then the statement's messages and one Sync, written together (the extended
 * protocol runs what comes before a Sync in order, and BEGIN opens the transaction block the
 * statement then runs in). One round trip to PostgreSQL instead of two, for the same
 * statements: BEGIN alone answered nothing the write waited for. The statement goes through
 * pg's own Query (its rows, its errors, its types); BEGIN's CommandComplete is kept from it,
 * so it sees its own statement's only. When it fails, PostgreSQL has opened the transaction
 * block all the same (BEGIN ran first), and runInTransaction rolls it back as it would any
 * failed statement.
 */
function afterBegin(conn: Connection, obj: QueryObject): Promise<QueryObject> {
  return inFlightWith(conn, obj, (query) => {
    const submit = query.submit;
    query.submit = function (this: PgQuery, connection: PgConnection) {
      connection.stream.cork?.();
      try {
        writeCommand(connection, BEGIN);
        return submit.call(this, connection);
      } finally {
        connection.stream.uncork?.();
      }
    };
    // BEGIN's CommandComplete comes first, the statement's after it.
    return keepCommandComplete(query, 1);
  });
}

/**
 * The statement `obj` through pg's own Query (its rows, its errors, its types), `arrange`d to
 * travel with a command; the text and values (not an object, which pg would copy): only
 * statements without pg options. `arrange` answers how many CommandComplete messages came: a
 * statement answered without the command's (pg's internals these functions build on changed)
 * is an error, so a transaction never goes on believing it has begun or committed when it has
 * not (runInTransaction then rolls back).
 */
function inFlightWith(conn: Connection, obj: QueryObject, arrange: (query: PgQuery) => () => number): Promise<QueryObject> {
  if (!obj.sql) return Promise.reject(new Error('The query is empty'));
  if (!foldable(obj)) return Promise.reject(new Error('runInTransaction: a statement sent with BEGIN or COMMIT takes no pg options but a name'));
  return new Promise((resolve, reject) => {
    let completions: () => number = () => 0;
    const done = (err: Error | null, response?: unknown) => {
      if (err) return reject(err);
      if (completions() !== 2) return reject(new Error(`runInTransaction: ${completions()} CommandComplete for a statement sent with BEGIN or COMMIT, not 2 (has pg's Query changed?)`));
      obj.response = response;
      resolve(obj);
    };
    const name = obj.options?.name;
    const query = name === undefined ? new Query(obj.sql, obj.bindings ?? [], done) : new NamedQuery({ text: obj.sql, values: obj.bindings ?? [], name }, undefined, done);
    query.queryMode = 'extended';
    completions = arrange(query);
    conn.query(query);
  });
}

/** A statement that may travel with BEGIN or COMMIT: no pg options, or only a name. */
function foldable(obj: QueryObject): boolean {
  return !obj.options || Object.keys(obj.options).every((k) => k === 'name');
}

/** Whether pg has prepared the statement `name` on this connection (its ParseComplete came). */
function preparedOn(conn: Connection, name: string): boolean {
  return conn.connection?.parsedStatements?.[name] !== undefined;
}

/** Statement names by text (statementName); texts are the services' compiled statements, a few dozen. Per process: a cache of a pure function. */
const statementNames = new Map<string, string>();
const STATEMENT_NAMES_KEPT = 1000;

/**
 * The name a statement text is prepared under (statementRows' `prepared`): `hf_s_` and 16 hex
 * digits of the text's SHA-256, so one name is always one text (pg refuses a name used for
 * another text on the same connection).
 */
export function statementName(sql: string): string {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `hf_s_${crypto.createHash('sha256').update(sql).digest('hex').slice(0, 16)}`;
    if (statementNames.size >= STATEMENT_NAMES_KEPT) statementNames.clear();
    statementNames.set(sql, name);
  }
  return name;
}

/** A command without parameters (BEGIN, COMMIT) as the unnamed statement: Parse, Bind, Execute. */
function writeCommand(connection: PgConnection, text: string): void {
  connection.parse({ text, name: '', types: [] });
  connection.bind({ portal: '', statement: '', values: [], binary: false, valueMapper: prepareValue });
  connection.execute({ portal: '', rows: 0 });
}

/** The query takes only its own CommandComplete, the flight's first (`ownIndex` 0) or second (1); the command's is dropped. Answers how many came. */
function keepCommandComplete(query: PgQuery, ownIndex: 0 | 1): () => number {
  const complete = query.handleCommandComplete;
  let seen = 0;
  query.handleCommandComplete = function (this: PgQuery, msg: unknown, connection: PgConnection) {
    if (seen++ === ownIndex) complete.call(this, msg, connection);
  };
  return () => seen;
}

/**
 * A transaction's last statement with its COMMIT behind it, in one flight: the statement's
 * Parse, Bind, Describe and Execute, then COMMIT's Parse, Bind and Execute, and one Sync. One
 * round trip instead of two: COMMIT alone answered nothing the write waited for. The
 * statement goes through pg's own Query; COMMIT's CommandComplete is kept from it. When the
 * statement fails, PostgreSQL skips COMMIT (everything up to the Sync) and the transaction
 * block is left failed: runInTransaction rolls it back as it would any failed statement. When
 * COMMIT fails (a deferred constraint, a serialization failure), its error is the statement's,
 * and the transaction has ended, rolled back.
 */
function withCommit(conn: Connection, obj: QueryObject): Promise<QueryObject> {
  return inFlightWith(conn, obj, (query) => {
    query._getRows = function (this: PgQuery, connection: PgConnection, rows: number | undefined) {
      connection.execute({ portal: this.portal, rows });
      writeCommand(connection, COMMIT);
      connection.sync();
    };
    // The statement's CommandComplete comes first, COMMIT's after it.
    return keepCommandComplete(query, 0);
  });
}

/**
 * Runs `fn` in a transaction on one pooled connection: `BEGIN`, `fn(trx)`, `COMMIT`; when `fn`
 * throws (or the commit fails), `ROLLBACK` and the error. BEGIN travels with the first
 * statement (afterBegin); a `fn` that sends none sends no BEGIN, COMMIT nor ROLLBACK either.
 * COMMIT travels with a statement `fn` marks last (statementRows' `last`), and then is not
 * sent again. `trx` is what `knex.transaction`
 * gives (`trx(table)`, `trx.raw`, `trx.fn`, every query method, nested transactions as
 * savepoints), but costs one small object per transaction instead of a whole Knex instance:
 * this is the resources' write path (src/db/table-service.ts), where Knex's transaction object
 * was some 17% of what a write allocated (issue 14). The statements sent are the same.
 */
export async function runInTransaction<T>(db: Db, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  const base = db.client as TxClient;
  const conn = await takeConnection<Connection>(db);
  const state: TxState = { client: undefined as unknown as TxClient, conn, completed: false, begun: false, beginWithNext: false, commitWithNext: false, finished: false, depth: 0 };
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
    let out: T;
    try {
      out = await fn(trx);
      // A transaction that sent no statement has nothing to commit (nor had it begun), nor has one whose last statement committed it.
      if (state.begun && !state.finished) await send(state, COMMIT, []);
    } catch (err) {
      state.completed = true;
      // A connection that broke is destroyed by the pool's validation when released.
      if (state.begun && !state.finished) await base.query.call(state.client, conn, { sql: 'ROLLBACK;', bindings: [] }).catch(() => undefined);
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
async function send(state: TxState, sql: string, bindings: unknown[], name?: string): Promise<{ rows: Record<string, any>[] }> {
  const obj = (await state.client.query(state.conn, { method: 'raw', sql, bindings, ...(name === undefined ? {} : { options: { name } }) })) as { response: { rows: Record<string, any>[] } };
  return obj.response;
}

/**
 * The rows of one statement in a transaction, its SQL (with `?` bindings, as `trx.raw` takes)
 * compiled once by the caller: in a transaction of runInTransaction it skips Knex's builder and
 * runner (a builder compiled on every write was a tenth of a product update's CPU, issue 14);
 * in any other (a caller's knex.transaction, or the database outside a transaction), `trx.raw`.
 * The statements sent are the same.
 *
 * `last`: the caller sends no statement after this one in the transaction. In a transaction of
 * runInTransaction (not inside a savepoint), the statement then carries the COMMIT (withCommit:
 * one round trip for both), or, when it is the transaction's only statement, runs on its own,
 * without BEGIN and COMMIT (one statement is atomic by itself: what PostgreSQL runs for
 * BEGIN, the statement, COMMIT in one flight). Either way the transaction refuses any further
 * statement, and what `fn` does after it cannot undo the write: it has committed. Elsewhere
 * `last` changes nothing.
 *
 * `prepared`: in a transaction of runInTransaction, the statement is named (statementName):
 * PostgreSQL parses it once per connection and, once its plan no longer depends on the values,
 * plans it once too, instead of on every write (parsing and planning were about half of what
 * PostgreSQL spent on a customer update's statements). Only for statements whose result
 * columns are written out (or that return none): a prepared statement that returns `*` fails
 * once a migration adds a column to its table, and in a transaction that failure is the write's.
 */
export async function statementRows(trx: Knex | Knex.Transaction, sql: string, bindings: unknown[], opts: { last?: boolean; prepared?: boolean } = {}): Promise<Record<string, any>[]> {
  const state = (trx as unknown as { [STATE]?: TxState })[STATE];
  if (!state) return (await trx.raw(sql, bindings as Knex.RawBinding[])).rows;
  const name = opts.prepared ? statementName(sql) : undefined;
  if (!opts.last || state.depth > 0 || state.completed) return (await send(state, sql, bindings, name)).rows;
  try {
    if (!state.begun) {
      // The transaction's only statement: on its own (the client's query, past the wrapper that would send BEGIN with it).
      const base = Object.getPrototypeOf(state.client) as TxClient;
      const obj = (await base.query.call(state.client, state.conn, { method: 'raw', sql, bindings, ...(name === undefined ? {} : { options: { name } }) })) as { response: { rows: Record<string, any>[] } };
      return obj.response.rows;
    }
    state.commitWithNext = true;
    const rows = (await send(state, sql, bindings, name)).rows;
    state.finished = true;
    return rows;
  } finally {
    state.commitWithNext = false;
    state.completed = true;
  }
}
