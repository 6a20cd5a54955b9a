/**
 * `npm run bench:scale`: every list shape at a million rows, against a bare server running the
 * naive SQL, in the same run.
 *
 * Starts PostgreSQL and Temporal like `npm run bench` (TEST_DATABASE_URL / TEMPORAL_ADDRESS, else
 * embedded ones), seeds BENCH_ROWS (1,000,000) users and customers, memberships, payments and
 * sites with set-based SQL (secondary indexes dropped during the load and built after it, as a
 * bulk load is done), then measures with autocannon, CONNECTIONS at a time, for each resource:
 * page 1, every exact filter, `__in` and `__not_in`, two date ranges, a rare and a common
 * search term, orderby every whitelisted column (asc), a deep page reached through `Link`
 * (the cursor 500,000 rows in), and GET one at random ids.
 *
 * The bare baseline: Express 5 + pg with HTTP Basic, answering each shape with the naive SQL
 * hostflow ran before (the page with LIMIT/OFFSET, plus `count(*)` for X-WP-Total), built once
 * from the same list specs, and GET one as one SELECT.
 *
 * Each server runs in a process of its own, apart from autocannon (in this one): hostflow's API
 * as `npm run start:api` runs it (dist is built first, unless BENCH_NO_BUILD), the bare server
 * through bench/bare-child.ts (bench/processes.ts).
 *
 * Prints a table, writes bench/scale-results.json and the README's figures (between the
 * `bench:scale` markers). BENCH_SHAPES (a regular expression on "resource shape", e.g.
 * `search`) measures those shapes only, and writes no file.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import autocannon from 'autocannon';
import express from 'express';
import type { Knex } from 'knex';
import pg from 'pg';
import { customerListSpec } from '../src/customers/service';
import { applyFilters, searchTableOf, type ListSpec } from '../src/db/list';
import { parseListQuery } from '../src/http/list';
import { setLogLevel } from '../src/logger';
import { membershipListSpec } from '../src/memberships/service';
import { paymentListSpec } from '../src/payments/service';
import { siteListSpec } from '../src/sites/service';
import { buildDist, ROOT, startApiProcess, startBareProcess } from './processes';
import { benchLog, hostflowTarget, machineMeta, runCleanup, startBenchEnv, textTable, type Log, type Step } from './run';

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
/** BENCH_SHAPES: a regular expression on "resource shape"; only those are measured, and no file is written. */
const ONLY = process.env.BENCH_SHAPES ? new RegExp(process.env.BENCH_SHAPES) : undefined;
const WARMUP_SECONDS = 0.5;
/** Callers of every shape (bench:ab's AB_SHAPES takes the same). */
export const CONNECTIONS = 8;
const SEED_CHUNK = 250_000;
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;
const README = path.join(ROOT, 'README.md');
const MARK_START = '<!-- bench:scale:start -->';
const MARK_END = '<!-- bench:scale:end -->';
const TABLES = ['users', 'customers', 'memberships', 'payments', 'sites'];

// ---- seeding --------------------------------------------------------------------------------

/** g = 1..ROWS; ids come out equal to g (a fresh database, inserted in order). */
const CREATED = "timestamptz '2023-01-01' + g * interval '90 seconds'";
const SEED: Record<string, string> = {
  customers: `WITH u AS (
      INSERT INTO users (username, email, password_hash, display_name)
      SELECT 'seed' || g, 'seed' || g || '@example.com', 'scrypt$seed', 'Seed customer ' || (g % 5000) FROM generate_series($1::int, $2::int) g ORDER BY g
      RETURNING id)
    INSERT INTO customers (user_id, email_verification, vip, has_trialed, signup_form, date_registered, last_login, date_created, date_modified)
    SELECT id, (array['none','pending','verified'])[1 + id % 3], id % 10 = 0, id % 4 = 1, (array['by-admin','by-register','checkout'])[1 + id % 3],
      ${CREATED.replace(/g/g, 'id')}, CASE WHEN id % 4 = 0 THEN NULL ELSE ${CREATED.replace(/g/g, 'id')} + (id % 30) * interval '1 day' END,
      ${CREATED.replace(/g/g, 'id')}, ${CREATED.replace(/g/g, 'id')} + (id % 97) * interval '1 hour'
    FROM u ORDER BY id`,
  memberships: `INSERT INTO memberships (customer_id, plan_id, status, currency, amount, initial_amount, gateway, gateway_subscription_id, gateway_customer_id,
      auto_renew, duration_unit, date_expiration, date_created, date_modified)
    SELECT g, (SELECT min(id) FROM products) + g % 10,
      CASE WHEN g % 20 < 12 THEN 'active' WHEN g % 20 < 15 THEN 'cancelled' WHEN g % 20 < 17 THEN 'expired' WHEN g % 20 < 19 THEN 'pending' WHEN g % 100 = 19 THEN 'trialing' ELSE 'on-hold' END,
      CASE WHEN g % 10 = 0 THEN 'EUR' ELSE 'USD' END, (g % 50) + 9.99, (g % 50) + 9.99, (array['stripe','paypal','manual'])[1 + g % 3], 'sub_' || g, 'cus_' || g,
      g % 2 = 0, CASE WHEN g % 5 = 0 THEN 'year' ELSE 'month' END, CASE WHEN g % 7 = 0 THEN NULL ELSE ${CREATED} + interval '30 days' END, ${CREATED}, ${CREATED}
    FROM generate_series($1::int, $2::int) g ORDER BY g`,
  payments: `INSERT INTO payments (customer_id, membership_id, product_id, status, currency, subtotal, total, gateway, gateway_payment_id, invoice_number, date_created, date_modified)
    SELECT g, g, (SELECT min(id) FROM products) + g % 10,
      CASE WHEN g % 20 < 17 THEN 'completed' WHEN g % 20 = 17 THEN 'pending' WHEN g % 20 = 18 THEN 'refunded' ELSE 'failed' END,
      CASE WHEN g % 10 = 0 THEN 'EUR' ELSE 'USD' END, (g % 50) + 9.99, (g % 50) + 9.99, (array['stripe','paypal','manual'])[1 + g % 3], 'pi_' || g,
      CASE WHEN g % 20 < 17 THEN g END, ${CREATED}, ${CREATED}
    FROM generate_series($1::int, $2::int) g ORDER BY g`,
  sites: `INSERT INTO sites (customer_id, membership_id, template_id, title, description, domain, path, type, active, public, archived, date_created, date_modified)
    SELECT g, g, CASE WHEN g % 13 = 0 AND g > 50 THEN 50 END, 'Seed site ' || g, 'A seeded site, number ' || g, 'site' || g || '.example.com', '/',
      CASE WHEN g % 50 = 0 THEN 'site_template' ELSE 'customer_owned' END, g % 10 <> 0, g % 3 <> 0, g % 25 = 0, ${CREATED}, ${CREATED}
    FROM generate_series($1::int, $2::int) g ORDER BY g`,
};

export async function seed(pool: pg.Pool, log: Log): Promise<void> {
  await pool.query(`INSERT INTO products (slug, name, type, amount) SELECT 'scale-plan-' || g, 'Scale plan ' || g, 'plan', g + 0.99 FROM generate_series(1, 10) g`);
  // A bulk load: the secondary indexes (not the unique ones, which the rules rely on) go, then come back built in one pass each.
  const { rows: indexes } = await pool.query<{ indexname: string; indexdef: string }>(
    `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = ANY($1) AND indexdef NOT LIKE 'CREATE UNIQUE%'`,
    [TABLES],
  );
  for (const i of indexes) await pool.query(`DROP INDEX ${i.indexname}`);
  for (const table of ['customers', 'memberships', 'payments', 'sites']) {
    const t0 = Date.now();
    for (let from = 1; from <= ROWS; from += SEED_CHUNK) await pool.query(SEED[table], [from, Math.min(ROWS, from + SEED_CHUNK - 1)]);
    log(`  ${table}: ${ROWS} rows in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  }
  const t0 = Date.now();
  const client = await pool.connect();
  try {
    await client.query("SET maintenance_work_mem = '512MB'");
    for (const i of indexes) await client.query(i.indexdef);
  } finally {
    client.release();
  }
  log(`  ${indexes.length} indexes built in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  for (const table of TABLES) await pool.query(`VACUUM ANALYZE ${table}`);
}

// ---- shapes ---------------------------------------------------------------------------------

interface Resource {
  plural: string;
  spec: ListSpec;
  /** The list's FROM and SELECT, as the service builds it. */
  base: (db: Knex) => Knex.QueryBuilder;
  /** One exact value per filter (chosen from the seeded distribution). */
  filters: Record<string, string>;
  in: [string, string];
  notIn: [string, string];
  /**
   * Search terms: rare (about a hundred matches), common (a third of the rows or more), and
   * medium ones (about 1%: thousands of matches, more than the count's 1,001): `clustered` in
   * a run of ids (a prefix of the seeded numbers), `spread` over the table.
   */
  search: { rare: string; common: string; clustered: string; spread?: string };
}

const MID = String(Math.floor(ROWS / 2) + 7);
export const RESOURCES: Resource[] = [
  {
    plural: 'customers',
    spec: customerListSpec,
    base: (db) =>
      db('customers as c')
        .leftJoin('users as u', 'u.id', 'c.user_id')
        .select('c.*', 'u.username', 'u.email', 'u.display_name'),
    filters: { user_id: MID, type: 'customer', email_verification: 'pending', vip: 'true', has_trialed: 'true', signup_form: 'checkout', username: `seed${MID}`, email: `seed${MID}@example.com` },
    in: ['email_verification__in', 'pending,verified'],
    notIn: ['email_verification__not_in', 'none'],
    search: { rare: 'seed4242', common: 'example', clustered: 'seed42', spread: '42@example' },
  },
  {
    plural: 'memberships',
    spec: membershipListSpec,
    base: (db) => db('memberships as t').select('t.*'),
    filters: { status: 'on-hold', customer_id: MID, plan_id: '3', gateway: 'paypal', auto_renew: 'true', currency: 'EUR', duration_unit: 'year' },
    in: ['status__in', 'active,trialing'],
    notIn: ['status__not_in', 'active'],
    search: { rare: 'sub_4242', common: 'paypal', clustered: 'sub_42' },
  },
  {
    plural: 'payments',
    spec: paymentListSpec,
    base: (db) => db('payments as t').select('t.*'),
    filters: { status: 'refunded', customer_id: MID, membership_id: MID, product_id: '3', gateway: 'manual', currency: 'EUR', invoice_number: MID },
    in: ['status__in', 'refunded,failed'],
    notIn: ['status__not_in', 'completed'],
    search: { rare: 'pi_4242', common: 'stripe', clustered: 'pi_42' },
  },
  {
    plural: 'sites',
    spec: siteListSpec,
    base: (db) => db('sites as t').select('t.*'),
    filters: { customer_id: MID, membership_id: MID, template_id: '50', type: 'site_template', domain: `site${MID}.example.com`, path: '/', active: 'false', public: 'false', archived: 'true' },
    in: ['type__in', 'site_template,pending'],
    notIn: ['type__not_in', 'customer_owned'],
    search: { rare: 'site4242', common: 'seeded', clustered: 'site42' },
  },
];

interface Shape {
  resource: string;
  name: string;
  /** hostflow: the path and query under the namespace root. */
  url: string;
  /** bare: the naive SQL (page, count), or null for GET one. */
  page?: { sql: string; bindings: readonly unknown[] };
  count?: { sql: string; bindings: readonly unknown[] };
  /** GET one: random ids. */
  one?: { table: string; select: string };
}

export function shapesOf(r: Resource, db: Knex): Shape[] {
  const queries: [string, Record<string, string>][] = [['page 1', {}]];
  for (const [k, v] of Object.entries(r.filters)) queries.push([`${k}=${v}`, { [k]: v }]);
  queries.push([`${r.in[0]}=${r.in[1]}`, { [r.in[0]]: r.in[1] }], [`${r.notIn[0]}=${r.notIn[1]}`, { [r.notIn[0]]: r.notIn[1] }]);
  queries.push(['date_created: the last 30 days', { 'date_created[after]': '2025-10-01' }]);
  queries.push(['date_created: a month, 18 months back', { 'date_created[after]': '2024-03-01', 'date_created[before]': '2024-03-31' }]);
  queries.push([`search=${r.search.rare} (rare)`, { search: r.search.rare }], [`search=${r.search.common} (common)`, { search: r.search.common }]);
  queries.push([`search=${r.search.clustered} (medium, clustered)`, { search: r.search.clustered }]);
  if (r.search.spread) queries.push([`search=${r.search.spread} (medium, spread)`, { search: r.search.spread }]);
  for (const orderby of Object.keys(r.spec.sortable)) if (orderby !== 'id') queries.push([`orderby=${orderby}&order=asc`, { orderby, order: 'asc' }]);
  return queries.map(([name, query]) => {
    const q = parseListQuery(query, r.spec);
    // The naive SQL: LIMIT/OFFSET and count(*) of every match.
    const page = applyFilters(r.base(db), q, r.spec).orderBy(q.orderColumn, q.order).limit(q.perPage).offset((q.page - 1) * q.perPage);
    if (q.orderColumn !== r.spec.idColumn) page.orderBy(r.spec.idColumn, q.order);
    const count = applyFilters(r.base(db), q, r.spec).clearSelect().count({ total: '*' });
    return { resource: r.plural, name, url: `/${r.plural}?${new URLSearchParams(query).toString()}`, page: page.toSQL().toNative(), count: count.toSQL().toNative() } as Shape;
  });
}

/**
 * Until the API has sampled the searched tables' common trigrams, which it does when it starts
 * (src/db/search-trigrams.ts): searches are measured after that, as a running API answers them
 * (a sample is taken again every 6 hours, by one replica).
 */
export async function searchesSampled(pool: pg.Pool, log: Log): Promise<void> {
  const searched = RESOURCES.map((r) => searchTableOf(r.spec)?.table).filter((t) => t !== undefined);
  for (let waited = 0; ; waited += 250) {
    const { rows: sampled } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM search_trigram_stats WHERE tbl = ANY($1)', [searched]);
    if (sampled[0].n === searched.length) break;
    if (waited > 120_000) throw new Error(`the API did not sample ${searched.join(', ')} in 2 minutes`);
    await new Promise((r) => setTimeout(r, 250));
  }
  log(`searched tables sampled (${searched.join(', ')})`);
}

// ---- the bare server ------------------------------------------------------------------------

/** Requests a server is still answering (a load run's last ones outlive it: a naive count(*) takes seconds). */
function inFlight(): { middleware: express.RequestHandler; idle(): Promise<void> } {
  let n = 0;
  return {
    middleware: (_req, res, next) => {
      n++;
      res.once('close', () => n--);
      next();
    },
    async idle() {
      while (n > 0) await new Promise((r) => setTimeout(r, 20));
    },
  };
}

function bareServer(pool: pg.Pool, shapes: Shape[], authorization: string, tracker: ReturnType<typeof inFlight>): http.Server {
  const app = express();
  app.disable('x-powered-by');
  // Answers once the requests still running have ended (the bench waits on it between shapes).
  app.get('/idle', async (_req, res) => {
    await tracker.idle();
    res.json({ idle: true });
  });
  app.use(tracker.middleware);
  app.use((req, res, next) => {
    if (req.headers.authorization !== authorization) res.status(401).json({ code: 'unauthorized' });
    else next();
  });
  app.get('/shape/:i', async (req, res) => {
    const s = shapes[Number(req.params.i)];
    const [page, count] = await Promise.all([pool.query(s.page!.sql, [...s.page!.bindings]), pool.query<{ total: string }>(s.count!.sql, [...s.count!.bindings])]);
    res.setHeader('X-WP-Total', count.rows[0].total);
    res.json(page.rows);
  });
  app.get('/one/:i/:id', async (req, res) => {
    const s = shapes[Number(req.params.i)];
    const { rows } = await pool.query(`${s.one!.select} WHERE ${s.one!.table}.id = $1`, [req.params.id]);
    if (!rows[0]) res.status(404).json({ code: 'not_found' });
    else res.json(rows[0]);
  });
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  return server;
}

/**
 * The bare server's process (bench/bare-child.ts): the shapes from SHAPES_FILE, DATABASE_URL,
 * DB_POOL_MAX, AUTHORIZATION; listens on PORT.
 */
export async function startScaleBare(env: NodeJS.ProcessEnv): Promise<http.Server> {
  const shapes = JSON.parse(fs.readFileSync(env.SHAPES_FILE!, 'utf8')) as Shape[];
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: Number(env.DB_POOL_MAX), application_name: 'bare' });
  const server = bareServer(pool, shapes, env.AUTHORIZATION!, inFlight());
  server.once('close', () => void pool.end());
  await new Promise<void>((resolve) => server.listen(Number(env.PORT), '127.0.0.1', () => resolve()));
  return server;
}

// ---- measuring ------------------------------------------------------------------------------

/** Until no other session runs a query (a client gone does not stop its statement at once). */
async function waitForIdleDatabase(pool: pg.Pool): Promise<void> {
  for (;;) {
    const { rows } = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'");
    if (rows[0].n === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Figures {
  p50: number;
  p99: number;
  rps: number;
  errors: number;
}

async function cannon(url: string, headers: Record<string, string>, seconds: number, randomPath?: () => string): Promise<Figures> {
  const result = await autocannon({
    url,
    headers,
    connections: CONNECTIONS,
    duration: seconds,
    requests: randomPath ? [{ setupRequest: (req) => ({ ...req, path: randomPath() }) }] : undefined,
  });
  return { p50: result.latency.p50, p99: result.latency.p99, rps: result.requests.average, errors: result.non2xx + result.errors + result.timeouts };
}

async function measure(url: string, headers: Record<string, string>, randomPath?: () => string): Promise<Figures> {
  await cannon(url, headers, WARMUP_SECONDS, randomPath);
  return cannon(url, headers, SECONDS, randomPath);
}

interface Row {
  resource: string;
  shape: string;
  hostflow: Figures;
  bare: Figures;
}

/** p50 / p99 and rate; a server that answered nothing in the measured seconds says so. */
const cells = (f: Figures) => (f.rps === 0 ? `none answered in ${SECONDS} s | 0` : `${f.p50} / ${f.p99} | ${f.rps.toFixed(0)}`);

function readmeTable(rows: Row[], meta: Record<string, unknown>): string {
  const lines = [
    `Measured ${meta.date} by \`npm run bench:scale\` (${meta.cpus} CPUs, ${meta.cpuModel}, Node ${meta.node}, ${ROWS.toLocaleString('en-US')} rows per resource, ${CONNECTIONS} connections, ${SECONDS} s per shape after a ${WARMUP_SECONDS} s warm-up; hostflow's API as \`start:api\` runs it, the bare server and the load generator each in a process of its own, PostgreSQL on the same machine).`,
    '',
    '| resource | shape | hostflow p50 / p99 ms | req/s | bare p50 / p99 ms | req/s |',
    '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.resource} | ${r.shape.replace(/\|/g, '\\|')} | ${cells(r.hostflow)} | ${cells(r.bare)} |`),
  ];
  const worst = rows.filter((r) => !r.shape.startsWith('GET one')).reduce((a, b) => (b.hostflow.p99 > a.hostflow.p99 ? b : a));
  lines.push('', `Worst list p99: ${worst.hostflow.p99} ms (${worst.resource}, ${worst.shape}); goal: at most 30 ms for every list shape.`);
  return lines.join('\n');
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const cleanup: Step[] = [];
  const log = benchLog();
  try {
    buildDist(log);
    const env = await startBenchEnv({ cleanup, log, tag: RUN_TAG, pgDir: 'bench-scale-pg' });
    const { config, db } = env;
    const pool = new pg.Pool({ connectionString: config.DATABASE_URL, max: config.DB_POOL_MAX, application_name: 'bare' });
    cleanup.push(['pg pool', () => pool.end()]);
    log(`seeding ${ROWS} rows per resource`);
    const t0 = Date.now();
    await seed(pool, log);
    const seedSeconds = (Date.now() - t0) / 1000;
    log(`seeded in ${seedSeconds.toFixed(0)} s`);

    const api = await startApiProcess(config, log);
    cleanup.push(['api process', () => api.stop()]);
    await searchesSampled(pool, log);
    const { root, headers } = hostflowTarget(config);

    const shapes: Shape[] = [];
    for (const r of RESOURCES) {
      shapes.push(...shapesOf(r, db));
      // A deep page, reached through Link: halfway down, once (OFFSET, slow), then its rel="next".
      const deepPage = Math.floor(ROWS / 200);
      const deep = await fetch(`${root}/${r.plural}?per_page=100&page=${deepPage}`, { headers });
      const next = /<([^>]+)>; rel="next"/.exec(deep.headers.get('link') ?? '')?.[1];
      if (!next) throw new Error(`no rel="next" on page ${deepPage} of ${r.plural}`);
      const q = parseListQuery({ per_page: '100', page: String(deepPage + 1) }, r.spec);
      const page = applyFilters(r.base(db), q, r.spec).orderBy(q.orderColumn, q.order).limit(q.perPage).offset((q.page - 1) * q.perPage);
      const count = applyFilters(r.base(db), q, r.spec).clearSelect().count({ total: '*' });
      shapes.push({ resource: r.plural, name: `page ${(deepPage + 1).toLocaleString('en-US')} of 100 (Link next; bare: OFFSET)`, url: next.slice(root.length), page: page.toSQL().toNative(), count: count.toSQL().toNative() });
      const select = r.base(db).toSQL().sql;
      shapes.push({ resource: r.plural, name: 'GET one (random id)', url: `/${r.plural}`, one: { table: r.plural === 'customers' ? 'c' : 't', select } });
    }

    const shapesFile = path.join(ROOT, '.tmp', `bench-scale-shapes-${RUN_TAG}.json`);
    fs.writeFileSync(shapesFile, JSON.stringify(shapes));
    cleanup.push(['shapes file', async () => fs.rmSync(shapesFile, { force: true })]);
    const bare = await startBareProcess('scale', 'startScaleBare', { SHAPES_FILE: shapesFile, DATABASE_URL: config.DATABASE_URL!, DB_POOL_MAX: String(config.DB_POOL_MAX), AUTHORIZATION: headers.authorization }, log);
    cleanup.push(['bare process', () => bare.child.stop()]);
    const bareRoot = bare.root;

    const rows: Row[] = [];
    const randomId = () => 1 + Math.floor(Math.random() * ROWS);
    for (const [i, s] of shapes.entries()) {
      if (ONLY && !ONLY.test(`${s.resource} ${s.name}`)) continue;
      let h: Figures;
      let b: Figures;
      if (s.one) {
        const prefix = new URL(`${root}${s.url}`).pathname;
        h = await measure(`${root}${s.url}/1`, headers, () => `${prefix}/${randomId()}`);
        b = await measure(`${bareRoot}/one/${i}/1`, headers, () => `/one/${i}/${randomId()}`);
      } else {
        h = await measure(`${root}${s.url}`, headers);
        b = await measure(`${bareRoot}/shape/${i}`, headers);
      }
      // The bare server's last naive queries finish before the next shape is measured.
      await fetch(`${bareRoot}/idle`);
      await waitForIdleDatabase(pool);
      if (h.errors > 0) throw new Error(`${s.resource} ${s.name}: ${h.errors} failed requests on hostflow`);
      log(`${s.resource} ${s.name}: hostflow p50 ${h.p50} p99 ${h.p99} ms (${h.rps.toFixed(0)}/s); bare p50 ${b.p50} p99 ${b.p99} ms (${b.rps.toFixed(0)}/s)`);
      rows.push({ resource: s.resource, shape: s.name, hostflow: h, bare: b });
    }

    const meta = { ...machineMeta(), rows: ROWS, connections: CONNECTIONS, seconds: SECONDS, seedSeconds };
    const body = rows.map((r) => [r.resource, r.shape, `${r.hostflow.p50}`, `${r.hostflow.p99}`, r.hostflow.rps.toFixed(0), `${r.bare.p50}`, `${r.bare.p99}`, r.bare.rps.toFixed(0)]);
    process.stdout.write(`\n${textTable(['resource', 'shape', 'p50 ms', 'p99 ms', 'req/s', 'bare p50', 'bare p99', 'bare req/s'], body)}\n`);
    if (ONLY) return;
    fs.writeFileSync(path.join(__dirname, 'scale-results.json'), `${JSON.stringify({ meta, rows }, null, 2)}\n`);
    const readme = fs.readFileSync(README, 'utf8');
    const start = readme.indexOf(MARK_START);
    const end = readme.indexOf(MARK_END);
    if (start >= 0 && end > start) {
      fs.writeFileSync(README, `${readme.slice(0, start + MARK_START.length)}\n${readmeTable(rows, meta)}\n${readme.slice(end)}`);
      log('wrote the figures into README.md');
    }
  } finally {
    await runCleanup(cleanup);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  });
}
