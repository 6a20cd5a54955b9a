import type { Knex } from 'knex';
import { logger } from '../logger';

/**
 * Which trigrams of a table's searched text are common, so a search leaves them out of its
 * trigram index scan (issue 14).
 *
 * A search is `search_doc LIKE lower('%term%')` (the table's searched columns, joined and
 * lowercased in a column a trigger keeps), served by its GIN trigram index: PostgreSQL
 * intersects the posting lists of the term's trigrams. A trigram that most rows contain (`see`
 * and `eed` when every user name starts with "seed", `com` in e-mail addresses) has a posting
 * tree of about one entry per row; GIN skips through it by descending the tree once per
 * candidate of the rarer trigrams, so a term matching a hundred rows of a million still read
 * 577 index pages (12 ms in `EXPLAIN ANALYZE`), where its rarer trigrams alone read 13 (0.5 ms)
 * for the same rows. The index condition is therefore asked for the term's runs of uncommon
 * trigrams (`%d4242%` for "seed4242"): each such run is a substring of the term, so every row
 * matching the term matches it, and the whole term (applyFilters) still decides which rows
 * match. The result is the same; only the index's work shrinks.
 *
 * The common trigrams are measured, not guessed: a sample of the table (at most SAMPLE_ROWS
 * rows, `TABLESAMPLE SYSTEM`) is split into trigrams by pg_trgm's own `show_trgm`, and those
 * found in at least COMMON_SHARE of the sampled rows are kept in `search_trigram_stats`, one
 * row per table, which every replica reads. A process reads that row at most once a minute
 * (READ_EVERY_MS) per table, when the API starts (warmSearchTrigrams) and then on a search; when
 * the row is missing, older than STALE_AFTER_MS, or the table has grown past twice the rows it
 * had when sampled (GROWTH_MIN rows at least), the table is sampled again in the background,
 * under an advisory lock, so N replicas sample it once. Until a table has been sampled, its
 * searches use the whole term, as before.
 */

/** A trigram in at least this share of the sampled rows is common: left out of the index scan. */
export const COMMON_SHARE = 0.05;
/** At most this many rows are sampled per table. */
export const SAMPLE_ROWS = 30_000;
/** Below this many sampled rows, nothing is called common (a small table's scans are cheap). */
const MIN_SAMPLED = 200;
/** A table's common trigrams are sampled again when older than this. */
const STALE_AFTER_MS = 6 * 3600_000;
/** ... or when the table has grown past twice its rows at the sample, and by this many at least. */
const GROWTH_MIN = 10_000;
/** A process reads a table's row of search_trigram_stats at most this often. */
const READ_EVERY_MS = 60_000;
/** The sampling statement's bound. */
const SAMPLE_TIMEOUT_MS = 10_000;
/** Rows per 8 KiB page assumed for a table PostgreSQL has not analyzed yet. */
const ROWS_PER_PAGE_UNKNOWN = 20;
/** The most runs a search's index condition asks for (uncommonRuns). */
const MAX_RUNS = 4;
/** The fewest uncommon trigrams a term must keep for its index condition to be narrowed. */
const MIN_KEPT = 1;

export const SEARCH_TRIGRAM_STATS = 'search_trigram_stats';

interface Entry {
  common: ReadonlySet<string>;
  readAt: number;
  reading?: Promise<void>;
  /** A sample this process is taking (sampleInBackground). */
  sampling?: Promise<void>;
}

/** Per database handle (tests run several apps in one process), per table. */
const entries = new WeakMap<Knex, Map<string, Entry>>();

/** The searched text of a table (its `search_doc` before lowercasing, which pg_trgm's trigrams ignore: migrations/20261207000010_search_documents.ts): each column coalesced, joined by U+001F. Bindings: the columns. */
export function documentSql(columns: readonly string[]): string {
  return `(${columns.map(() => "coalesce(??, '')").join(' || chr(31) || ')})`;
}

/**
 * The common trigrams of `table`'s searched text, as last read (at most READ_EVERY_MS ago):
 * an empty set until the table has been sampled. Starts a new sample in the background when
 * the stored one is stale.
 */
export async function commonTrigrams(db: Knex, table: string, columns: readonly string[]): Promise<ReadonlySet<string>> {
  return (await entryOf(db, table, columns)).common;
}

async function entryOf(db: Knex, table: string, columns: readonly string[]): Promise<Entry> {
  let byTable = entries.get(db);
  if (!byTable) entries.set(db, (byTable = new Map()));
  let entry = byTable.get(table);
  if (!entry) byTable.set(table, (entry = { common: new Set(), readAt: 0 }));
  if (Date.now() - entry.readAt >= READ_EVERY_MS) {
    const e = entry;
    e.reading ??= readStats(db, table, columns, e).finally(() => {
      e.reading = undefined;
    });
    // The first read waits (one small select by key); later ones use what is known meanwhile.
    if (e.readAt === 0) await e.reading;
  }
  return entry;
}

/** The stored sample of a table (if any) beside the table's size now (the planner's row count). */
interface Stored {
  trigrams: string[] | null;
  sampled_at: Date | null;
  table_rows: number | null;
  /** The planner's row count (0 before the table's first ANALYZE), its pages then, and its pages now. */
  rows: number;
  relpages: number;
  pages: number;
}

function readStored(db: Knex, table: string): Promise<Stored | undefined> {
  return db
    .raw<{ rows: Stored[] }>(
      `SELECT s.trigrams, s.sampled_at, s.table_rows, greatest(c.reltuples, 0)::float8 AS rows, c.relpages::float8 AS relpages,
              (pg_relation_size(c.oid) / current_setting('block_size')::int)::float8 AS pages
         FROM pg_class c LEFT JOIN ${SEARCH_TRIGRAM_STATS} s ON s.tbl = ?
        WHERE c.oid = ?::regclass`,
      [table, table],
    )
    .then((r) => r.rows[0]);
}

/** Whether a table's sample should be taken again: none yet, too old, or taken when the table was much smaller. */
function stale(stored: Stored): boolean {
  if (!stored.sampled_at || stored.table_rows === null) return true;
  return Date.now() - stored.sampled_at.getTime() >= STALE_AFTER_MS || stored.rows > 2 * stored.table_rows + GROWTH_MIN;
}

async function readStats(db: Knex, table: string, columns: readonly string[], entry: Entry): Promise<void> {
  try {
    const stored = await readStored(db, table);
    entry.readAt = Date.now();
    if (stored?.trigrams) entry.common = new Set(stored.trigrams);
    if (stored && stale(stored)) entry.sampling ??= sampleInBackground(db, table, columns, entry);
  } catch (err) {
    // The search goes on with the whole term; the next read tries again.
    entry.readAt = Date.now();
    logger.warn({ err, table }, 'could not read the common search trigrams');
  }
}

/**
 * Reads each table's common trigrams and samples those whose sample is stale, one table after
 * the other (one connection of the pool at a time), so the first searches after the API starts
 * find them: `start:api` calls it once, without waiting. Resolves when done; never rejects.
 */
export async function warmSearchTrigrams(db: Knex, tables: readonly { table: string; columns: readonly string[] }[]): Promise<void> {
  for (const { table, columns } of tables) {
    const entry = await entryOf(db, table, columns);
    await entry.sampling;
  }
}

async function sampleInBackground(db: Knex, table: string, columns: readonly string[], entry: Entry): Promise<void> {
  try {
    const common = await sampleCommonTrigrams(db, table, columns);
    if (common) entry.common = new Set(common);
  } catch (err) {
    logger.warn({ err, table }, 'could not sample the common search trigrams');
  } finally {
    entry.sampling = undefined;
  }
}

/**
 * Samples `table` and stores its common trigrams (search_trigram_stats), unless another
 * process holds the table's advisory lock or sampled it since it was found stale. Resolves
 * with the trigrams stored, or undefined when it left the work to that other process.
 */
export async function sampleCommonTrigrams(db: Knex, table: string, columns: readonly string[], opts: { force?: boolean } = {}): Promise<string[] | undefined> {
  return db.transaction(async (trx) => {
    const lock = await trx.raw<{ rows: { ok: boolean }[] }>('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS ok', [`hostflow.search_trigrams.${table}`]);
    if (!lock.rows[0].ok) return undefined;
    const stored = await readStored(trx, table);
    if (!stored) throw new Error(`no table ${table}`);
    // Another process may have sampled it since this one found it stale.
    if (!opts.force && !stale(stored)) return undefined;
    await trx.raw(`SET LOCAL statement_timeout = ${SAMPLE_TIMEOUT_MS}`);
    // The rows now: the planner's rows per page times the pages there are (a table never
    // analyzed: ROWS_PER_PAGE_UNKNOWN, low, so it is sampled more than needed, not less).
    const perPage = stored.rows > 0 && stored.relpages > 0 ? stored.rows / stored.relpages : ROWS_PER_PAGE_UNKNOWN;
    const rows = Math.max(stored.rows, perPage * stored.pages);
    // SYSTEM samples whole pages: ask for a fifth more than needed, and keep SAMPLE_ROWS of them at random (not the first ones read).
    const percent = rows > SAMPLE_ROWS ? Math.min(100, (120 * SAMPLE_ROWS) / rows) : 100;
    const { rows: out } = await trx.raw<{ rows: { sampled: number; common: string[] }[] }>(
      `WITH s AS MATERIALIZED (SELECT ${documentSql(columns)} AS doc FROM ?? TABLESAMPLE SYSTEM (?::float4) ORDER BY random() LIMIT ?::int),
            f AS (SELECT t, count(*) AS n FROM s, unnest(show_trgm(s.doc)) AS t GROUP BY t)
       SELECT (SELECT count(*) FROM s)::int AS sampled,
              coalesce((SELECT array_agg(t ORDER BY t) FROM f WHERE n >= ?::float8 * (SELECT count(*) FROM s)), '{}') AS common`,
      [...columns, table, percent, SAMPLE_ROWS, COMMON_SHARE],
    );
    const common = out[0].sampled >= MIN_SAMPLED ? out[0].common : [];
    await trx(SEARCH_TRIGRAM_STATS)
      .insert({ tbl: table, trigrams: common, sampled_rows: out[0].sampled, table_rows: rows, sampled_at: trx.fn.now() })
      .onConflict('tbl')
      .merge();
    return common;
  });
}

/** ASCII letters and digits: their case folds the same in every collation, and pg_trgm takes them as word characters in every locale. */
const WORD = /[A-Za-z0-9]+/g;
const LETTER_OR_DIGIT = /[\p{L}\p{N}]/u;

/** An ASCII character: a run may take one next to a word (uncommonRuns), never half of a pair of UTF-16 units. */
const ASCII = /^[\x00-\x7f]$/;

/**
 * One ASCII word of `s` as pg_trgm pads it within the pattern `%s%`: lower-cased, with two
 * blanks before it when another character of `s` (not a letter or digit) precedes it, one after
 * it when such a character follows. At the pattern's ends (the `%`) it has none.
 */
function paddedWords(s: string): { start: number; end: number; left: boolean; right: boolean; padded: string }[] {
  return [...s.matchAll(WORD)].map((m) => {
    const start = m.index;
    const end = start + m[0].length;
    const left = start > 0 && !LETTER_OR_DIGIT.test(s[start - 1]);
    const right = end < s.length && !LETTER_OR_DIGIT.test(s[end]);
    return { start, end, left, right, padded: `${left ? '  ' : ''}${m[0].toLowerCase()}${right ? ' ' : ''}` };
  });
}

/** The trigrams of a padded word. */
function trigramsOf(padded: string): string[] {
  return Array.from({ length: Math.max(0, padded.length - 2) }, (_, i) => padded.slice(i, i + 3));
}

/**
 * Whether every trigram pg_trgm takes from `%term%` is common in the table (its words' own and,
 * next to another character of the term, their padded edges): such a term is likely common
 * itself, and a list walks its order to find it (runList). False when the table has no sample,
 * for a term with no trigram, and for one with a character outside ASCII (its words are not
 * split here: see uncommonRuns).
 */
export function allTrigramsCommon(term: string, common: ReadonlySet<string>): boolean {
  if (common.size === 0 || /[^\x00-\x7f]/.test(term)) return false;
  const trigrams = paddedWords(term).flatMap((w) => trigramsOf(w.padded));
  return trigrams.length > 0 && trigrams.every((t) => common.has(t));
}

/**
 * The substrings of `term` for a trigram index condition that leaves out `common` trigrams:
 * each maximal run of uncommon trigrams within a word, as pg_trgm pads it (paddedWords:
 * `pi_4242` gives `pi `, `  4`, ` 42`, `424` and `242`). A run that takes a padded edge takes
 * the character next to the word with it (`42@` from `42@example`: `%42@%` gives `42 ` alone),
 * when that character is ASCII; one that would start on the second blank of the left padding
 * starts at the word instead (with the character, the common `  4` would come back). Only ASCII
 * words are split, so a run never depends on how a collation folds other characters. Undefined
 * when no trigram of the term is common, or when none uncommon would remain: the whole term
 * then, as before. One uncommon trigram is enough: its candidates cost the heap about a
 * microsecond each, where intersecting them with the common trigrams' posting lists cost GIN
 * several (at a million users, `42 customer`, 10,000 candidates and no match: 13 ms asked for
 * `%42 %`, 48 ms whole). At most MAX_RUNS runs, the longest. Every run is a substring of the
 * term, in its own case, so a row matching the term (ILIKE) matches every run.
 */
export function uncommonRuns(term: string, common: ReadonlySet<string>): string[] | undefined {
  if (common.size === 0) return undefined;
  const runs: string[] = [];
  let kept = 0;
  let dropped = 0;
  for (const w of paddedWords(term)) {
    const lp = w.left ? 2 : 0;
    // The padded edges a run may take: those next to an ASCII character.
    const leftOk = w.left && ASCII.test(term[w.start - 1]);
    const rightOk = w.right && ASCII.test(term[w.end]);
    /** Where in the term padded position p is (a blank: the character next to the word). */
    const at = (p: number) => (p < lp ? w.start - 1 : p - lp < w.end - w.start ? w.start + p - lp : w.end);
    const trigrams = trigramsOf(w.padded);
    let from = -1;
    const close = (to: number) => {
      let a = from;
      from = -1;
      if (lp && a < 2 && !leftOk) a = 2;
      else if (lp && a === 1) a = 2;
      let b = to;
      if (w.right && b === trigrams.length && !rightOk) b--;
      if (a >= b) return;
      runs.push(term.slice(at(a), at(b + 1) + 1));
      kept += b - a;
    };
    for (const [i, t] of trigrams.entries()) {
      if (common.has(t)) {
        dropped++;
        if (from >= 0) close(i);
      } else if (from < 0) from = i;
    }
    if (from >= 0) close(trigrams.length);
  }
  if (dropped === 0 || kept < MIN_KEPT) return undefined;
  if (runs.length <= MAX_RUNS) return runs;
  // A long term (up to 200 characters) could give dozens of runs, each a condition to plan: the
  // longest MAX_RUNS (the most uncommon trigrams), in the term's order, narrow the scan enough.
  const longest = new Set([...runs.keys()].sort((a, b) => runs[b].length - runs[a].length || a - b).slice(0, MAX_RUNS));
  return runs.filter((_, i) => longest.has(i));
}
