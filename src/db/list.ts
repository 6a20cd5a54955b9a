import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { DomainError } from './domain-error';
import { hourOf, hourStart, hoursBound } from './id-bounds';
import { preparedRows } from './prepared';
import { foldWhenMany, rowCountStatement } from './row-counts';
import { allTrigramsCommon, commonTrigrams, documentSql, uncommonRuns } from './search-trigrams';
import { statementName } from './transaction';

/**
 * The SQL half of the list machinery every list endpoint shares (http/list.ts parses the
 * request into a ListQuery and writes the headers): filters, search, order, keyset cursors,
 * paging and the count. Every SQL identifier comes from the resource's whitelist, never from
 * the request.
 */
/**
 * `upper`: a string compared in upper case (currency codes). `ci`: a string compared
 * case-insensitively, `lower(column) = lower(value)` (e-mails and user names, unique in any case:
 * an index on lower(column) serves it).
 */
export type FilterType = 'int' | 'string' | 'upper' | 'ci' | 'bool' | { enum: readonly string[] };

export interface ListSpec {
  /** SQL column (qualified) used for the default order and the id filter. */
  idColumn: string;
  /** SQL column holding the creation time. */
  dateCreatedColumn: string;
  /** SQL expressions matched with ILIKE for `search`. */
  searchable: string[];
  /**
   * The table the searchable columns (`alias.column`) belong to, when it keeps them together
   * in its `search_doc` column, under a trigram index (migrations/20261207000010_search_documents.ts):
   * a search then tests that column alone, and leaves the table's common trigrams out of its
   * index scan (search-trigrams.ts).
   */
  searchTable?: string;
  /**
   * The qualified column that holds the searched text, lowercased, when it is not the search
   * table's own `search_doc` (customers keep a copy of their user's:
   * migrations/20261207000020_customer_search_documents.ts).
   */
  searchDoc?: string;
  /** orderby value -> SQL column. */
  sortable: Record<string, string>;
  /**
   * filter parameter -> SQL column and value type; `known`: the only values the route
   * takes (it checks them itself, with its own message), for the document.
   */
  filters: Record<string, { column: string; type: FilterType; known?: readonly string[] }>;
  /**
   * Exact counts kept by the table's triggers (row_counts): `table` for the unfiltered list;
   * `by` maps a filter's SQL column to the counted column, for a list filtered on it alone.
   * Without it (or for other filters), the count is exact up to COUNT_EXACT_UP_TO.
   */
  counted?: { table: string; by?: Record<string, string> };
  /** Range filters besides date_created: `{name}[after]` / `{name}[before]` on this SQL column (a timestamp). */
  dateRanges?: Record<string, string>;
  /**
   * The table `idColumn` belongs to, the list's own (the base selects FROM it, aliased as
   * idColumn's qualifier). Given, a search ordered by id counts its matches in no order, and
   * past the count's bound reads its page by walking that table's newest rows, or those after
   * a cursor (runList's searchWalk and walkedOrSorted).
   */
  table?: string;
  /**
   * The table whose `id_bounds` rows bound its ids by the hour of `dateCreatedColumn`
   * (migrations/20261208000010_id_bounds.ts): a date range ordered by id then finds where its
   * page starts from them (runList's datePage) instead of from every index entry of the range.
   */
  idBounds?: string;
}

export interface ListQuery {
  page: number;
  perPage: number;
  search?: string;
  /** The orderby value (the cursor is bound to it) and its SQL column. */
  orderBy: string;
  orderColumn: string;
  order: 'asc' | 'desc';
  /** The opaque keyset cursor of a `Link` (verified when the list runs). */
  cursor?: string;
  conditions: { column: string; op: 'eq' | 'in' | 'not_in'; values: (string | number | boolean)[]; caseInsensitive?: boolean }[];
  dateAfter?: Date;
  dateBefore?: Date;
  /** The runs of `search` that the trigram index scan asks for (runList sets them: uncommonRuns); the whole term when absent. */
  searchRuns?: string[];
  /** The other date ranges asked for (ListSpec.dateRanges), each with one edge or both. */
  ranges?: { name: string; column: string; after?: Date; before?: Date }[];
}


function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** `lower(column) = lower(?)` (or IN / NOT IN a list of them): what an index on lower(column) serves. */
function whereLower(qb: Knex.QueryBuilder, c: ListQuery['conditions'][number]): void {
  const values = c.values.map(() => 'lower(?)').join(', ');
  qb.whereRaw(c.op === 'eq' ? `lower(??) = ${values}` : `lower(??) ${c.op === 'in' ? 'IN' : 'NOT IN'} (${values})`, [c.column, ...c.values]);
}

/** U+001F, which joins a searched table's columns in its `search_doc`. */
const DOC_SEPARATOR = '\u001f';

/**
 * WHERE conditions of a parsed list query (shared by the page query and the count).
 * `byIndex: false` leaves out a search's conditions that only narrow the trigram index scan
 * (the term's runs): for rows taken one by one by their ids, where they would only cost their
 * planning and their test.
 */
export function applyFilters(qb: Knex.QueryBuilder, q: ListQuery, spec: ListSpec, byIndex = true): Knex.QueryBuilder {
  for (const c of q.conditions) {
    if (c.caseInsensitive) whereLower(qb, c);
    else if (c.op === 'eq') qb.where(c.column, c.values[0]);
    else if (c.op === 'in') qb.whereIn(c.column, c.values);
    else qb.whereNotIn(c.column, c.values);
  }
  if (q.dateAfter) qb.where(spec.dateCreatedColumn, '>=', q.dateAfter);
  if (q.dateBefore) qb.where(spec.dateCreatedColumn, '<=', q.dateBefore);
  for (const r of q.ranges ?? []) {
    if (r.after) qb.where(r.column, '>=', r.after);
    if (r.before) qb.where(r.column, '<=', r.before);
  }
  if (q.search && spec.searchable.length > 0) {
    const pattern = `%${escapeLike(q.search)}%`;
    const doc = searchDocOf(spec);
    if (doc) {
      // The table's search_doc (migrations/20261207000010_search_documents.ts): its searched
      // columns joined by U+001F, lowercased, kept by a trigger, under a trigram index. `LIKE`
      // on it with the pattern lowercased is each column's `ILIKE` (PostgreSQL's ILIKE lowers
      // both sides the same way), and a term without U+001F matches within one column. The
      // index scan may be asked for the term's runs of uncommon trigrams (q.searchRuns), each
      // a substring of the term; the whole term still decides the matches, then through
      // `coalesce`, which PostgreSQL cannot serve from the index: else it would ask the index
      // for the whole term's trigrams too, the common ones the runs leave out.
      const runs = byIndex ? (q.searchRuns ?? []) : [];
      for (const run of runs) qb.whereRaw('?? LIKE lower(?)', [doc, `%${escapeLike(run)}%`]);
      qb.whereRaw(runs.length > 0 || !byIndex ? "coalesce(??, '') LIKE lower(?)" : '?? LIKE lower(?)', [doc, pattern]);
      if (!q.search.includes(DOC_SEPARATOR)) return qb;
      // A term with the separator could match across two columns: each column decides.
      return qb.where((w) => {
        for (const col of spec.searchable) w.orWhere(col, 'ilike', pattern);
      });
    }
    // Several columns of a table without a search_doc: their document, then each column (which drops matches across a separator).
    if (spec.searchable.length > 1 && byIndex) {
      for (const p of q.searchRuns?.map((run) => `%${escapeLike(run)}%`) ?? [pattern]) qb.whereRaw(`${documentSql(spec.searchable)} ILIKE ?`, [...spec.searchable, p]);
    }
    qb.where((w) => {
      for (const col of spec.searchable) w.orWhere(col, 'ilike', pattern);
    });
  }
  return qb;
}

/** The `search_doc` column (qualified as the list's searched columns are, unless `searchDoc` names it) of a list whose table keeps one; undefined otherwise. */
function searchDocOf(spec: ListSpec): string | undefined {
  if (!spec.searchTable || spec.searchable.length < 2) return undefined;
  if (spec.searchDoc) return spec.searchDoc;
  const first = spec.searchable[0];
  return `${first.slice(0, first.indexOf('.'))}.search_doc`;
}

/** The table a list searches with one trigram index, and the columns (unqualified) that index covers; undefined when it has none. */
export function searchTableOf(spec: ListSpec): { table: string; columns: string[] } | undefined {
  if (!spec.searchTable || spec.searchable.length < 2) return undefined;
  return { table: spec.searchTable, columns: spec.searchable.map((c) => c.slice(c.indexOf('.') + 1)) };
}

/** A filtered list's `X-WP-Total` is exact up to this many rows, then the planner's estimate. */
export const COUNT_EXACT_UP_TO = 1000;

/** A page of a list, and what its headers say. */
export interface ListPage<T> {
  rows: T[];
  total: number;
  /** false: `total` is the planner's estimate (more than COUNT_EXACT_UP_TO rows match). */
  exact: boolean;
  /** Cursors of the next and the previous page, when there are such pages. */
  next?: string;
  prev?: string;
}

// --- Keyset cursors -------------------------------------------------------------------------

export const CURSOR_SHAPE = /^[A-Za-z0-9_-]{1,1500}\.[A-Za-z0-9_-]{22}$/;
export const CURSOR_INVALID = 'cursor is not a cursor this list gave out (follow the Link header as it is), or it belongs to another orderby/order.';

/** [orderby, order, the order column's value as text (null for NULL), id, backwards]. */
type CursorBody = [string, 'asc' | 'desc', string | null, string, 0 | 1];

/** Per database (each app's Knex): where its cursor key comes from. */
const cursorKeys = new WeakMap<Knex, () => Promise<Buffer>>();
const processKey = crypto.randomBytes(32);

/**
 * The key the lists of `db` sign cursors with. The app sets one kept in that database, so
 * every replica accepts every other's cursors; without it, this process signs with a key of
 * its own.
 */
export function useCursorKey(db: Knex, source: () => Promise<Buffer>): void {
  cursorKeys.set(db, source);
}

const cursorKey = (db: Knex): Promise<Buffer> => cursorKeys.get(db)?.() ?? Promise.resolve(processKey);

async function signCursor(db: Knex, body: CursorBody): Promise<string> {
  const payload = Buffer.from(JSON.stringify(body)).toString('base64url');
  const mac = crypto.createHmac('sha256', await cursorKey(db)).update(payload).digest().subarray(0, 16).toString('base64url');
  return `${payload}.${mac}`;
}

async function openCursor(db: Knex, raw: string, q: ListQuery): Promise<{ value: string | null; id: string; back: boolean }> {
  const bad = () => DomainError.invalid({ cursor: CURSOR_INVALID });
  const [payload, mac] = raw.split('.');
  const expected = crypto.createHmac('sha256', await cursorKey(db)).update(payload).digest().subarray(0, 16);
  const given = Buffer.from(mac, 'base64url');
  if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) throw bad();
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!Array.isArray(body) || body.length !== 5) throw bad();
  const [orderBy, order, value, id, back] = body as CursorBody;
  if (orderBy !== q.orderBy || order !== q.order || (value !== null && typeof value !== 'string') || typeof id !== 'string') throw bad();
  return { value, id, back: back === 1 };
}

// --- Running a list ----------------------------------------------------------------------------

const SORT_KEY = '_hf_sort_key';
/** Ids looked at (per row of the page) from where a page ordered by id starts, before a date range uses its own index. */
const DATE_WINDOW_PER_ROW = 50;
const SORT_ID = '_hf_sort_id';
/** The count, carried by a page's first row (added last, so the rows drop it, their sort keys, in the reverse order: V8 then keeps them fast objects). */
const COUNT_COL = '_hf_count';
/** A search's matches (searchOnce): the CTE, and its columns. */
const MATCHES = 'hf_matches';
const MATCH_ID = 'hf_match_id';
const MATCH_KEY = 'hf_match_key';
/** A search's page (searchWalk): the rows from the walk of the newest ids, else from every match in order. */
const WALKED = 'hf_walked';
const ORDERED = 'hf_ordered';
const SORTED = 'hf_sorted';
const WALK = 'hf_walk';
const PAGE = 'hf_page';
const COUNT_CTE = 'hf_count';
/** Rows of the list's own table a search walks, per row it wants (the offset's and the page's), before it takes every match in order. */
export const SEARCH_WALK_PER_ROW = 150;
/** ... after a match among this many of them (per row wanted). */
export const SEARCH_PROBE_PER_ROW = 15;
/** The most rows a walk (and a tenth of it, its probe) tests, however deep its `page=N`: about 60 ms of work at most. */
export const SEARCH_WALK_MAX = 20_000;
/** A date range's window of ids (runList's datePage), its first id, the window from that id, and the range's sorted ids. */
const WINDOW = 'hf_window';
const ANCHOR = 'hf_anchor';
const ANCHOR_ID = 'hf_anchor_id';
const ANCHORED = 'hf_anchored';
const RANGED = 'hf_ranged';

/**
 * The rows after (v, id) in the scan order, as ORDER BY col, id sorts them (PostgreSQL puts
 * NULLs last ascending, first descending). Each part is one index range scan of
 * `(col, id)`: `col >= v` is implied by the row comparison but is what the index can use.
 * Two parts when NULLs follow: the second is asked only if the first runs short.
 */
function keysetParts(col: string, idCol: string, desc: boolean, v: string | null, id: string): ((qb: Knex.QueryBuilder) => void)[] {
  if (col === idCol) return [(qb) => qb.where(idCol, desc ? '<' : '>', id)];
  const cmp = desc ? '<' : '>';
  if (v === null) {
    const nulls = (qb: Knex.QueryBuilder) => qb.whereNull(col).where(idCol, cmp, id);
    return desc ? [nulls, (qb) => qb.whereNotNull(col)] : [nulls];
  }
  const values = (qb: Knex.QueryBuilder) => qb.where(col, desc ? '<=' : '>=', v).whereRaw(`(??, ??) ${cmp} (?, ?)`, [col, idCol, v, id]);
  return desc ? [values] : [values, (qb) => qb.whereNull(col)];
}

/**
 * A promise awaited later, maybe never (the page's query failed first): marked handled now, so
 * its failure is not an unhandled rejection meanwhile; awaiting it still throws.
 */
function awaitedLater<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

/** A cursor value from the database's text form failed to cast back (a column of another type). */
const BAD_TEXT = /^22/;

/**
 * The most list statements a process names (preparedList): each holds 64-97 KB of server memory
 * on every connection that runs it, its generic plan included (`pg_backend_memory_contexts`), so
 * 64 are at most about 5 MB per connection (pgjdbc, by default, keeps up to 256 statements
 * prepared on each), 50 MB for a pool of 10. The four large lists' page 1 in every order of
 * theirs are 36 texts. Past the bound, a list's statement goes unnamed, as every list did before.
 */
export const PREPARED_LISTS = 64;
/** A list statement is named from its third run in the process: the pages asked again and again get the names, not the first ones met. */
export const PREPARE_LIST_AFTER = 3;
const preparedListTexts = new Set<string>();
/** Runs of list statements not named yet, by text (at most LIST_RUNS_KEPT, then counted afresh). */
const listRuns = new Map<string, number>();
const LIST_RUNS_KEPT = 1000;

/**
 * A list page whose best plan does not depend on the values it is asked for, so that the plan
 * PostgreSQL keeps for its statement (a generic plan, after five runs) is the one it would make
 * for any of them: a list's own table (ListSpec.table: its orders each have their `(column, id)`
 * index), with no filter, search or date range, and no OFFSET; page 1 or after a cursor, in any
 * order. Each is one range scan of one index that stops after the page. A filter is not: its
 * generic plan is made for a value of average frequency, and for `status` (four values) on
 * 20,000 payments PostgreSQL then chose to walk the id index testing each row, which for a rare
 * or absent value reads the whole table (`EXPLAIN EXECUTE` of the prepared page after seven
 * runs). Filtered, searched and ranged pages stay unnamed, planned for their values every time.
 */
function planStable(q: ListQuery, spec: ListSpec, offset: boolean): boolean {
  return Boolean(spec.table) && !offset && q.conditions.length === 0 && q.search === undefined && q.dateAfter === undefined && q.dateBefore === undefined && (q.ranges?.length ?? 0) === 0;
}

/**
 * A plan-stable page's statement as a named (prepared) statement: parsed and planned once per
 * connection, where an unnamed one is parsed and planned on every request (pgbench, payments'
 * page 1 on a million rows, 4 clients: 6,097-6,671 tps unnamed, 14,972-16,819 named). Its
 * limits are literals (`skipBinding`): PostgreSQL plans a LIMIT parameter as a tenth of the
 * rows, which in a generic plan could favour a sort over the index.
 * A text is named from its PREPARE_LIST_AFTER-th run, up to PREPARED_LISTS texts per process; the
 * others, and any statement in a transaction, go unnamed.
 */
function preparedList(db: Knex, qb: Knex.QueryBuilder): Promise<Record<string, unknown>[]> {
  if (db.isTransaction) return qb as Promise<Record<string, unknown>[]>;
  const { sql, bindings } = qb.toSQL().toNative();
  if (!preparedListTexts.has(sql)) {
    if (preparedListTexts.size >= PREPARED_LISTS) return qb as Promise<Record<string, unknown>[]>;
    const runs = (listRuns.get(sql) ?? 0) + 1;
    if (runs < PREPARE_LIST_AFTER) {
      if (listRuns.size >= LIST_RUNS_KEPT) listRuns.clear();
      listRuns.set(sql, runs);
      return qb as Promise<Record<string, unknown>[]>;
    }
    listRuns.delete(sql);
    preparedListTexts.add(sql);
  }
  return preparedRows<Record<string, unknown>>(db, statementName(sql), sql, [...bindings]);
}

/**
 * Runs a list: `base` selects the rows (joins included); filters, order, paging and the
 * count are added here. Page 1, `page=N` (OFFSET, as WordPress clients send it) and keyset
 * cursors (the `Link` URLs: an index range scan from the last row seen, whatever the depth)
 * all answer the same rows. The count (countStatement) is a scalar subquery of the page's
 * first query: one round trip, and one snapshot, for both; PostgreSQL runs it once, when the
 * first row is made. It runs on its own after a first query that found no row.
 */
export async function runList<T>(db: Knex, base: () => Knex.QueryBuilder, q: ListQuery, spec: ListSpec): Promise<ListPage<T>> {
  const searched = q.search !== undefined ? searchTableOf(spec) : undefined;
  /** Every trigram of the search term common in its table: found fastest walking the list's order (searchInOrder). */
  let commonTerm = false;
  if (searched) {
    const common = await commonTrigrams(db, searched.table, searched.columns);
    const runs = uncommonRuns(q.search!, common);
    if (runs) q = { ...q, searchRuns: runs };
    commonTerm = allTrigramsCommon(q.search!, common);
  }
  /** A search ordered by id whose page may be walked to (searchWalk, walkedOrSorted): the list's own table. */
  const walkTable = q.search !== undefined && q.orderColumn === spec.idColumn && !commonTerm ? spec.table : undefined;
  const cursor = q.cursor === undefined ? undefined : await openCursor(db, q.cursor, q);
  const back = cursor?.back === true;
  const desc = (q.order === 'desc') !== back;
  const dir = desc ? 'desc' : 'asc';
  const want = q.perPage + 1;
  /** Ordered by id within a date range: the page is datePage's. */
  const byDate = q.orderColumn === spec.idColumn && (q.dateAfter !== undefined || q.dateBefore !== undefined);
  const pageQuery = (limit: number, part?: (qb: Knex.QueryBuilder) => void, count?: CountStatement) => {
    const qb = applyFilters(base(), q, spec).select(db.raw('??::text AS ??', [q.orderColumn, SORT_KEY]), db.raw('??::text AS ??', [spec.idColumn, SORT_ID]));
    if (count) qb.select(db.raw(`(${count.sql}) AS ??`, [...count.bindings, COUNT_COL]));
    part?.(qb);
    qb.orderBy(q.orderColumn, dir);
    if (q.orderColumn !== spec.idColumn) qb.orderBy(spec.idColumn, dir);
    const offset = !cursor && q.page > 1;
    if (!planStable(q, spec, offset)) {
      qb.limit(limit);
      if (offset) qb.offset((q.page - 1) * q.perPage);
      return qb as Promise<Record<string, unknown>[]>;
    }
    return preparedList(db, qb.limit(limit, { skipBinding: true }));
  };
  /** The count off the first query of a page, which carries it (or, when it found no row, run on its own). */
  const takeCount = (found: Record<string, unknown>[]) => {
    counts = awaitedLater(found.length > 0 ? countFrom(db, base, q, spec, countStmt!, found[0][COUNT_COL] as [number, number]) : countRows(db, base, q, spec, countStmt!));
    for (const r of found) delete r[COUNT_COL];
    return found;
  };
  /**
   * datePage's first id of the range in the page's order, for a table with `id_bounds`: not
   * the range's greatest (or least) id, which is an aggregate over its index entries, but a
   * bound of it at the cost of an hour of them. Descending: the greatest `max_id` of the range's
   * hours before the one `before` falls in, or the greatest id of the range's rows in that last,
   * partial hour (`edge`: the exact aggregate, over that hour's rows alone), whichever is
   * greater. Ascending, the same from the other end. Every row of the range is then on this
   * side of it (its hour's rows bound its id), and so is the page: the second window from it
   * holds the page whenever the range's first rows are within the window of it, as they are
   * from the range's own first id (a bound wider than that only sends the page to its last
   * strategy, the range's sorted ids).
   */
  const boundedAnchor = (table: string, edge: () => Knex.QueryBuilder) => {
    const col = spec.dateCreatedColumn;
    if (desc) {
      const last = hourOf(q.dateBefore!);
      const whole = hoursBound(db, table, 'max', q.dateAfter && hourOf(q.dateAfter), last - 1);
      return db.select(db.raw('greatest(?, ?) AS ??', [whole, edge().where(col, '>=', hourStart(last)), ANCHOR_ID]));
    }
    const first = hourOf(q.dateAfter!);
    const whole = hoursBound(db, table, 'min', first + 1, q.dateBefore && hourOf(q.dateBefore));
    return db.select(db.raw('least(?, ?) AS ??', [whole, edge().where(col, '<', hourStart(first + 1)), ANCHOR_ID]));
  };
  /**
   * A date range ordered by id, in ONE statement. PostgreSQL, knowing nothing of how ids
   * follow dates, would walk the id index from the newest row and skip every row newer than
   * the range. So, in a CTE, a bounded window of ids first: from where the page starts (the
   * cursor, else the list's first id) over DATE_WINDOW_PER_ROW ids a row. When the page is all
   * there (a recent range, or a page after a cursor in a range whose dates follow its ids) the
   * window's rows are the page: none of the range's rows outside the window can come first.
   * When it falls short (an older range, bounded on the side the page starts from), the
   * range's first id in the page's order anchors a second window of the same width, read off
   * the id index: in a range whose dates follow its ids, the page is there. That first id is
   * found from the hours' id bounds for a table that keeps them (boundedAnchor: an hour of the
   * range's index entries at most; the second window is then tried alone without a cursor),
   * else as `max(id + 0)` descending (an aggregate over the range's index, no sort: half the
   * cost of sorting the range's ids). Only when that falls short too are the range's ids
   * sorted (in proportion to the range). Each branch is gated by conditions PostgreSQL checks
   * once, before running it, and only as far as needed. The page's rows are then read by id,
   * with the count.
   */
  const datePage = (part?: (qb: Knex.QueryBuilder) => void) => {
    const window = String(DATE_WINDOW_PER_ROW * want);
    // Only a range bounded on the side the page starts from (`before` read newest first, `after` oldest first) has a first id away from the list's: without that bound, the second window would be the first again, and its two CTEs cost the statement's planning about half a millisecond.
    const anchoring = desc ? q.dateBefore !== undefined : q.dateAfter !== undefined;
    const offset = cursor ? 0 : (q.page - 1) * q.perPage;
    const ids = () => {
      const qb = applyFilters(base(), q, spec).clearSelect().select(db.raw('?? AS ??', [spec.idColumn, MATCH_ID]));
      part?.(qb);
      return qb;
    };
    const start = cursor ? db.raw('?::bigint', [cursor.id]) : base().clearSelect().select(spec.idColumn).orderBy(spec.idColumn, dir).limit(1);
    const windowed = ids()
      .where(spec.idColumn, desc ? '>' : '<', db.raw(`? ${desc ? '-' : '+'} ?::bigint`, [start, window]))
      .orderBy(spec.idColumn, dir)
      .limit(want)
      .offset(offset);
    const enough = (cte: string, cmp: '>=' | '<') => db.raw(`(SELECT count(*) FROM ??) ${cmp} ?`, [cte, want]);
    // `+ 0`: computed from the range's index, not read off the id index (which PostgreSQL would walk from the list's end).
    const firstId = (qb: Knex.QueryBuilder) => qb.clearSelect().select(db.raw(`${desc ? 'max' : 'min'}(?? + 0) AS ??`, [spec.idColumn, ANCHOR_ID]));
    const anchor = spec.idBounds && anchoring ? boundedAnchor(spec.idBounds, () => firstId(ids())) : firstId(ids());
    const anchorId = db.raw('(SELECT ?? FROM ??)', [ANCHOR_ID, ANCHOR]);
    const anchored = ids()
      .where(spec.idColumn, desc ? '<=' : '>=', anchorId)
      .where(spec.idColumn, desc ? '>' : '<', db.raw(`? ${desc ? '-' : '+'} ?::bigint`, [anchorId, window]))
      .orderBy(spec.idColumn, dir)
      .limit(want)
      .offset(offset);
    const ranged = ids().orderByRaw(`?? + 0 ${dir}`, [spec.idColumn]).limit(want).offset(offset);
    // Each part a CTE of its own: a CTE is run only as far as it is read, and PostgreSQL plans each apart (inside the UNION, the ranged part's sort lost its LIMIT).
    // From the hours' id bounds, without a cursor, the second window is tried alone: the bound is
    // the range's first id or past it, and no further than the list's own first id unless the
    // table's newest rows were deleted, so where the first window would hold the page, this one
    // does (and reading the first cost the old ranges' statements a walk of its ids for nothing).
    const fromBounds = spec.idBounds !== undefined && anchoring && !cursor;
    const statement = base();
    const tried: string[] = [];
    if (!fromBounds) {
      statement.withMaterialized(WINDOW, windowed);
      tried.push(WINDOW);
    }
    if (anchoring) {
      statement.withMaterialized(ANCHOR, anchor).withMaterialized(ANCHORED, anchored);
      tried.push(ANCHORED);
    }
    statement.withMaterialized(RANGED, ranged);
    // Each in turn, when those before it fell short: a window when it holds the page, else the range's sorted ids.
    const parts = [...tried, RANGED];
    const branch = (qb: Knex.QueryBuilder, i: number) => {
      qb.select(MATCH_ID).from(parts[i]);
      for (const shorter of parts.slice(0, i)) qb.where(enough(shorter, '<'));
      if (i < parts.length - 1) qb.where(enough(parts[i], '>='));
    };
    const keys = db.queryBuilder();
    branch(keys, 0);
    for (let i = 1; i < parts.length; i++) keys.unionAll((qb) => void branch(qb, i), true);
    return statement
      .with(MATCHES, keys)
      .select(db.raw('??::text AS ??', [q.orderColumn, SORT_KEY]), db.raw('??::text AS ??', [spec.idColumn, SORT_ID]), db.raw(`(${countStmt!.sql}) AS ??`, [...countStmt!.bindings, COUNT_COL]))
      .whereIn(spec.idColumn, (sub) => void sub.select(MATCH_ID).from(MATCHES))
      .orderBy(spec.idColumn, dir) as Promise<Record<string, unknown>[]>;
  };
  const readPage = async () => {
    const rows: Record<string, unknown>[] = [];
    const parts = cursor ? keysetParts(q.orderColumn, spec.idColumn, desc, cursor.value, cursor.id) : [undefined];
    // Ordered by id, a cursor's keyset is one part.
    if (byDate) return takeCount(await datePage(parts[0]));
    // A search ordered by id, after a cursor: the walk from it past COUNT_EXACT_UP_TO matches, else the matches after it sorted (walkedOrSorted); the count computed once, first, in a CTE the walk's gate and the rows read.
    if (walkTable && cursor) {
      const counted = db.raw(`SELECT (${countStmt!.sql}) AS n`, countStmt!.bindings);
      return takeCount(await pageRows(walkedOrSorted(walkTable, 0, cursor.id, counted).select(db.raw('(SELECT n FROM ??) AS ??', [COUNT_CTE, COUNT_COL])), PAGE));
    }
    for (const [i, part] of parts.entries()) {
      rows.push(...(i === 0 ? takeCount(await pageQuery(want - rows.length, part, countStmt)) : await pageQuery(want - rows.length, part)));
      if (rows.length >= want) break;
    }
    return rows;
  };
  /**
   * A search on the first pages, in ONE query: a CTE takes the matches' keys, up to
   * COUNT_EXACT_UP_TO + 1 of them, in the list's order (the trigram scan, a search's main
   * cost, runs once); the page's rows are those of its slice of the keys, and the count is the
   * keys'. The keys stay in PostgreSQL: only the page's rows travel.
   */
  const searchOnce = async () => {
    const offset = (q.page - 1) * q.perPage;
    const found: Record<string, unknown>[] = await (walkTable ? searchWalk(walkTable, offset) : searchInOrder(offset));
    // No row: no match at all (the first page), or a page past the matches, counted on its own.
    if (found.length === 0) return [found, offset === 0 ? { total: 0, exact: true } : await countRows(db, base, q, spec, countStatement(db, base, q, spec))] as const;
    const n = found[0][COUNT_COL] as number;
    for (const r of found) delete r[COUNT_COL];
    return [found, n <= COUNT_EXACT_UP_TO ? { total: n, exact: true } : await estimateRows(db, base, q, spec, n)] as const;
  };
  /** searchOnce's statement for any order: the first COUNT_EXACT_UP_TO + 1 matches in the list's order, the page their slice. */
  const searchInOrder = (offset: number) => {
    const keys = applyFilters(base(), q, spec)
      .clearSelect()
      .select(db.raw('?? AS ??', [spec.idColumn, MATCH_ID]), db.raw('?? AS ??', [q.orderColumn, MATCH_KEY]))
      .orderBy(q.orderColumn, dir)
      .modify((qb) => {
        if (q.orderColumn !== spec.idColumn) qb.orderBy(spec.idColumn, dir);
      })
      .limit(COUNT_EXACT_UP_TO + 1);
    return base()
      .with(MATCHES, keys)
      .select(db.raw('??::text AS ??', [q.orderColumn, SORT_KEY]), db.raw('??::text AS ??', [spec.idColumn, SORT_ID]), db.raw('(SELECT count(*)::int FROM ??) AS ??', [MATCHES, COUNT_COL]))
      .whereIn(spec.idColumn, (slice) => void slice.select(MATCH_ID).from(MATCHES).orderBy(MATCH_KEY, dir).orderBy(MATCH_ID, dir).offset(offset).limit(want))
      .orderBy(q.orderColumn, dir)
      .modify((qb) => {
        if (q.orderColumn !== spec.idColumn) qb.orderBy(spec.idColumn, dir);
      }) as Promise<Record<string, unknown>[]>;
  };
  /**
   * searchOnce's statements ordered by id, for a list that names its own table (ListSpec.table).
   * Taking the first 1,001 matches in order (searchInOrder) costs, for a term in thousands of
   * rows, either a walk of the id index until 1,001 match or every match sorted. Instead:
   * 1. Up to COUNT_EXACT_UP_TO + 1 matches in no order (a materialized CTE), the count, and the
   *    page as their slice. PostgreSQL stops at the bound wherever it finds them (among the
   *    trigram index's candidates, or in the table for a common term). COUNT_EXACT_UP_TO or
   *    fewer: they are every match, and that is the answer, in one statement as before.
   * 2. More (the count is then the planner's estimate, so a second snapshot changes nothing it
   *    states): a second statement (walkedOrSorted). Its first CTE walks the newest
   *    SEARCH_WALK_PER_ROW rows per row wanted (SEARCH_WALK_MAX at most) of the list's own table
   *    (a LIMIT on its id index), after a probe, testing each until the page is found: a term
   *    spread over the table is found there (in 1% of the rows, page 1 is about 2,100 rows in).
   *    When the walk falls short (matches among older rows only: a term clustered in a run of
   *    ids), the second CTE sorts every match, as searchInOrder would, up to the page only.
   * A term whose every trigram is common takes searchInOrder instead (runList): PostgreSQL's
   * walk of the id index finds its first 1,001 matches within a few thousand rows.
   */
  const searchWalk = async (table: string, offset: number) => {
    const matches = matchIds(base()).limit(COUNT_EXACT_UP_TO + 1);
    const slice = db(MATCHES).select(MATCH_ID).orderBy(MATCH_ID, dir).limit(want).offset(offset);
    const first = await pageRows(base().withMaterialized(MATCHES, matches).with(PAGE, slice).select(db.raw('(SELECT count(*)::int FROM ??) AS ??', [MATCHES, COUNT_COL])), PAGE);
    if (first.length === 0 || (first[0][COUNT_COL] as number) <= COUNT_EXACT_UP_TO) return first;
    const page = await pageRows(walkedOrSorted(table, offset), PAGE);
    if (page.length > 0) page[0][COUNT_COL] = first[0][COUNT_COL];
    return page;
  };
  /** A search's matches, their ids (as MATCH_ID); `byIndex`: see applyFilters. */
  const matchIds = (qb: Knex.QueryBuilder, byIndex = true) => applyFilters(qb, q, spec, byIndex).clearSelect().select(db.raw('?? AS ??', [spec.idColumn, MATCH_ID]));
  /** The rows of `qb` (the list's base) whose ids a CTE holds, with their sort keys, in the page's order. */
  const pageRows = (qb: Knex.QueryBuilder, cte: string) =>
    qb
      .select(db.raw('??::text AS ??', [q.orderColumn, SORT_KEY]), db.raw('??::text AS ??', [spec.idColumn, SORT_ID]))
      .whereIn(spec.idColumn, (sub) => void sub.select(MATCH_ID).from(cte))
      .orderBy(spec.idColumn, dir) as Promise<Record<string, unknown>[]>;
  /**
   * A search's page ordered by id, past COUNT_EXACT_UP_TO matches (searchWalk), or after a
   * cursor's id (`after`, readPage): the list's base with two materialized CTEs, hf_walked (the
   * walk of the newest rows, from the cursor when there is one, after a probe) and hf_ordered
   * (every match sorted, only when the walk fell short), and hf_page, the ids of whichever found
   * the page. `counted`: the count statement, put first (hf_count, its column `n`); the walk
   * then runs only past COUNT_EXACT_UP_TO matches (fewer are sorted, in proportion to them).
   */
  const walkedOrSorted = (table: string, offset: number, after?: string, counted?: Knex.Raw) => {
    const idName = spec.idColumn.slice(spec.idColumn.indexOf('.') + 1);
    const beyond = (qb: Knex.QueryBuilder, col: string) => (after === undefined ? qb : qb.where(col, desc ? '<' : '>', after));
    // Each of the newest ids tested on its own (LATERAL, LIMIT 1: the row by its id, then its joins by theirs). A plain join would let PostgreSQL hash-join the matches of a joined table instead, in proportion to them.
    const test = matchIds(base(), false).where(spec.idColumn, db.ref(`${WALK}.${idName}`)).limit(1).toSQL();
    const walk = (n: number) =>
      db
        .select(db.raw('??.?? AS ??', [WALK, idName, MATCH_ID]))
        .from(beyond(db(table).select(idName), idName).orderBy(idName, dir).limit(n).as(WALK))
        .joinRaw(`CROSS JOIN LATERAL (${test.sql}) AS ??`, [...test.bindings, 'hf_test'])
        .orderBy(`${WALK}.${idName}`, dir);
    // The walk only after a match among its first SEARCH_PROBE_PER_ROW rows per row wanted: with none there, the matches are likely older (a clustered term), where the walk would be spent for nothing.
    const walked = walk(Math.min(SEARCH_WALK_PER_ROW * (offset + want), SEARCH_WALK_MAX))
      .modify((qb) => {
        if (counted) qb.where(db.raw('(SELECT (n->>0)::int FROM ??) > ?', [COUNT_CTE, COUNT_EXACT_UP_TO]));
      })
      .whereExists(walk(Math.min(SEARCH_PROBE_PER_ROW * (offset + want), SEARCH_WALK_MAX / 10)).limit(1))
      .limit(want)
      .offset(offset);
    const short = db.raw('(SELECT count(*) FROM ??) < ?', [WALKED, want]);
    // `+ 0`: the matches sorted, never the id index walked again (with LIMIT 21, PostgreSQL would).
    // Gated outside the sort's subquery: inside, the gate kept PostgreSQL from leaving out a
    // left join the sort does not read (customers' users, whose text the customer's own
    // search_doc holds), and every match was joined.
    const sorted = beyond(matchIds(base()), spec.idColumn).orderByRaw(`?? + 0 ${dir}`, [spec.idColumn]).limit(want).offset(offset);
    const ordered = db.select(MATCH_ID).from(sorted.as(SORTED)).where(short);
    const keys = db
      .select(MATCH_ID)
      .from(WALKED)
      .whereNot(short)
      // Gated here too: a branch's gate is checked before its CTE starts (hf_ordered's own would launch its parallel workers first).
      .unionAll((qb) => void qb.select(MATCH_ID).from(ORDERED).where(short), true);
    const statement = base();
    if (counted) statement.withMaterialized(COUNT_CTE, counted);
    return statement.withMaterialized(WALKED, walked).withMaterialized(ORDERED, ordered).with(PAGE, keys);
  };
  const searchFirstPages = q.search !== undefined && !cursor && (q.page - 1) * q.perPage + want <= COUNT_EXACT_UP_TO + 1;
  const countStmt = searchFirstPages ? undefined : countStatement(db, base, q, spec);
  /** The count, carried by the page's first query (readPage). */
  let counts: Promise<{ total: number; exact: boolean }> | undefined;
  const [fetched, count] = searchFirstPages
    ? await searchOnce()
    : [
        await readPage().catch((err: { code?: string }) => {
          // A signed cursor always casts back; this guards a key shared with another schema.
          if (cursor && typeof err?.code === 'string' && BAD_TEXT.test(err.code)) throw DomainError.invalid({ cursor: CURSOR_INVALID });
          throw err;
        }),
        await counts!,
      ];
  const more = fetched.length > q.perPage;
  const rows = fetched.slice(0, q.perPage);
  if (back) rows.reverse();
  const keyOf = (r: Record<string, unknown>) => [r[SORT_KEY] as string | null, r[SORT_ID] as string] as const;
  const first = rows[0];
  const last = rows[rows.length - 1];
  const page: ListPage<T> = { rows: rows as T[], ...count };
  // Forward: a next page when a row was left over; a previous one from page 2 on.
  // Backwards (a prev link): the other way round.
  const hasNext = back ? last !== undefined : more;
  const hasPrev = back ? more : q.page > 1 && first !== undefined;
  if (hasNext && last) page.next = await signCursor(db, [q.orderBy, q.order, ...keyOf(last), 0]);
  if (hasPrev && first) page.prev = await signCursor(db, [q.orderBy, q.order, ...keyOf(first), 1]);
  for (const r of rows) {
    delete r[SORT_ID];
    delete r[SORT_KEY];
  }
  return page;
}

/**
 * `X-WP-Total` at a bounded cost: exact from the trigger-kept counts for the unfiltered list
 * and a counted filter alone; otherwise the matches counted up to COUNT_EXACT_UP_TO (a
 * search's cost thus never depends on how common its term is), and past that the planner's
 * estimate (`exact: false`). The count is ONE statement giving a JSON array [n, delta rows
 * read] (a scalar subquery: the page's query carries it, see runList); `kept`: the counted
 * keys it reads, whose n is exact.
 */
interface CountStatement {
  sql: string;
  bindings: Knex.RawBinding[];
  kept?: { table: string; keys: string[] };
}

function countStatement(db: Knex, base: () => Knex.QueryBuilder, q: ListQuery, spec: ListSpec): CountStatement {
  const counted = spec.counted;
  const narrowed = q.search !== undefined || q.dateAfter !== undefined || q.dateBefore !== undefined;
  if (counted && !narrowed) {
    let keys: string[] | undefined;
    if (q.conditions.length === 0) keys = [''];
    else {
      const [c] = q.conditions;
      const column = counted.by?.[c.column];
      if (q.conditions.length === 1 && column && c.op !== 'not_in') keys = [...new Set(c.values.map(String))].map((v) => `${column}=${v}`);
    }
    if (keys) return { ...rowCountStatement(counted.table, keys), kept: { table: counted.table, keys } };
  }
  const matches = applyFilters(base(), q, spec).clearSelect().clearOrder().select(db.raw('1'));
  // In a date range, read the range off its index: planning LIMIT as if matches were spread
  // evenly, PostgreSQL would otherwise seq-scan from wherever the table starts (or another
  // scan is: synchronized scans), and the rows of a date range sit together, maybe at the end.
  if (q.dateAfter !== undefined || q.dateBefore !== undefined) matches.orderBy(spec.dateCreatedColumn);
  // A literal: a prepared page carries this statement (preparedList).
  const capped = matches.limit(COUNT_EXACT_UP_TO + 1, { skipBinding: true }).toSQL();
  return { sql: `SELECT json_build_array(count(*), 0) FROM (${capped.sql}) s`, bindings: [...capped.bindings] };
}

/** The count a count statement gave ([n, delta rows read]): exact, or past COUNT_EXACT_UP_TO the planner's estimate. */
async function countFrom(db: Knex, base: () => Knex.QueryBuilder, q: ListQuery, spec: ListSpec, stmt: CountStatement, [n, deltas]: [number, number]): Promise<{ total: number; exact: boolean }> {
  if (stmt.kept) {
    foldWhenMany(db, stmt.kept.table, stmt.kept.keys, deltas);
    return { total: Number(n), exact: true };
  }
  if (n <= COUNT_EXACT_UP_TO) return { total: n, exact: true };
  return estimateRows(db, base, q, spec, n);
}

/** The count on its own (a page that came back empty, or one read in several queries). */
async function countRows(db: Knex, base: () => Knex.QueryBuilder, q: ListQuery, spec: ListSpec, stmt: CountStatement): Promise<{ total: number; exact: boolean }> {
  const { rows } = await db.raw(`SELECT (${stmt.sql}) AS ??`, [...stmt.bindings, COUNT_COL]);
  return countFrom(db, base, q, spec, stmt, (rows[0] as Record<string, [number, number]>)[COUNT_COL]);
}

/** How long the planner's estimate of a list's matches is kept (estimateRows). */
export const ESTIMATE_KEPT_MS = 60_000;
/** At most this many estimates kept per database (the oldest goes first), each of a statement no longer than ESTIMATE_KEY_MAX. */
const ESTIMATES_KEPT = 500;
const ESTIMATE_KEY_MAX = 4096;
const estimates = new WeakMap<Knex, Map<string, { rows: number; until: number }>>();

/**
 * More than COUNT_EXACT_UP_TO match (`atLeast` seen): the planner's estimate of the matches,
 * kept ESTIMATE_KEPT_MS by statement (SQL and values). It comes from the table's statistics,
 * which change when the table is analyzed, not with each write: asking again on every page of
 * a list was a round trip after the page's, and a plan, for the same figure. Kept per
 * process: each replica asks once a minute per filter set it serves.
 */
async function estimateRows(db: Knex, base: () => Knex.QueryBuilder, q: ListQuery, spec: ListSpec, atLeast: number): Promise<{ total: number; exact: boolean }> {
  const all = applyFilters(base(), q, spec).clearSelect().clearOrder().select(db.raw('1')).toSQL();
  const key = `${all.sql}\u0000${JSON.stringify(all.bindings)}`;
  let kept = estimates.get(db);
  if (!kept) estimates.set(db, (kept = new Map()));
  const now = Date.now();
  let estimate = kept.get(key);
  if (!estimate || estimate.until <= now) {
    const plan = await db.raw(`EXPLAIN (FORMAT JSON) ${all.sql}`, all.bindings);
    estimate = { rows: Math.round(Number(plan.rows[0]['QUERY PLAN'][0].Plan['Plan Rows'])), until: now + ESTIMATE_KEPT_MS };
    if (key.length <= ESTIMATE_KEY_MAX) {
      kept.delete(key);
      if (kept.size >= ESTIMATES_KEPT) kept.delete(kept.keys().next().value!);
      kept.set(key, estimate);
    }
  }
  return { total: Math.max(estimate.rows, atLeast), exact: false };
}
