import { SEARCH_DOCUMENTS } from '../migrations/20261207000010_search_documents';
import { sessionListSpec } from '../src/chat/sessions';
import { customerListSpec } from '../src/customers/service';
import { createDb } from '../src/db/knex';
import { applyFilters, searchTableOf, type ListSpec } from '../src/db/list';
import { allTrigramsCommon, COMMON_SHARE, documentSql, sampleCommonTrigrams, SEARCH_TRIGRAM_STATS, uncommonRuns, warmSearchTrigrams } from '../src/db/search-trigrams';
import { parseListQuery } from '../src/http/list';
import { membershipListSpec } from '../src/memberships/service';
import { paymentListSpec } from '../src/payments/service';
import { productListSpec } from '../src/products/service';
import { siteListSpec } from '../src/sites/service';
import { jobListSpec } from '../src/translations/jobs';
import { projectListSpec } from '../src/translations/projects';
import { BASE, createTestContext, type TestContext } from './helpers';

const set = (...t: string[]) => new Set(t);

describe('uncommonRuns: the runs of a term a trigram index scan is asked for', () => {
  test('the runs between common trigrams, in the term\'s own case', () => {
    expect(uncommonRuns('seed4242', set('see', 'eed', 'ed4'))).toEqual(['d4242']);
    expect(uncommonRuns('SEED4242', set('see', 'eed', 'ed4'))).toEqual(['D4242']);
    // abc bcx [cxy xyz] yzd zde def: two runs.
    expect(uncommonRuns('abcXYZdef', set('cxy', 'xyz'))).toEqual(['abcX', 'YZdef']);
    // Words apart: example and com are common throughout; "42 " (seed4242 before @) is not, so the run takes the @ with it.
    expect(uncommonRuns('seed4242@example.com', set('see', 'eed', 'ed4', 'exa', 'xam', 'amp', 'mpl', 'ple', 'le ', '  e', ' ex', 'com', '  c', ' co', 'om '))).toEqual(['d4242@']);
    expect(uncommonRuns('seed4242@example.com', set('see', 'eed', 'ed4', '42 ', 'exa', 'xam', 'amp', 'mpl', 'ple', 'le ', '  e', ' ex', 'com', '  c', ' co', 'om '))).toEqual(['d4242']);
  });

  test('a padded trigram counts: pg_trgm pads a word next to another character of the pattern; a run takes an uncommon padded edge with its character', () => {
    // "pi_4242" gives "pi " (every payment id starts so), "  4", " 42", 424 and 242: the run takes the _ and the left padding with it.
    expect(uncommonRuns('pi_4242', set('pi '))).toEqual(['_4242']);
    // "  4" common: the run starts at the word (with the ".", "  4" would come back), so " 42" is left out too.
    expect(uncommonRuns('x.4242', set('  4'))).toEqual(['4242']);
    // "42 " common: the run ends at the word; "x" after "." gives "  x" alone, a run of its own.
    expect(uncommonRuns('4242.x', set('42 '))).toEqual(['4242', '.x']);
    // A word of two characters whose padded edge is its only uncommon trigram: the run is the word and the character.
    expect(uncommonRuns('42@example', set('  e', ' ex', 'exa', 'xam', 'amp', 'mpl', 'ple'))).toEqual(['42@']);
    // Next to a character outside ASCII (half of an emoji's UTF-16 pair here), the run stays within the word.
    expect(uncommonRuns('a\u{1F600}b42', set('  b'))).toEqual(['b42']);
    // At the term's edges the pattern has % (no padding): nothing left out.
    expect(uncommonRuns('pi4242', set('pi '))).toBeUndefined();
  });

  test('the whole term when nothing is common, everything is, or no uncommon one would remain', () => {
    expect(uncommonRuns('seed4242', set())).toBeUndefined();
    expect(uncommonRuns('seed4242', set('zzz'))).toBeUndefined();
    expect(uncommonRuns('example', set('exa', 'xam', 'amp', 'mpl', 'ple'))).toBeUndefined();
    // One uncommon trigram is enough.
    expect(uncommonRuns('seed42', set('see', 'eed', 'ed4'))).toEqual(['d42']);
    // " 42" cannot be asked for without "  4" (common), and 42 has no trigram of its own.
    expect(uncommonRuns('sub_42', set('sub', 'ub ', '  4'))).toBeUndefined();
    expect(uncommonRuns('ab', set('ab '))).toBeUndefined();
  });

  test('at most four runs, the longest, in the term\'s order', () => {
    // Words of 3 to 8 characters, each an uncommon run with its padded edges (the blanks around it), between common "zzz" words.
    const term = 'abc zzz abcd zzz abcdefgh zzz abcde zzz abcdef zzz abcdefg zzz abc';
    expect(uncommonRuns(term, set('zzz', '  z', ' zz', 'zz '))).toEqual([' abcdefgh ', ' abcde ', ' abcdef ', ' abcdefg ']);
    expect(uncommonRuns('abcd zzz abcd zzz abcd zzz abcd zzz abcd', set('zzz'))).toHaveLength(4);
  });

  test('non-ASCII letters split no run of their own (a collation may fold them otherwise): the ASCII words around them do', () => {
    expect(uncommonRuns('ñandú4242', set('and'))).toEqual(['4242']);
    expect(uncommonRuns('Ünïcödé', set('cöd'))).toBeUndefined();
  });

  test('every run is a substring of the term, so a text containing the term contains every run (random terms)', () => {
    const alphabet = 'aAbB01_.%@ ñ\\';
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 3000; i++) {
      const term = Array.from({ length: 1 + rnd(14) }, () => alphabet[rnd(alphabet.length)]).join('');
      const common = new Set(Array.from({ length: rnd(6) }, () => Array.from({ length: 3 }, () => 'ab01 '[rnd(5)]).join('')));
      const runs = uncommonRuns(term, common);
      for (const run of runs ?? []) {
        expect(term.includes(run)).toBe(true);
        // A word's letters and digits, with at most one ASCII character on each side.
        expect(run).toMatch(/^[^A-Za-z0-9\u0080-\uffff]?[A-Za-z0-9]+[^A-Za-z0-9\u0080-\uffff]?$/);
      }
    }
  });
});

describe('allTrigramsCommon: a term whose every trigram is common in the table', () => {
  test('its words\' own trigrams and, next to another character of the term, their padded edges', () => {
    expect(allTrigramsCommon('example', set('exa', 'xam', 'amp', 'mpl', 'ple'))).toBe(true);
    expect(allTrigramsCommon('EXAMPLE', set('exa', 'xam', 'amp', 'mpl', 'ple'))).toBe(true);
    expect(allTrigramsCommon('seed42', set('see', 'eed', 'ed4'))).toBe(false);
    // "42@example": "42 " (the word 42 before @) is not common, though every trigram of example is.
    const example = ['  e', ' ex', 'exa', 'xam', 'amp', 'mpl', 'ple'];
    expect(allTrigramsCommon('42@example', set(...example))).toBe(false);
    expect(allTrigramsCommon('42@example', set(...example, '42 '))).toBe(true);
    // "a.b": "  b" only (a one-letter word: "a " after a, too short; "  b" before b).
    expect(allTrigramsCommon('a.b', set(' a '))).toBe(false);
    expect(allTrigramsCommon('a.b', set('  b'))).toBe(true);
  });

  test('false with no sample, for a term with no trigram, and with a character outside ASCII', () => {
    expect(allTrigramsCommon('example', set())).toBe(false);
    expect(allTrigramsCommon('ab', set('zzz'))).toBe(false);
    expect(allTrigramsCommon('%%', set('zzz'))).toBe(false);
    expect(allTrigramsCommon('exampleé', set('exa', 'xam', 'amp', 'mpl', 'ple'))).toBe(false);
  });

  test('given every trigram PostgreSQL takes from the term as text, true exactly when its pattern has one (random terms)', async () => {
    const ctx = await createTestContext();
    try {
      const alphabet = 'aAb01_.@ ';
      // mulberry32: reproducible, and its low bits vary (an LCG's modulo a small n repeats).
      let seed = 11;
      const rnd = (n: number) => {
        seed = (seed + 0x6d2b79f5) | 0;
        let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
        x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
        return ((x ^ (x >>> 14)) >>> 0) % n;
      };
      const terms = Array.from({ length: 300 }, () => Array.from({ length: 1 + rnd(8) }, () => alphabet[rnd(alphabet.length)]).join(''));
      // pg_trgm's trigrams of each term as a text (its words padded on both sides): a superset of those of the pattern `%term%`.
      const { rows } = await ctx.db.raw(`SELECT t, show_trgm(t) AS trgm FROM unnest(?::text[]) t`, [terms]);
      expect(rows).toHaveLength(300);
      let withTrigrams = 0;
      for (const { t, trgm } of rows as { t: string; trgm: string[] }[]) {
        // The pattern has a trigram when a word, padded with two blanks before it and one after it where another character of the term is next to it, has three characters.
        const has = [...t.matchAll(/[A-Za-z0-9]+/g)].some((m) => m[0].length + (m.index > 0 ? 2 : 0) + (m.index + m[0].length < t.length ? 1 : 0) >= 3);
        if (has) withTrigrams++;
        expect(allTrigramsCommon(t, new Set(trgm))).toBe(has);
      }
      expect(withTrigrams).toBeGreaterThan(100);
    } finally {
      await ctx.close();
    }
  });
});

/**
 * 3,300 users: "seedN" (N = 1..3000, e-mail seedN@example.com, display name "Seed customer
 * N % 100") and 300 "otherN": "see", "eed" and "ed1" are in more than COMMON_SHARE of them,
 * "d12" in 3%.
 */
describe('a search leaves the table\'s common trigrams out of its index scan', () => {
  let ctx: TestContext;
  const get = (query: Record<string, unknown>) => ctx.http.get(`${BASE}/customers`).set('Authorization', ctx.basic).query(query);
  const columns = ['username', 'email', 'display_name'];

  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.db.raw(`
      WITH u AS (
        INSERT INTO users (username, email, password_hash, display_name)
        SELECT CASE WHEN i <= 3000 THEN 'seed' || i ELSE 'other' || i END,
               CASE WHEN i <= 3000 THEN 'seed' || i ELSE 'other' || i END || '@example.com', 'x',
               CASE WHEN i <= 3000 THEN 'Seed customer ' || (i % 100) ELSE 'Other ' || i END
          FROM generate_series(1, 3300) i
        RETURNING id)
      INSERT INTO customers (user_id) SELECT id FROM u ORDER BY id`);
    await ctx.db.raw('ANALYZE users; ANALYZE customers');
  });
  afterAll(() => ctx.close());

  /** What the naive per-column ILIKE finds, newest first. */
  const naive = async (term: string) =>
    (
      await ctx
        .db('customers as c')
        .join('users as u', 'u.id', 'c.user_id')
        .where((w) => {
          const p = `%${term.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
          for (const col of ['u.username', 'u.email', 'u.display_name']) w.orWhere(col, 'ilike', p);
        })
        .orderBy('c.id', 'desc')
        .pluck('c.id')
    ).map(Number);

  /** The statement the list sent for `term`, and the ids it answered (all pages of 100). */
  const search = async (term: string) => {
    const sql: { sql: string; bindings: unknown[] }[] = [];
    const listen = (q: { sql: string; bindings: unknown[] }) => void (/hf_matches|_hf_count/.test(q.sql) && sql.push(q));
    ctx.db.on('query', listen);
    try {
      const ids: number[] = [];
      let res = await get({ search: term, per_page: 100 });
      for (;;) {
        expect(res.status).toBe(200);
        ids.push(...res.body.map((c: { id: number }) => c.id));
        const next = /<([^>]+)>; rel="next"/.exec(res.headers.link ?? '')?.[1];
        if (!next) break;
        res = await ctx.http.get(next.replace(/^https?:\/\/[^/]+/, '')).set('Authorization', ctx.basic);
      }
      return { ids, total: Number(res.headers['x-wp-total']), first: sql[0] };
    } finally {
      ctx.db.off('query', listen);
    }
  };

  test('the first search samples the table in the background; the sample names the common trigrams', async () => {
    expect(await ctx.db(SEARCH_TRIGRAM_STATS).where({ tbl: 'users' }).first()).toBeUndefined();
    // Before the sample: the whole term, and the right rows.
    const before = await search('seed1234');
    expect(before.ids).toEqual(await naive('seed1234'));
    // One condition, on the customer's copy of its user's search_doc.
    expect(before.first.bindings.filter((b) => b === '%seed1234%')).toHaveLength(1);
    expect(before.first.sql).toMatch(/"c"\."search_doc" LIKE lower\(\$\d+\)/);
    let row: { trigrams: string[]; sampled_rows: number } | undefined;
    for (let i = 0; i < 100 && !row; i++) {
      row = await ctx.db(SEARCH_TRIGRAM_STATS).where({ tbl: 'users' }).first();
      if (!row) await new Promise((r) => setTimeout(r, 50));
    }
    expect(row).toBeDefined();
    expect(row!.sampled_rows).toBe(3300);
    expect(row!.trigrams).toEqual(expect.arrayContaining(['see', 'eed', 'ed1', 'exa', 'com']));
    expect(row!.trigrams).not.toContain('d12');
    // Each is in at least COMMON_SHARE of the rows (checked against the table itself).
    for (const t of ['see', 'ed1', 'com']) {
      const share = Number((await ctx.db.raw(`SELECT avg((? = ANY(show_trgm(${documentSql(columns)})))::int) AS s FROM users`, [t, ...columns])).rows[0].s);
      expect(share).toBeGreaterThanOrEqual(COMMON_SHARE);
    }
  });

  test.each([
    ['seed1234', ['%d1234%']],
    ['SEED1234', ['%D1234%']],
    // "34 " (the name's end before @) is uncommon too: the run takes the @.
    ['seed1234@example.com', ['%d1234@%']],
    ['other3123', ['%r3123%']],
    ['example', ['%example%']],
    // One uncommon trigram (d12) is enough.
    ['seed12', ['%d12%']],
    // Each word with its padded edges (no user has them): "no " , "  s" ... "ch ", "  u" ...
    ['no such user', ['%no %', '%such %', '% user%']],
    ['customer 42', ['%customer 42%']],
    // The run (1234) is in seed1234's name; the term is in none: the per-column test decides.
    ['1234 seed', ['%1234 %']],
  ])('search=%s: the rows of the naive query, the index asked for %j', async (term, patterns) => {
    const want = await naive(term);
    const found = await search(term);
    expect(found.ids).toEqual(want);
    if (want.length <= 1000) expect(found.total).toBe(want.length);
    // The statement's patterns: the runs (the index's), then the whole term, which decides
    // (through coalesce, which the index does not serve); without runs, the whole term alone.
    const term_ = `%${term}%`;
    const doc = found.first.bindings.filter((b): b is string => typeof b === 'string' && b.startsWith('%') && b.endsWith('%'));
    expect(doc.at(-1)).toBe(term_);
    const runs = doc.slice(0, -1);
    expect(runs.length > 0 ? runs : [term_]).toEqual(patterns);
    expect(found.first.sql).toMatch(runs.length > 0 ? /coalesce\("c"\."search_doc", ''\) LIKE lower\(\$\d+\)/ : /"c"\."search_doc" LIKE lower\(\$\d+\)/);
    expect(found.first.sql).not.toMatch(/ilike/i);
  });

  test('the runs are what the trigram index serves: PostgreSQL scans it for them, and reads fewer of its pages', async () => {
    const explain = async (pattern: string) => {
      const q = parseListQuery({ search: 'seed1234' }, customerListSpec);
      const sql = applyFilters(ctx.db('customers as c').join('users as u', 'u.id', 'c.user_id').select('c.id'), { ...q, searchRuns: pattern === 'seed1234' ? undefined : [pattern] }, customerListSpec).toSQL().toNative();
      return ctx.db.transaction(async (trx) => {
        // A table this small is read faster in id order: ask for the plan of a large one.
        await trx.raw('SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off');
        const { rows } = await trx.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql.sql.replace(/\$(\d+)/g, '?')}`, sql.bindings as never[]);
        return JSON.stringify(rows[0]['QUERY PLAN']);
      });
    };
    const pruned = await explain('d1234');
    expect(pruned).toMatch(/"Index Name":"customers_search_doc_trgm"/);
    expect(pruned).toMatch(/"Index Cond":"\(search_doc ~~ '%d1234%'::text\)"/);
    // The whole term still decides, as a filter the index is not asked for.
    expect(pruned).toMatch(/"Filter":"\(COALESCE\(search_doc, ''::text\) ~~ '%seed1234%'::text\)"/);
    expect(pruned).not.toMatch(/Index Cond[^}]*%seed1234%/);
    const blocks = (plan: string) => Number(/"Index Name":"customers_search_doc_trgm"[^}]*?"Shared Hit Blocks":(\d+)/.exec(plan)?.[1]);
    expect(blocks(pruned)).toBeLessThan(blocks(await explain('seed1234')));
  });

  test('two processes finding the sample stale sample it once (an advisory lock, then the freshness check)', async () => {
    await ctx.db(SEARCH_TRIGRAM_STATS).where({ tbl: 'users' }).update({ sampled_at: ctx.db.raw("now() - interval '1 day'") });
    const results = await Promise.all([sampleCommonTrigrams(ctx.db, 'users', columns), sampleCommonTrigrams(ctx.db, 'users', columns)]);
    expect(results.filter((r) => r !== undefined)).toHaveLength(1);
    const row = await ctx.db(SEARCH_TRIGRAM_STATS).where({ tbl: 'users' }).first();
    expect(Date.now() - new Date(row.sampled_at).getTime()).toBeLessThan(60_000);
  });

  test('a sample taken when the table was much smaller is stale: taken again; a fresh one is not', async () => {
    expect(await sampleCommonTrigrams(ctx.db, 'users', columns)).toBeUndefined();
    // Sampled just now at 3,300 rows: fresh. Had it been sampled at 100 rows: 3,300 is not past 2 × 100 + 10,000, still fresh.
    await ctx.db(SEARCH_TRIGRAM_STATS).where({ tbl: 'users' }).update({ table_rows: 100 });
    expect(await sampleCommonTrigrams(ctx.db, 'users', columns)).toBeUndefined();
    // The planner's count of the table past twice the sampled size and 10,000 more: stale.
    await ctx.db.raw("UPDATE pg_class SET reltuples = 50000 WHERE oid = 'users'::regclass");
    try {
      expect(await sampleCommonTrigrams(ctx.db, 'users', columns)).toEqual(expect.arrayContaining(['see', 'eed']));
      expect(Number((await ctx.db(SEARCH_TRIGRAM_STATS).where({ tbl: 'users' }).first()).table_rows)).toBe(50000);
    } finally {
      await ctx.db.raw('ANALYZE users');
    }
  });

  test('the API reads (and samples when stale) every searched table when it starts, before any search', async () => {
    await ctx.db(SEARCH_TRIGRAM_STATS).del();
    // A fresh handle, as a new process (ctx.db's process cache read users a moment ago).
    const db = createDb(ctx.dbUrl, 2);
    try {
      const tables = ctx.app.locals.searchTables;
      await warmSearchTrigrams(db, tables);
      const rows: { tbl: string }[] = await ctx.db(SEARCH_TRIGRAM_STATS).select('tbl');
      expect(rows.map((r) => r.tbl).sort()).toEqual(tables.map((t) => t.table).sort());
      // Another process starting next finds every sample fresh, and takes none.
      const sampled = await ctx.db(SEARCH_TRIGRAM_STATS).max({ at: 'sampled_at' }).first();
      const other = createDb(ctx.dbUrl, 2);
      try {
        await warmSearchTrigrams(other, tables);
      } finally {
        await other.destroy();
      }
      expect((await ctx.db(SEARCH_TRIGRAM_STATS).max({ at: 'sampled_at' }).first())!.at).toEqual(sampled!.at);
    } finally {
      await db.destroy();
    }
  });

  test("a customer created while its user's text changes in another transaction gets the committed text (the trigger waits for that user)", async () => {
    const [{ id }] = await ctx.db('users').insert({ username: 'race_trigger', email: 'race@example.com', password_hash: 'x', display_name: 'Before' }).returning('id');
    const renaming = await ctx.db.transaction();
    let customerId: number | undefined;
    try {
      await renaming('users').where({ id }).update({ display_name: 'After' });
      // The insert waits on the user's row until the rename commits.
      let inserted = false;
      const insert = ctx.db('customers')
        .insert({ user_id: id })
        .returning('id')
        .then(([row]) => {
          inserted = true;
          customerId = Number(row.id);
        });
      await new Promise((r) => setTimeout(r, 300));
      expect(inserted).toBe(false);
      await renaming.commit();
      await insert;
      expect((await ctx.db('customers').where({ id: customerId }).first('search_doc')).search_doc).toBe('race_trigger\u001frace@example.com\u001fafter');
    } finally {
      if (!renaming.isCompleted()) await renaming.rollback();
      if (customerId !== undefined) await ctx.db('customers').where({ id: customerId }).delete();
      await ctx.db('users').where({ id }).delete();
    }
  });

  test('every list with a searchTable keeps its searched text in search_doc, under a trigram index', async () => {
    const specs: ListSpec[] = [customerListSpec, membershipListSpec, paymentListSpec, siteListSpec, productListSpec, sessionListSpec, projectListSpec, jobListSpec];
    // The app's list of them (what start:api samples) is these.
    expect(ctx.app.locals.searchTables).toEqual(specs.map(searchTableOf));
    expect(Object.keys(SEARCH_DOCUMENTS).sort()).toEqual(specs.map((spec) => spec.searchTable).sort());
    for (const spec of specs) {
      const table = spec.searchTable!;
      const cols = spec.searchable.map((c) => c.slice(c.indexOf('.') + 1));
      // The migration's columns are the list's, in its order (the order of the document).
      expect(SEARCH_DOCUMENTS[table]).toEqual(cols);
      const { rows } = await ctx.db.raw('SELECT pg_get_indexdef(?::regclass) AS def', [`${table}_search_doc_trgm`]);
      expect(rows[0].def).toBe(`CREATE INDEX ${table}_search_doc_trgm ON public.${table} USING gin (search_doc gin_trgm_ops)`);
      // The expression's index it replaced is gone.
      expect(await ctx.db('pg_indexes').where({ indexname: `${table}_search_trgm` }).first()).toBeUndefined();
      // Every row's search_doc is its document, lowercased (users has this suite's 3,300 rows).
      const stale = await ctx.db.raw(`SELECT count(*)::int AS n, (SELECT count(*)::int FROM ??) AS total FROM ?? WHERE search_doc IS DISTINCT FROM lower(${documentSql(cols)})`, [table, table, ...cols]);
      expect(stale.rows[0].n).toBe(0);
      if (table === 'users') expect(stale.rows[0].total).toBeGreaterThanOrEqual(3300);
    }
    // Customers search their own copy of their user's (customerListSpec.searchDoc), under an index of its own.
    expect(customerListSpec.searchDoc).toBe('c.search_doc');
    const { rows } = await ctx.db.raw("SELECT pg_get_indexdef('customers_search_doc_trgm'::regclass) AS def");
    expect(rows[0].def).toBe('CREATE INDEX customers_search_doc_trgm ON public.customers USING gin (search_doc gin_trgm_ops)');
    const copies = await ctx.db.raw('SELECT count(*)::int AS total, count(*) FILTER (WHERE c.search_doc IS DISTINCT FROM u.search_doc)::int AS stale FROM customers c JOIN users u ON u.id = c.user_id');
    expect(copies.rows[0]).toEqual({ total: expect.any(Number), stale: 0 });
    expect(copies.rows[0].total).toBeGreaterThanOrEqual(3300);
  });

  test('the triggers keep search_doc (the user\'s, and its customer\'s copy) on an insert, an update of each column, a change of user and a direct write; a search is case-insensitive beyond ASCII', async () => {
    // The user's search_doc, checked against its columns; and its customers' copies, against it.
    const docOf = async (id: number) => {
      const row = await ctx.db('users').where({ id }).first('search_doc', ctx.db.raw(`lower(${documentSql(columns)}) AS want`, columns));
      expect(row.search_doc).toBe(row.want);
      expect(await ctx.db('customers').where({ user_id: id }).pluck('search_doc')).toEqual((await ctx.db('customers').where({ user_id: id })).map(() => row.search_doc));
      return row.search_doc as string;
    };
    const [{ id }] = await ctx.db('users').insert({ username: 'ÉCOLE_Trigger', email: 'Trig@Example.COM', password_hash: 'x', display_name: '' }).returning('id');
    const [customer] = await ctx.db('customers').insert({ user_id: id }).returning('id');
    try {
      expect(await docOf(id)).toBe('école_trigger\u001ftrig@example.com\u001f');
      await ctx.db('users').where({ id }).update({ display_name: 'Ünïcode ÑAME' });
      expect(await docOf(id)).toBe('école_trigger\u001ftrig@example.com\u001fünïcode ñame');
      await ctx.db('users').where({ id }).update({ username: 'Lycée_Trigger' });
      await ctx.db('users').where({ id }).update({ email: 'Other@Example.COM' });
      expect(await docOf(id)).toBe('lycée_trigger\u001fother@example.com\u001fünïcode ñame');
      // A write of search_doc itself is computed again, the user's and the customer's copy.
      await ctx.db('users').where({ id }).update({ search_doc: 'tampered' });
      expect(await docOf(id)).toBe('lycée_trigger\u001fother@example.com\u001fünïcode ñame');
      await ctx.db('customers').where({ id: customer.id }).update({ search_doc: 'tampered' });
      expect(await docOf(id)).toBe('lycée_trigger\u001fother@example.com\u001fünïcode ñame');
      // A customer moved to another user takes that user's text.
      const [{ id: other }] = await ctx.db('users').insert({ username: 'Moved_Trigger', email: 'moved@example.com', password_hash: 'x', display_name: 'M' }).returning('id');
      await ctx.db('customers').where({ id: customer.id }).update({ user_id: other });
      expect((await ctx.db('customers').where({ id: customer.id }).first('search_doc')).search_doc).toBe('moved_trigger\u001fmoved@example.com\u001fm');
      await ctx.db('customers').where({ id: customer.id }).update({ user_id: id });
      await ctx.db('users').where({ id: other }).delete();
      expect(await docOf(id)).toBe('lycée_trigger\u001fother@example.com\u001fünïcode ñame');
      // Any case, either way, as ILIKE on each column finds it.
      for (const term of ['LYCÉE_TRIG', 'lycée_trig', 'ÜNÏCODE ñame', 'ñ']) {
        const found = await search(term);
        expect(found.ids).toEqual(await naive(term));
        expect(found.ids).toContain(Number(customer.id));
      }
      // A term with the separator matches no row across two columns (the per-column test decides it).
      const across = await search('trigger\u001fother');
      expect(await naive('trigger\u001fother')).toEqual([]);
      expect(across.ids).toEqual([]);
      expect(across.first.sql).toMatch(/"u"\."username" ilike \$\d+/);
    } finally {
      await ctx.db('customers').where({ id: customer.id }).delete();
      await ctx.db('users').where({ id }).delete();
    }
  });
});
