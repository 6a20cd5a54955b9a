import knexFactory, { Knex } from 'knex';
import pg from 'pg';
import { logger } from '../logger';
import { rowBuilder, type Parser, type RowBuilder } from './rows';
import { fastTimestamptzParser } from './timestamps';

// bigint (count(*), bigserial ids) as JS numbers: ids stay far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number.parseInt(v, 10));
pg.types.setTypeParser(pg.types.builtins.TIMESTAMPTZ, fastTimestamptzParser(pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ)));
// numeric stays a string here; money is converted with decimal-safe code at the edges.

/*
 * pg's Result (pg/lib/result.js, pinned by package-lock.json) builds each row as a copy of an
 * object of every column, then sets them one by one. Its rows are built by rowBuilder instead
 * (src/db/rows.ts: one object literal, the same keys, order and values), when every column is
 * in text format (always, here); anything else, and rows as arrays, stay pg's.
 */
interface PgResult {
  _parsers?: Parser[];
  _hfBuild?: RowBuilder;
  addFields(fields: { name: string; format?: string }[]): void;
  parseRow(row: (string | null)[]): Record<string, unknown>;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const Result = require('pg/lib/result') as { prototype: PgResult };
const pgAddFields = Result.prototype.addFields;
const pgParseRow = Result.prototype.parseRow;
Result.prototype.addFields = function (this: PgResult, fields) {
  pgAddFields.call(this, fields);
  this._hfBuild = fields.length > 0 && fields.every((f) => (f.format ?? 'text') === 'text') ? rowBuilder(fields.map((f) => f.name)) : undefined;
};
Result.prototype.parseRow = function (this: PgResult, row) {
  return this._hfBuild ? this._hfBuild(row, this._parsers!) : pgParseRow.call(this, row);
};

export type Db = Knex;

export function createDb(connectionString: string, poolMax = 10): Db {
  const db = knexFactory({
    client: 'pg',
    connection: { connectionString, application_name: 'hostflow' },
    pool: { min: 0, max: poolMax, idleTimeoutMillis: 30_000 },
    acquireConnectionTimeout: 10_000,
    // Knex's own warnings (a connection lost, an acquire that failed) as log lines, not console output.
    log: {
      warn: (m: unknown) => logger.warn({ component: 'knex' }, String(m)),
      error: (m: unknown) => logger.error({ component: 'knex' }, String(m)),
      deprecate: (m: unknown) => logger.warn({ component: 'knex' }, String(m)),
      debug: (m: unknown) => logger.debug({ component: 'knex' }, String(m)),
    },
  });
  useLightQueries(db);
  return db;
}

/** Numbered statement texts kept (useLightQueries), and the longest text kept. Per process: a cache of a pure function, nothing shared. */
const POSITIONED_KEPT = 1000;
const POSITIONED_KEY_MAX = 4096;

/*
 * pg's Query (exported; pinned by package-lock.json). Given an object, its constructor copies
 * it through Object.getOwnPropertyDescriptors (pg's cloneQueryConfig); given the text and the
 * values, it makes one small object.
 */
type PgCallback = (err: Error | null, response?: unknown) => void;
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { Query } = require('pg') as { Query: new (text: string, values: unknown[], callback: PgCallback) => object };

/**
 * Two per-statement costs of Knex's pg dialect, taken off every statement (issue 14; each about
 * 1% of a product create's CPU), the statements, rows, types and errors unchanged:
 * - it numbers the `?` bindings with a regular expression on every run: the numbered text is
 *   kept by statement text (most statements are a few texts: the writes are compiled once);
 * - it sends each statement as `new Query({ text, values, ...options })`, an object pg copies:
 *   a statement without pg options (all but a prepared one) goes as `new Query(text, values)`,
 *   which pg normalizes to the same query.
 */
function useLightQueries(db: Db): void {
  const client = db.client as Knex.Client & {
    _query(conn: { query(q: object): void }, obj: { sql: string; bindings?: unknown[]; options?: object; response?: unknown }): Promise<unknown>;
    positionBindings(sql: string): string;
  };
  const positioned = new Map<string, string>();
  const knexPosition = client.positionBindings;
  client.positionBindings = function (sql) {
    let out = positioned.get(sql);
    if (out === undefined) {
      out = knexPosition.call(this, sql);
      if (sql.length <= POSITIONED_KEY_MAX) {
        if (positioned.size >= POSITIONED_KEPT) positioned.clear();
        positioned.set(sql, out);
      }
    }
    return out;
  };
  const knexQuery = client._query;
  client._query = function (conn, obj) {
    if (!obj.sql || (obj.options && Object.keys(obj.options).length > 0)) return knexQuery.call(this, conn, obj);
    return new Promise((resolve, reject) => {
      conn.query(
        new Query(obj.sql, obj.bindings ?? [], (err, response) => {
          if (err) return reject(err);
          obj.response = response;
          resolve(obj);
        }),
      );
    });
  };
}

/** Pool statistics for /metrics. */
export function poolStats(db: Db): { used: number; free: number; pending: number; max: number } {
  // tarn.js pool behind knex
  const pool = (db.client as { pool?: { numUsed(): number; numFree(): number; numPendingAcquires(): number; max: number } }).pool;
  if (!pool) return { used: 0, free: 0, pending: 0, max: 0 };
  return { used: pool.numUsed(), free: pool.numFree(), pending: pool.numPendingAcquires(), max: pool.max };
}
