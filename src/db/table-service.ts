import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { z } from 'zod';
import { humanList } from '../infra/text';
import { DomainError } from './domain-error';
import { isPgError, isStillReferenced, PG_FOREIGN_KEY_VIOLATION, PG_UNIQUE_VIOLATION } from './errors';
import type { Db } from './knex';
import { runList, type ListQuery, type ListSpec } from './list';
import { Decimal, minorUnits } from './money';
import { preparedRows, resultTypeChanged } from './prepared';
import { recordBuilder } from './record-builder';
import type { FieldSet, ReadOptions, ResourceDefinition, ResourceExamples, ResourceService } from './resource';
import type { ResourceLink } from './resource-link';
import { toTimestamp } from './timestamps';
import { runInTransaction, statementRows } from './transaction';

/** How a column travels between the API and the database. */
export type ColumnKind = 'int' | 'text' | 'bool' | 'money' | 'json' | 'timestamp';

export type Trx = Knex.Transaction;
export type Row = Record<string, any>;
/** Reference field -> the row it points at; only fields the write sets (and that exist). */
export type Refs = Record<string, Row>;

/**
 * A column value a hook sets for the transaction's time (CURRENT_TIMESTAMP, as Knex's
 * `fn.now()`), which keeps the write one of the statements compiled once per set of columns: a
 * raw expression such as `fn.now()` takes Knex's builder on every write. Every update sets
 * date_modified to it already. Hooks set it for: customers' `date_modified` on a change of the
 * account alone (the row must be written even if none of its other columns change), and
 * memberships' `date_activated` and `date_cancellation` when a status change dates them.
 */
export const NOW = Symbol('CURRENT_TIMESTAMP');

/**
 * The sets of written columns (per service and operation's key, in the order first written) whose
 * statements are prepared on each pooled connection: a handful in practice (a resource's create
 * and its usual updates); a client varying the fields it sends gets the others unnamed.
 */
const PREPARED_WRITES = 16;

/** The last generation of columns any service took (TableService's forgetStaleColumns). */
let generations = 0;

/** A table's columns in their order (TableService's tableColumns): its name resolved as the statements resolve it. */
const TABLE_COLUMNS = 'select attname as name from pg_attribute where attrelid = to_regclass(?) and attnum > 0 and not attisdropped order by attnum';

/** What a write's hooks get besides its rows. */
export interface WriteContext {
  /** The validated input, fields not stored in the table included (customers' account fields); empty on a delete. */
  input: Row;
  /**
   * Runs `effect` once the write's transaction has committed, in order (a workflow start or
   * stop, which must not happen inside it). Not for a write in a caller's transaction.
   */
  afterCommit(effect: () => Promise<unknown>): void;
  /** False for a write in a caller's transaction (afterCommit is then the caller's business). */
  ownTransaction: boolean;
}

/** A create or update, as the `changed` hook sees it. */
export interface RecordChange {
  /** The row before the write (raw columns); null on a create. */
  before: Row | null;
  /** The row after it (raw columns). */
  after: Row;
  /** The record the write answers. */
  record: Row;
  /**
   * The write's transaction is its own and ends with this hook: the hook's last statement may
   * carry its COMMIT (statementRows' `last`; recordEvent's). Absent or false: more may follow.
   */
  last?: boolean;
}

export interface TableResourceConfig {
  table: string;
  /** Model name for error codes and the `model` field. */
  model: string;
  /**
   * Every API field stored in a column of the same name (id and the dates excepted), in the
   * order records answer them; a field of `join.fields` is read from the joined table instead
   * and never written.
   */
  columns: Record<string, ColumnKind>;
  /** List spec with columns qualified by the alias `t` (`join.alias` with a join). */
  listSpec: ListSpec;
  /** Reference fields: a value that matches no row is a 400 naming the field. */
  references?: Record<string, { table: string; label: string }>;
  /** Unique constraint (or index) name -> the field and message of the 400. */
  uniques?: Record<string, { field: string; message: string }>;
  /**
   * Reads from more than the table (customers: joined to their user). Every read selects its
   * columns by name, and a record is answered as read through the join (after a write too, in
   * its transaction); a whole record outside a transaction is a prepared statement.
   */
  join?: {
    /** The table's alias in `from` and the list spec. */
    alias: string;
    /** Fields of `columns` read from a joined table -> their column (`u.email`). */
    fields: Record<string, string>;
    /** The query a read starts from, selecting `columns`; `list`: the list query it serves. */
    from(db: Knex | Trx, columns: string[], list?: ListQuery): Knex.QueryBuilder;
  };
  /**
   * The hooks, every one optional. The write hooks are business rules; they run inside the
   * write's transaction, in this order: `beforeWrite` (before it, nothing read yet), the row
   * locked (update, delete), the reference check, `before*`, the statement, `after*`; effects
   * given to `afterCommit` run after the commit. `refs` holds the rows the write's reference
   * fields point at (fetched with the reference check, in the same round trip), so a rule
   * about them asks nothing more. `cols` may be changed: it is what is written.
   */
  hooks?: {
    /** Refusals that need nothing read (domains: no check can start now: 503). */
    beforeWrite?(input: Row, op: 'create' | 'update'): void;
    beforeCreate?(trx: Trx, cols: Row, refs: Refs, write: WriteContext): Promise<void>;
    /** A hook that changes the written row returns it as it is now. */
    afterCreate?(trx: Trx, row: Row, write: WriteContext): Promise<Row | void>;
    beforeUpdate?(trx: Trx, current: Row, cols: Row, refs: Refs, write: WriteContext): Promise<void>;
    /** Not run when the update writes nothing (an empty `cols` answers the row as it is). */
    afterUpdate?(trx: Trx, before: Row, after: Row, write: WriteContext): Promise<Row | void>;
    /** Without it a delete is one statement (no row to lock and hand over). */
    beforeDelete?(trx: Trx, row: Row, write: WriteContext): Promise<void>;
    /**
     * Last, in the write's transaction: the change, with `record` as the write answers it
     * (`present` applied) and `before` the row as it was (null on a create). Where a resource
     * writes its events, so a change and its events commit together (the transactional outbox).
     */
    changed?(trx: Trx, change: RecordChange): Promise<void>;
  };
  /** Extra fields computed for the API from the row. */
  decorate?(row: Row, rec: Row): void;
  /**
   * Fields computed from more than the row (domains' dns_record: the mapping target setting),
   * for every record of an answer at once; `fields`: those asked for (undefined: all).
   */
  present?(records: Row[], fields: FieldSet | undefined): Promise<void>;
  /** A computed field -> the columns it is computed from (read whenever it is asked for). */
  computedFrom?: Record<string, string[]>;
  /**
   * An error of a write the resource words itself (customers: a user that vanished, a customer
   * still in use): the error to throw instead, or undefined for the generic mapping.
   */
  mapError?(err: unknown, op: 'create' | 'update' | 'delete', id?: number): unknown;
  /**
   * Money columns priced in the record's `currency` column (USD when none is given): a value
   * with more decimals than the currency's minor unit (USD 2, JPY 0, KWD 3) is a 400 naming it.
   */
  currencyAmounts?: string[];
}

/**
 * list/get/create/update/delete of one table, for resources whose API fields are their
 * columns: every resource service is one of these, configured with its table, list spec and
 * hooks (TableResourceConfig). Reference checks, constraint mapping and the resource's rules
 * (hooks) run in the same transaction as the write, so a refused request changes nothing.
 */
export class TableService implements ResourceService<Row> {
  /** The columns as a list, made once: toRecord runs for every row of a page. */
  private readonly columnEntries: [string, ColumnKind][];
  /** The table's alias in reads and the list spec. */
  private readonly alias: string;
  /** Every column a whole record reads: `t.*`, or by name through a join. */
  private readonly allColumns: string[];
  /**
   * GET one's statement, compiled once from the same builder as the lists: the hottest read
   * then skips Knex's query building and runner, and PostgreSQL plans it once per connection
   * (a prepared statement, named after its text); inside a transaction it goes through the
   * transaction. Without a join it selects `t.*`: a migration that adds or drops a column
   * makes PostgreSQL refuse it once per connection, and preparedRows prepares it again.
   */
  private readonly getOne: { name: string; sql: string; native: string };
  /** A row locked for a write (`select <the table's columns> ... where id = ? limit ? for update`), compiled once its columns are known (tableColumns). */
  private lockOne?: string;
  /** The table's columns as this process first read them (tableColumns). */
  private columns?: string[];
  /** The columns' generation (forgetStaleColumns): 0, then a number no other service of the process has had, written into the statements' texts so that they are prepared anew. */
  private generation = 0;
  /** The writes' statements by operation and columns (writeRows): the SQL, and each binding's column (null: the id). */
  private readonly writes = new Map<string, { sql: string; from: (string | null)[]; prepared: boolean }>();
  /** A row's record before `decorate` (recordBuilder): toRecord runs for every row of every answer. */
  private readonly buildRecord: (row: Row) => Row;

  constructor(
    readonly db: Db,
    readonly cfg: TableResourceConfig,
  ) {
    this.columnEntries = Object.entries(cfg.columns);
    this.buildRecord = recordBuilder(cfg.model, this.columnEntries);
    this.alias = cfg.join?.alias ?? 't';
    this.allColumns = cfg.join ? [`${this.alias}.id`, ...Object.keys(cfg.columns).map((f) => this.columnOf(f)), `${this.alias}.date_created`, `${this.alias}.date_modified`] : ['t.*'];
    const compiled = this.readQuery(db, this.allColumns).where(`${this.alias}.id`, 0).limit(1).toSQL();
    const native = compiled.toNative().sql;
    this.getOne = { name: `hostflow_${cfg.model}_get_one_${crypto.createHash('sha256').update(native).digest('hex').slice(0, 8)}`, sql: compiled.sql, native };
  }

  /**
   * A write's statement, as Knex builds it: `insert ... returning *`, or `update ... set <cols>,
   * date_modified = CURRENT_TIMESTAMP where id = ? returning *`. Compiled once per set of
   * columns (Knex's builder compiled it on every write) when every value is a plain one (text,
   * number, boolean, null, a date): the SQL with its `?` and where each binding comes from.
   * `NOW` is written into the SQL as CURRENT_TIMESTAMP (its column is part of the statement's
   * key). Any other value Knex would put into the SQL itself (a raw expression a hook set)
   * takes Knex's builder.
   */
  private async writeRows(trx: Trx, op: 'insert' | 'update', cols: Row, id?: number, last = false): Promise<Row[]> {
    const build = (db: Knex | Trx, values: Row, where: unknown, returning: string | string[] = '*') =>
      op === 'insert' ? db(this.cfg.table).insert(values).returning(returning) : db(this.cfg.table).where({ id: where }).update({ ...values, date_modified: db.fn.now() }).returning(returning);
    const keys = Object.keys(cols);
    const withNow = (db: Knex | Trx) => Object.fromEntries(keys.map((k) => [k, cols[k] === NOW ? db.fn.now() : cols[k]]));
    if ((op === 'insert' && keys.length === 0) || !keys.every((k) => cols[k] === NOW || isPlainValue(cols[k]))) return build(trx, withNow(trx), id);
    const cacheKey = `${op} ${keys.map((k) => (cols[k] === NOW ? `${k}=now` : k)).join(',')}`;
    let compiled = this.writes.get(cacheKey);
    if (!compiled) {
      // Each bound value a marker, to learn which binding is which.
      const markers = new Map<unknown, string | null>(keys.filter((k) => cols[k] !== NOW).map((k) => [new BindingOf(k), k]));
      const idMarker = new BindingOf('id');
      markers.set(idMarker, null);
      const values = Object.fromEntries([...markers].filter(([, k]) => k !== null).map(([m, k]) => [k, m]));
      for (const k of keys) if (cols[k] === NOW) values[k] = this.db.fn.now();
      const { sql, bindings } = build(this.db, values, idMarker, await this.tableColumns(trx)).toSQL();
      if (!bindings.every((b) => markers.has(b))) return build(trx, withNow(trx), id);
      // Prepared (statementRows' `prepared`) for the first PREPARED_WRITES sets of columns only: each holds some 16-48 KB of every pooled connection's server memory.
      compiled = { sql: this.tagged(sql), from: bindings.map((b) => markers.get(b)!), prepared: this.writes.size < PREPARED_WRITES };
      if (this.writes.size < 64) this.writes.set(cacheKey, compiled);
    }
    return statementRows(trx, compiled.sql, compiled.from.map((k) => (k === null ? id : cols[k])), { last, prepared: compiled.prepared });
  }

  /**
   * The write is its transaction's last statement (statementRows' `last`: it carries the
   * COMMIT) when the transaction is the write's own and nothing reads or writes after it: no
   * hook after the write nor `changed`, no join to read the record through.
   */
  private writeIsLast(outer: Trx | undefined, after: unknown): boolean {
    return !outer && !after && !this.cfg.hooks?.changed && !this.cfg.join;
  }

  /** The row `id`, locked until the transaction ends. */
  private async lockedRow(trx: Trx, id: number): Promise<Row | undefined> {
    this.lockOne ??= this.tagged(this.db(this.cfg.table).select(await this.tableColumns(trx)).where({ id: 0 }).forUpdate().first().toSQL().sql);
    return (await statementRows(trx, this.lockOne, [id, 1], { prepared: true }))[0];
  }

  /**
   * The table's columns, in their order, as this process first finds them (the catalogue, read
   * once, in the write's transaction): what the write path's statements select and return
   * instead of `*`. They are prepared (statementRows' `prepared`: PostgreSQL parses and plans
   * them once per connection, not on every write), and a prepared statement that returns `*`
   * fails once a migration adds a column to its table ("cached plan must not change result
   * type"), which would abort the write's transaction during a rolling deploy. A column added
   * later is not read by this process's code, which does not know it.
   */
  private async tableColumns(trx: Trx): Promise<string[]> {
    if (!this.columns) {
      // Each first write reads them in its own transaction (never through another connection of the pool, which a busy pool may not have to give).
      const rows = await statementRows(trx, TABLE_COLUMNS, [this.cfg.table]);
      if (rows.length === 0) throw new Error(`${this.cfg.table}: no columns in the catalogue`);
      this.columns = rows.map((r) => String(r.name));
    }
    return this.columns;
  }

  /**
   * After a write failed because a migration changed the table under the statements prepared
   * from its columns (a column they name dropped: 42703; a column's type changed: "cached plan
   * must not change result type"), the columns are read again by the next write, and its
   * statements, their texts marked with a new generation, are prepared anew on each connection.
   * The write that met the change fails (it cannot be retried: its transaction is aborted, and
   * its hooks have run); the ones after it do not.
   */
  private forgetStaleColumns(err: unknown): void {
    if ((err as { code?: string })?.code !== '42703' && !resultTypeChanged(err)) return;
    this.columns = undefined;
    this.lockOne = undefined;
    this.writes.clear();
    // Unique in the process: two services of one table (the API's and an activity's) that each read the columns again must not share a text prepared before a change.
    this.generation = ++generations;
  }

  /** A statement's text, marked with the columns' generation after the first (forgetStaleColumns). */
  private tagged(sql: string): string {
    return this.generation === 0 ? sql : `/* hostflow generation ${this.generation} */ ${sql}`;
  }

  /** The column a field is read from. */
  private columnOf(field: string): string {
    return this.cfg.join?.fields[field] ?? `${this.alias}.${field}`;
  }

  /** The query a read starts from. */
  private readQuery(db: Knex | Trx, columns: string[], list?: ListQuery): Knex.QueryBuilder {
    return this.cfg.join ? this.cfg.join.from(db, columns, list) : db(`${this.cfg.table} as t`).select(columns);
  }

  /** The record of a row; a row read for some fields only (columnsFor) gives those fields. */
  toRecord(row: Row): Row {
    const rec = this.buildRecord(row);
    this.cfg.decorate?.(row, rec);
    return rec;
  }

  /**
   * The columns a read selects: every one, or those the fields need (computed fields: what
   * they are computed from), and the id. `extra`: columns the query needs besides (its order).
   */
  columnsFor(fields: FieldSet | undefined, extra: string[] = []): string[] {
    if (!fields) return this.allColumns;
    const cols = new Set([`${this.alias}.id`]);
    for (const f of fields) {
      if (Object.hasOwn(this.cfg.columns, f) || f === 'date_created' || f === 'date_modified') cols.add(this.columnOf(f));
      for (const c of this.cfg.computedFrom?.[f] ?? []) cols.add(this.columnOf(c));
    }
    for (const c of extra) cols.add(c);
    return [...cols];
  }

  /**
   * The written amounts against the currency's minor unit. On an update, a changed currency
   * holds the amounts the write leaves as they are to it too.
   */
  checkMinorUnits(cols: Row, current?: Row): void {
    const amounts = this.cfg.currencyAmounts;
    if (!amounts) return;
    const currency = String(cols.currency ?? current?.currency ?? 'USD').trim();
    const digits = minorUnits(currency);
    const currencyChanged = current !== undefined && cols.currency !== undefined && cols.currency !== String(current.currency).trim();
    const errors: Record<string, string> = {};
    for (const name of amounts) {
      const v = cols[name] ?? (currencyChanged ? current[name] : undefined);
      if (v === undefined || v === null || new Decimal(v).decimalPlaces() <= digits) continue;
      errors[name] = cols[name] !== undefined ? `must have at most ${digits} decimal place${digits === 1 ? '' : 's'} in ${currency}.` : `${new Decimal(v).toFixed()} has more decimals than ${currency} (${digits}): give it again with the currency.`;
    }
    if (Object.keys(errors).length) throw DomainError.invalid(errors);
  }

  /** Validated API input to column values (joined fields are not this table's). */
  toColumns(input: Row): Row {
    const cols: Row = {};
    for (const [name, kind] of this.columnEntries) {
      if (!(name in input) || input[name] === undefined || this.cfg.join?.fields[name] !== undefined) continue;
      const v = input[name];
      if (kind === 'json') cols[name] = JSON.stringify(v);
      else if (kind === 'timestamp') cols[name] = toTimestamp(v);
      else cols[name] = v;
    }
    return cols;
  }

  async list(q: ListQuery, read: ReadOptions = {}) {
    // The order's column is read too: a page's rows keep what they are ordered by.
    const columns = this.columnsFor(read.fields, [q.orderColumn]);
    const page = await runList<Row>(this.db, () => this.readQuery(this.db, columns, q), q, this.cfg.listSpec);
    const rows = page.rows.map((r) => this.toRecord(r));
    await this.cfg.present?.(rows, read.fields);
    return { ...page, rows };
  }

  async getRow(id: number, db: Knex | Trx = this.db): Promise<Row | undefined> {
    return db(this.cfg.table).where({ id }).first();
  }

  /** `opts.db`: read in that transaction; `opts.fields`: only what those fields need. */
  async get(id: number, opts: ReadOptions & { db?: Knex | Trx } = {}): Promise<Row | null> {
    const rec = await this.readRecord(id, opts);
    if (rec) await this.cfg.present?.([rec], opts.fields);
    return rec;
  }

  /** A record as read (before `present`). */
  private async readRecord(id: number, opts: ReadOptions & { db?: Knex | Trx }): Promise<Row | null> {
    const db = opts.db ?? this.db;
    let row: Row | undefined;
    if (opts.fields) row = await this.readQuery(db, this.columnsFor(opts.fields)).where(`${this.alias}.id`, id).first();
    else if (db === this.db) [row] = await preparedRows<Row>(this.db, this.getOne.name, this.getOne.native, [id, 1]);
    // Through a join, its columns are named (prepared); `t.*` is not (see tableColumns).
    else [row] = await statementRows(db as Trx, this.tagged(this.getOne.sql), [id, 1], { prepared: Boolean(this.cfg.join) });
    return row ? this.toRecord(row) : null;
  }

  async getMany(ids: number[], read: ReadOptions = {}): Promise<Row[]> {
    if (ids.length === 0) return [];
    const rows = await this.readQuery(this.db, this.columnsFor(read.fields)).whereIn(`${this.alias}.id`, ids);
    const recs = rows.map((r: Row) => this.toRecord(r));
    await this.cfg.present?.(recs, read.fields);
    return recs;
  }

  /** Runs `fn` in the caller's transaction when given (no savepoint), else in one of its own. */
  protected inTransaction<T>(trx: Trx | undefined, fn: (trx: Trx) => Promise<T>): Promise<T> {
    return trx ? fn(trx) : runInTransaction(this.db, fn);
  }

  /** A write's context, and what runs its effects once the write committed. */
  private writeContext(input: Row, outer?: Trx): { write: WriteContext; committed: () => Promise<void> } {
    const effects: (() => Promise<unknown>)[] = [];
    const write: WriteContext = {
      input,
      afterCommit: (effect) => {
        if (outer) throw new Error(`${this.cfg.model}: an effect after commit needs the write's own transaction`);
        effects.push(effect);
      },
      ownTransaction: !outer,
    };
    return {
      write,
      committed: async () => {
        for (const effect of effects) await effect();
      },
    };
  }

  /** The answer to a write: the written row, or the record read through the join in the write's transaction. */
  private async written(trx: Trx, row: Row): Promise<Row> {
    return this.cfg.join ? (await this.readRecord(Number(row.id), { db: trx }))! : this.toRecord(row);
  }

  /**
   * The rows the reference fields set in `cols` point at, in ONE query (a scalar subquery per
   * field); a value that matches no row is a 400 naming every such field.
   */
  async checkReferences(trx: Trx, cols: Row): Promise<Refs> {
    const asked = Object.entries(this.cfg.references ?? {}).filter(([field]) => cols[field] !== undefined && cols[field] !== null);
    if (asked.length === 0) return {};
    // Table and field names come from the resource's configuration, never from a request.
    const sql = asked.map(() => '(SELECT to_jsonb(r) FROM ?? r WHERE r.id = ?) AS ??').join(', ');
    const bindings = asked.flatMap(([field, ref]) => [ref.table, cols[field], field]);
    const found: Row = (await trx.raw(`SELECT ${sql}`, bindings)).rows[0];
    const errors: Record<string, string> = {};
    const refs: Refs = {};
    for (const [field, ref] of asked) {
      if (found[field] === null) errors[field] = `${field} ${cols[field]} does not match any ${ref.label}.`;
      else refs[field] = found[field];
    }
    if (Object.keys(errors).length) throw DomainError.invalid(errors);
    return refs;
  }

  /** `opts.id`: an id the server took from the table's sequence earlier (never a request's). */
  async create(input: Row, outer?: Trx, opts: { id?: number } = {}): Promise<Row> {
    this.cfg.hooks?.beforeWrite?.(input, 'create');
    const { write, committed } = this.writeContext(input, outer);
    let rec: Row;
    try {
      rec = await this.inTransaction(outer, async (trx) => {
        const cols = this.toColumns(input);
        this.checkMinorUnits(cols);
        const refs = await this.checkReferences(trx, cols);
        await this.cfg.hooks?.beforeCreate?.(trx, cols, refs, write);
        const [row] = await this.writeRows(trx, 'insert', opts.id !== undefined ? { ...cols, id: opts.id } : cols, undefined, this.writeIsLast(outer, this.cfg.hooks?.afterCreate));
        const changed = await this.cfg.hooks?.afterCreate?.(trx, row, write);
        return this.announce(trx, null, changed ?? row, await this.written(trx, changed ?? row), !outer);
      });
    } catch (err) {
      throw this.mapWriteError(err);
    }
    await committed();
    await this.cfg.present?.([rec], undefined);
    return rec;
  }

  /** A row's record as answers show it (`present` applied): for a write made outside the service, such as a workflow's step. */
  async recordOf(row: Row): Promise<Row> {
    const rec = this.toRecord(row);
    await this.cfg.present?.([rec], undefined);
    return rec;
  }

  /** The `changed` hook, given the record as answered (`present` applied first when there is one). */
  private async announce(trx: Trx, before: Row | null, after: Row, record: Row, last: boolean): Promise<Row> {
    const hook = this.cfg.hooks?.changed;
    if (!hook) return record;
    await this.cfg.present?.([record], undefined);
    await hook(trx, { before, after, record, last });
    return record;
  }

  async update(id: number, input: Row, outer?: Trx): Promise<Row | null> {
    this.cfg.hooks?.beforeWrite?.(input, 'update');
    const { write, committed } = this.writeContext(input, outer);
    let rec: Row | null;
    try {
      rec = await this.inTransaction(outer, async (trx) => {
        const current = await this.lockedRow(trx, id);
        if (!current) return null;
        const cols = this.toColumns(input);
        this.checkMinorUnits(cols, current);
        const refs = await this.checkReferences(trx, cols);
        await this.cfg.hooks?.beforeUpdate?.(trx, current, cols, refs, write);
        if (Object.keys(cols).length === 0) return this.written(trx, current);
        const [after] = await this.writeRows(trx, 'update', cols, id, this.writeIsLast(outer, this.cfg.hooks?.afterUpdate));
        const changed = await this.cfg.hooks?.afterUpdate?.(trx, current, after, write);
        return this.announce(trx, current, changed ?? after, await this.written(trx, changed ?? after), !outer);
      });
    } catch (err) {
      throw this.mapWriteError(err, id);
    }
    if (!rec) return null;
    await committed();
    await this.cfg.present?.([rec], undefined);
    return rec;
  }

  async remove(id: number): Promise<boolean> {
    const beforeDelete = this.cfg.hooks?.beforeDelete;
    const { write, committed } = this.writeContext({});
    let deleted: boolean;
    try {
      deleted = !beforeDelete
        ? (await this.db(this.cfg.table).where({ id }).delete()) > 0
        : await runInTransaction(this.db, async (trx) => {
            const row = await this.lockedRow(trx, id);
            if (!row) return false;
            await beforeDelete(trx, row, write);
            await trx(this.cfg.table).where({ id }).delete();
            return true;
          });
    } catch (err) {
      this.forgetStaleColumns(err);
      const own = this.cfg.mapError?.(err, 'delete', id);
      if (own !== undefined) throw own;
      if (isStillReferenced(err)) {
        const table = err.table ?? 'other records';
        throw DomainError.conflict(
          `wu_rest_${this.cfg.model}_in_use`,
          `This ${this.cfg.model} is still referenced by ${table}; delete or reassign those first.`,
          { referenced_by: table },
        );
      }
      throw err;
    }
    if (deleted) await committed();
    return deleted;
  }

  /** Constraint violations that slip past the checks (races) become the same 4xx; any other error (a hook's refusal too) passes as it is. */
  mapWriteError(err: unknown, id?: number): unknown {
    if (err instanceof DomainError) return err;
    this.forgetStaleColumns(err);
    const own = this.cfg.mapError?.(err, id === undefined ? 'create' : 'update', id);
    if (own !== undefined) return own;
    if (isPgError(err, PG_UNIQUE_VIOLATION)) {
      const u = this.cfg.uniques?.[err.constraint ?? ''];
      if (u) return DomainError.invalid({ [u.field]: u.message });
      return DomainError.conflict(`wu_rest_${this.cfg.model}_conflict`, `The ${this.cfg.model} conflicts with an existing one.`);
    }
    if (isPgError(err, PG_FOREIGN_KEY_VIOLATION)) {
      const c = err.constraint ?? '';
      const field = Object.keys(this.cfg.references ?? {}).find((f) => c.includes(f));
      if (field) return DomainError.invalid({ [field]: `${field} does not match any ${this.cfg.references![field].label}.` });
    }
    return err;
  }
}

/** A value a write binds as it is (Knex puts a raw expression or a builder into the SQL itself). */
function isPlainValue(v: unknown): boolean {
  return v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || v instanceof Date;
}

/** A stand-in value of one column while a write's statement is compiled (TableService.writeRows). */
class BindingOf {
  constructor(readonly column: string) {}
}

/** The schema under optional/nullable/default wrappers. */
function unwrap(schema: z.ZodType | undefined): z.ZodType | undefined {
  let s = schema as any;
  while (s && (s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodDefault)) s = s.unwrap();
  return s;
}

const timestamp = () => z.iso.datetime({ offset: true });

/**
 * The response schema of a table resource, derived from its columns: enumerations and the
 * shape of JSON columns are taken from the create schema, so the document states exactly
 * what validation accepts. `nullable` lists text/json columns that may be null (int and
 * timestamp columns always may).
 */
export function recordSchema(cfg: Pick<TableResourceConfig, 'model' | 'columns'>, createSchema: z.ZodObject, nullable: string[] = [], extra: Record<string, z.ZodType> = {}): z.ZodObject {
  const shape: Record<string, z.ZodType> = { id: z.int(), model: z.literal(cfg.model) };
  for (const [name, kind] of Object.entries(cfg.columns)) {
    const input = unwrap(createSchema.shape[name] as z.ZodType | undefined);
    let s: z.ZodType;
    if (kind === 'int') s = z.int().nullable();
    else if (kind === 'bool') s = z.boolean();
    else if (kind === 'money') s = z.number();
    else if (kind === 'timestamp') s = timestamp().nullable();
    else if (kind === 'json') s = input instanceof z.ZodArray ? z.array(z.unknown()) : input instanceof z.ZodRecord || input instanceof z.ZodObject ? z.record(z.string(), z.unknown()) : z.unknown();
    else s = input instanceof z.ZodEnum ? z.enum(input.options as [string, ...string[]]) : z.string();
    shape[name] = nullable.includes(name) && kind !== 'int' && kind !== 'timestamp' ? s.nullable() : s;
  }
  Object.assign(shape, extra);
  shape.date_created = timestamp();
  shape.date_modified = timestamp();
  return z.strictObject(shape);
}

/** The references and unique constraints of a table, in words (for the document). */
function tableRules(cfg: TableResourceConfig): string {
  const refs = Object.entries(cfg.references ?? {}).map(([field, ref]) => `${field} (a ${ref.label})`);
  const uniques = Object.values(cfg.uniques ?? {}).map((u) => u.message.replace(/\.$/, ''));
  return [
    refs.length ? `${humanList(refs)} must name existing records (400 naming the field otherwise).` : '',
    uniques.length ? `Refused (400 naming the field) when ${uniques.join('; ')}.` : '',
    cfg.currencyAmounts?.length
      ? `${humanList(cfg.currencyAmounts)} have no more decimals than the currency's minor unit (USD 2, JPY 0, KWD 3; 400 naming the field otherwise); changing the currency holds the amounts kept to it too.`
      : '',
  ]
    .filter(Boolean)
    .join(' ');
}

/**
 * The resource definition of a table resource: model, list spec and response schema come from
 * the service's table config, so a resource states each of them once.
 */
export function tableResource<S extends ResourceService<Row>>(
  service: S,
  cfg: TableResourceConfig,
  def: {
    plural: string;
    createSchema: z.ZodObject;
    updateSchema: z.ZodObject;
    nullable?: string[];
    extra?: Record<string, z.ZodType>;
    /** Response schemas of JSON columns (their items), where the create schema's input shape is not what is answered. */
    json?: Record<string, z.ZodType>;
    description?: string;
    links?: Record<string, ResourceLink>;
    examples?: ResourceExamples;
  },
): ResourceDefinition<Row> {
  return {
    model: cfg.model,
    plural: def.plural,
    listSpec: cfg.listSpec,
    createSchema: def.createSchema,
    updateSchema: def.updateSchema,
    recordSchema: recordSchema(cfg, def.createSchema, def.nullable, { ...def.json, ...def.extra }),
    description: [def.description, tableRules(cfg)].filter(Boolean).join(' '),
    service,
    links: def.links,
    examples: def.examples,
  };
}
