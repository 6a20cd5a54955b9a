/**
 * `npm run bench`: hostflow against a "bare" Express 5 + pg baseline doing the same SQL.
 *
 * Starts what it needs (like the tests): PostgreSQL (TEST_DATABASE_URL, else an embedded
 * server in .tmp/bench-pg), Temporal (TEMPORAL_ADDRESS, else an in-memory dev server), seeds
 * 10,000 customers, then measures every entry of `scenarios` with autocannon against both
 * servers. Prints a table and writes bench/results.json.
 *
 * Adding a resource: describe its bare routes in `bareResources` and its requests in
 * `scenarios` (paths are relative to the REST namespace, the same on both servers).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import express, { type Express } from 'express';
import pg from 'pg';
import { loadConfig, WU_NAMESPACE, type Config } from '../src/config';
import { createDb, type Db } from '../src/db/knex';
import { migrateLatest } from '../src/db/migrate';
import { startEmbeddedPostgres } from '../src/infra/embedded-postgres';
import { findTemporalBinary, freePort, startTemporalDevServer, TEMPORAL_MISSING } from '../src/infra/temporal-server';
import { setLogLevel } from '../src/logger';
import { prepareDatabase } from '../src/runtime';
import type { SettingsStore } from '../src/settings/store';
import { connectTemporal, type TemporalHandle } from '../src/temporal/client';
import { taskQueues } from '../src/temporal/task-queues';
import { hashPassword } from '../src/users/password';
import { buildDist, startApiProcess, startBareProcess, type Child } from './processes';

const ROOT = path.resolve(__dirname, '..');
const TMP = path.join(ROOT, '.tmp');
const API_KEY = 'hf_bench_key_0123456789abcdef';
const API_SECRET = 'bench-secret-0123456789-abcdefghij';
const SEED_CUSTOMERS = 10_000;
const SEED_BATCH = 2_000;
const WARMUP_SECONDS = 1;

// ---- scenarios ------------------------------------------------------------------------------

export interface BenchContext {
  /** Ids of the seeded customers, ascending. */
  customerIds: number[];
  /** Ids of the seeded products, ascending. */
  productIds: number[];
}

export interface Scenario {
  name: string;
  method: 'GET' | 'POST' | 'PATCH';
  /**
   * Path under the namespace root: `/customers/1` is `/wp-json/wu/v2/customers/1` on hostflow.
   * With a body, asked again for each request with the body's `n` (updates spread over rows).
   */
  path: (ctx: BenchContext, n?: number) => string;
  /** A fresh JSON body for each request; `n` is unique over the whole run. */
  body?: (n: number) => unknown;
  connections: number;
  /** Extra request headers (both servers get them). */
  headers?: Record<string, string>;
  /** Seconds (after a WARMUP_SECONDS warm-up run). */
  duration: number;
}

/** Unique per run, so creates never collide with seeded rows or with an earlier run. */
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;

export const scenarios: Scenario[] = [
  {
    name: 'GET one customer',
    method: 'GET',
    path: (ctx) => `/customers/${ctx.customerIds[Math.floor(ctx.customerIds.length / 2)]}`,
    connections: 10,
    duration: 8,
  },
  {
    // hostflow runs GET one as a prepared statement (PostgreSQL plans it once per connection);
    // this row has the bare server prepare it too, so only the HTTP layers differ.
    name: 'GET one customer (both prepared)',
    method: 'GET',
    path: (ctx) => `/customers/${ctx.customerIds[Math.floor(ctx.customerIds.length / 2)]}`,
    headers: { 'x-bare-prepared': '1' },
    connections: 10,
    duration: 8,
  },
  { name: 'list 20 customers', method: 'GET', path: () => '/customers', connections: 10, duration: 8 },
  { name: 'list 20 products', method: 'GET', path: () => '/products', connections: 10, duration: 8 },
  {
    name: 'create product',
    method: 'POST',
    path: () => '/products',
    body: (n) => ({ slug: `bench-${RUN_TAG}-${n}`, name: `Bench plan ${n}`, amount: '19.99', type: 'plan' }),
    connections: 10,
    duration: 8,
  },
  {
    // Spread over the seeded products, so concurrent updates seldom wait for one row's lock.
    name: 'update product',
    method: 'PATCH',
    path: (ctx, n = 0) => `/products/${ctx.productIds[n % ctx.productIds.length]}`,
    body: (n) => ({ name: `Bench plan renamed ${n}`, description: `Updated by run ${RUN_TAG}` }),
    connections: 10,
    duration: 8,
  },
  {
    // No password: the user's display name and the customer's flag, one row of each table.
    name: 'update customer',
    method: 'PATCH',
    path: (ctx, n = 0) => `/customers/${ctx.customerIds[n % ctx.customerIds.length]}`,
    body: (n) => ({ display_name: `Bench customer ${n}`, vip: n % 2 === 0 }),
    connections: 10,
    duration: 8,
  },
  {
    // Dominated by scrypt (tens of ms per hash on the libuv pool): fewer connections.
    name: 'create customer',
    method: 'POST',
    path: () => '/customers',
    body: (n) => ({ username: `bench${RUN_TAG}x${n}`, email: `bench${RUN_TAG}x${n}@example.com`, password: 'secret123' }),
    connections: 4,
    duration: 8,
  },
];

/**
 * BENCH_ONLY (scenario names, comma-separated, e.g. `GET one customer,update product`) runs
 * some of them; with BENCH_TARGET (`hostflow` or `bare`) only one server is measured. Either
 * leaves bench/results.json alone. BENCH_SECONDS sets every scenario's duration; BENCH_PROFILE=1
 * writes a CPU profile of the server's process over each measurement (.tmp/profiles; open it
 * in Chrome's DevTools).
 */
function selectedScenarios(): Scenario[] {
  const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
  return only ? scenarios.filter((s) => only.includes(s.name)) : scenarios;
}

const EMPTY: Measurement = { rps: 0, p50: 0, p99: 0, requests: 0, non2xx: 0, errors: 0 };

/** Rounds per scenario and server (BENCH_ROUNDS, default 2), alternating the servers' order. */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 2));

/** Rounds of equal length as one measurement: mean rate and latencies, summed counts. */
function combine(list: Measurement[]): Measurement {
  const mean = (f: (m: Measurement) => number) => list.reduce((a, m) => a + f(m), 0) / list.length;
  const sum = (f: (m: Measurement) => number) => list.reduce((a, m) => a + f(m), 0);
  const cpu = list.every((m) => m.cpuUsPerRequest !== undefined) ? { cpuUsPerRequest: sum((m) => m.cpuUs ?? 0) / sum((m) => m.requests), cpuUs: sum((m) => m.cpuUs ?? 0) } : {};
  return { rps: mean((m) => m.rps), p50: mean((m) => m.p50), p99: mean((m) => m.p99), requests: sum((m) => m.requests), non2xx: sum((m) => m.non2xx), errors: sum((m) => m.errors), ...cpu };
}

// ---- the bare baseline ----------------------------------------------------------------------

/** The same columns the customers service reads for a whole record (src/customers/service.ts: its columns, through the join). */
const CUSTOMER_SELECT = `select c.id, c.user_id, u.username, u.email, u.display_name, c.type, c.email_verification,
  c.date_registered, c.last_login, c.has_trialed, c.vip, c.ips, c.signup_form, c.extra_information,
  c.billing_address, c.notes, c.migrated_from_id, c.date_created, c.date_modified
  from customers as c inner join users as u on u.id = c.user_id`;

export interface BareResource {
  /** Path segment, e.g. `customers`. */
  plural: string;
  /** `select ... from ... join ...` without where/order. */
  select: string;
  /** `select count(*) as total from ...` */
  count: string;
  idColumn: string;
  /** Inserts inside an open transaction, answers the new record. */
  insert(client: pg.PoolClient, body: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** Updates inside an open transaction, answers the record (null when the id is unknown). */
  update(client: pg.PoolClient, id: number, body: Record<string, unknown>): Promise<Record<string, unknown> | null>;
}

/**
 * The event row hostflow writes in a customer's write transaction (src/events/record.ts, the
 * customers service's `changed` hook): the record as the payload. Products write none.
 */
async function insertCustomerEvent(client: pg.PoolClient, slug: 'customer_created' | 'customer_updated', record: Record<string, unknown>): Promise<void> {
  await client.query(
    'insert into events (author_id, initiator, object_id, object_type, payload, severity, slug) values ($1, $2, $3, $4, $5, $6, $7)',
    [null, 'system', record.id, 'customer', JSON.stringify(record), 3, slug],
  );
}

export const bareResources: BareResource[] = [
  {
    plural: 'customers',
    select: CUSTOMER_SELECT,
    count: 'select count(*) as total from customers as c inner join users as u on u.id = c.user_id',
    idColumn: 'c.id',
    async insert(client, body) {
      const username = String(body.username);
      const email = String(body.email);
      // What hostflow does besides the inserts: username and e-mail free, case-insensitively.
      const taken = await client.query('select id, username, email from users where (lower(username) = lower($1) or lower(email) = lower($2))', [username, email]);
      if (taken.rowCount) throw new Error('username or email taken');
      const passwordHash = await hashPassword(String(body.password));
      const user = await client.query<{ id: number }>(
        'insert into users (display_name, email, password_hash, username) values ($1, $2, $3, $4) returning *',
        [username, email, passwordHash, username],
      );
      const customer = await client.query<{ id: number }>('insert into customers (user_id) values ($1) returning id', [user.rows[0].id]);
      const { rows } = await client.query(`${CUSTOMER_SELECT} where c.id = $1 limit 1`, [customer.rows[0].id]);
      await insertCustomerEvent(client, 'customer_created', rows[0]);
      return rows[0];
    },
    async update(client, id, body) {
      // What hostflow does: lock the customer, write the user's display name, touch the customer, read the record.
      const current = await client.query<{ id: number; user_id: number }>('select id, user_id from customers where id = $1 limit 1 for update', [id]);
      if (!current.rowCount) return null;
      await client.query('update users set display_name = $1, date_modified = now() where id = $2', [String(body.display_name), current.rows[0].user_id]);
      await client.query('update customers set vip = $1, date_modified = now() where id = $2', [Boolean(body.vip), id]);
      const { rows } = await client.query(`${CUSTOMER_SELECT} where c.id = $1 limit 1`, [id]);
      await insertCustomerEvent(client, 'customer_updated', rows[0]);
      return rows[0];
    },
  },
  {
    plural: 'products',
    select: 'select t.* from products as t',
    count: 'select count(*) as total from products as t',
    idColumn: 't.id',
    async insert(client, body) {
      const { rows } = await client.query(
        'insert into products (amount, name, slug, type) values ($1, $2, $3, $4) returning *',
        [String(body.amount), String(body.name), String(body.slug), String(body.type)],
      );
      return rows[0];
    },
    async update(client, id, body) {
      // What hostflow does: lock the row (its rules read it), write, answer the row written.
      const current = await client.query('select * from products where id = $1 limit 1 for update', [id]);
      if (!current.rowCount) return null;
      const { rows } = await client.query('update products set name = $1, description = $2, date_modified = now() where id = $3 returning *', [
        String(body.name),
        String(body.description),
        id,
      ]);
      return rows[0];
    },
  },
];

/** Plain Express 5 + pg.Pool: no knex, no validation, no auth, no logging, no metrics. */
export function createBareApp(pool: pg.Pool, resources: BareResource[]): Express {
  const app = express();
  app.disable('x-powered-by');
  app.use(express.json());
  for (const r of resources) {
    const one = `${r.select} where ${r.idColumn} = $1 limit 1`;
    const page = `${r.select} order by ${r.idColumn} desc limit $1 offset $2`;

    app.get(`/${r.plural}/:id`, async (req, res) => {
      const { rows } = req.headers['x-bare-prepared']
        ? await pool.query({ name: `bare_${r.plural}_one`, text: one, values: [req.params.id] })
        : await pool.query(one, [req.params.id]);
      if (!rows[0]) res.status(404).json({ code: 'not_found' });
      else res.json(rows[0]);
    });

    app.get(`/${r.plural}`, async (_req, res) => {
      const perPage = 20;
      const [rows, count] = await Promise.all([pool.query(page, [perPage, 0]), pool.query<{ total: number }>(r.count)]);
      const total = Number(count.rows[0].total);
      res.setHeader('X-WP-Total', String(total));
      res.setHeader('X-WP-TotalPages', String(Math.ceil(total / perPage)));
      res.json(rows.rows);
    });

    const inTransaction = async <T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
      const client = await pool.connect();
      try {
        await client.query('begin');
        const out = await fn(client);
        await client.query('commit');
        return out;
      } catch (err) {
        await client.query('rollback').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    };

    app.post(`/${r.plural}`, async (req, res) => {
      res.json(await inTransaction((client) => r.insert(client, req.body as Record<string, unknown>)));
    });

    app.patch(`/${r.plural}/:id`, async (req, res) => {
      const rec = await inTransaction((client) => r.update(client, Number(req.params.id), req.body as Record<string, unknown>));
      if (!rec) res.status(404).json({ code: 'not_found' });
      else res.json(rec);
    });
  }
  return app;
}

/**
 * The bare server's process (bench/bare-child.ts): createBareApp over DATABASE_URL with a pool
 * of DB_POOL_MAX, on PORT.
 */
export async function startRunBare(env: NodeJS.ProcessEnv): Promise<http.Server> {
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: Number(env.DB_POOL_MAX), application_name: 'bare' });
  const server = http.createServer(createBareApp(pool, bareResources));
  server.keepAliveTimeout = 65_000; // as startHttp
  server.once('close', () => void pool.end());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(env.PORT), '127.0.0.1', () => resolve());
  });
  return server;
}

// ---- seeding --------------------------------------------------------------------------------

export async function seed(pool: pg.Pool, count: number): Promise<number[]> {
  const ids: number[] = [];
  for (let from = 1; from <= count; from += SEED_BATCH) {
    const to = Math.min(from + SEED_BATCH - 1, count);
    const { rows } = await pool.query<{ id: number }>(
      `with u as (
         insert into users (username, email, password_hash, display_name)
         select 'seed' || g, 'seed' || g || '@example.com', 'scrypt$seed', 'Seed customer ' || g
         from generate_series($1::int, $2::int) as g
         returning id
       )
       insert into customers (user_id, email_verification, vip, ips, billing_address, notes)
       select id,
              (array['none','pending','verified'])[1 + id % 3],
              id % 10 = 0,
              '["203.0.113.7"]'::jsonb,
              jsonb_build_object('billing_country', 'US', 'billing_zip_code', lpad((id % 100000)::text, 5, '0'), 'billing_city', 'Springfield'),
              '[]'::jsonb
       from u
       returning id`,
      [from, to],
    );
    ids.push(...rows.map((r) => Number(r.id)));
  }
  await pool.query(
    `insert into products (slug, name, amount, type, description)
     select 'seed-plan-' || g, 'Seed plan ' || g, (g % 100) + 0.99, (array['plan','package','service'])[1 + g % 3], 'Seeded'
     from generate_series(1, 1000) as g`,
  );
  await pool.query('vacuum analyze products');
  await pool.query('vacuum analyze users');
  await pool.query('vacuum analyze customers');
  return ids.sort((a, b) => a - b);
}

// ---- measuring ------------------------------------------------------------------------------

export interface Target {
  name: 'hostflow' | 'bare';
  /** e.g. http://127.0.0.1:1234/wp-json/wu/v2 */
  root: string;
  headers: Record<string, string>;
  /** The server's process (bench/processes.ts), for BENCH_PROFILE. */
  process?: Child;
}

export interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  /** CPU (user + system) the server's process used over the measured seconds, in microseconds (Linux, /proc). */
  cpuUs?: number;
  /** cpuUs / requests: what a request costs the server's process, whatever else the machine runs. */
  cpuUsPerRequest?: number;
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on Linux). */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system) a process has used so far, in microseconds; undefined where /proc is not there. */
function cpuUsOf(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (in parentheses): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

let bodyCounter = 0;

export async function cannon(target: Target, scenario: Scenario, ctx: BenchContext, duration: number, warmup = false): Promise<Measurement> {
  const url = `${target.root}${scenario.path(ctx)}`;
  const headers: Record<string, string> = { ...target.headers, ...scenario.headers };
  if (scenario.body) headers['content-type'] = 'application/json';
  const makeBody = scenario.body;
  const rootPath = new URL(target.root).pathname.replace(/\/$/, '');
  const result = await autocannon({
    url,
    method: scenario.method,
    headers,
    connections: scenario.connections,
    duration,
    requests: makeBody
      ? [
          {
            setupRequest: (req) => {
              const n = ++bodyCounter;
              return { ...req, path: `${rootPath}${scenario.path(ctx, n)}`, body: JSON.stringify(makeBody(n)) };
            },
          },
        ]
      : undefined,
  });
  // A warm-up may end before a slow request (scrypt on a loaded machine) answers.
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0 || (!warmup && result['2xx'] === 0)) {
    const sample = await fetch(url, {
      method: scenario.method,
      headers,
      body: makeBody ? JSON.stringify(makeBody(++bodyCounter)) : undefined,
    })
      .then(async (r) => `${r.status} ${(await r.text()).slice(0, 300)}`)
      .catch((err: Error) => err.message);
    throw new Error(
      `${scenario.name} on ${target.name} (${scenario.method} ${url}): ${result['2xx']} 2xx, ${result.non2xx} non-2xx, ` +
        `${result.errors} errors, ${result.timeouts} timeouts; status codes ${JSON.stringify(result.statusCodeStats ?? {})}; ` +
        `a fresh request answered: ${sample}`,
    );
  }
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function measure(target: Target, scenario: Scenario, ctx: BenchContext): Promise<Measurement> {
  await cannon(target, scenario, ctx, WARMUP_SECONDS, true);
  const duration = scenario.duration;
  const pid = target.process?.pid;
  const before = pid === undefined ? undefined : cpuUsOf(pid);
  // BENCH_PROFILE=1: a CPU profile of the server's process over the measured seconds only.
  const m =
    !process.env.BENCH_PROFILE || !target.process
      ? await cannon(target, scenario, ctx, duration)
      : await target.process.profiled(`${scenario.name}-${target.name}`, () => cannon(target, scenario, ctx, duration));
  const after = pid === undefined ? undefined : cpuUsOf(pid);
  if (before === undefined || after === undefined || m.requests === 0) return m;
  return { ...m, cpuUs: after - before, cpuUsPerRequest: (after - before) / m.requests };
}

// ---- output ---------------------------------------------------------------------------------

export interface ScenarioResult {
  scenario: string;
  method: string;
  path: string;
  connections: number;
  duration: number;
  hostflow: Measurement;
  bare: Measurement;
  /** hostflow / bare throughput */
  ratio: number;
  /** bare / hostflow CPU per request: the throughput ratio each would reach with the same CPU to itself. */
  cpuRatio?: number;
}

function table(rows: ScenarioResult[]): string {
  const header = ['scenario', 'conns', 'hostflow req/s', 'p50 ms', 'p99 ms', 'CPU us/req', 'bare req/s', 'p50 ms', 'p99 ms', 'CPU us/req', 'ratio', 'CPU ratio'];
  const cpu = (m: Measurement) => (m.cpuUsPerRequest === undefined ? '-' : m.cpuUsPerRequest.toFixed(0));
  const body = rows.map((r) => [
    r.scenario,
    String(r.connections),
    r.hostflow.rps.toFixed(0),
    r.hostflow.p50.toFixed(1),
    r.hostflow.p99.toFixed(1),
    cpu(r.hostflow),
    r.bare.rps.toFixed(0),
    r.bare.p50.toFixed(1),
    r.bare.p99.toFixed(1),
    cpu(r.bare),
    r.ratio.toFixed(2),
    r.cpuRatio === undefined ? '-' : r.cpuRatio.toFixed(2),
  ]);
  return textTable(header, body);
}

/** A plain-text table: the first column left-aligned, the others right-aligned. */
export function textTable(header: string[], body: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

// ---- main -----------------------------------------------------------------------------------

export type Step = [name: string, run: () => Promise<unknown>];
export type Log = (msg: string) => void;

export interface BenchEnv {
  config: Config;
  db: Db;
  settings: SettingsStore;
  temporal: TemporalHandle;
  /** PostgreSQL is the embedded server (else TEST_DATABASE_URL). */
  embedded: boolean;
}

/** A stderr logger with the seconds since `started`. */
export function benchLog(started = Date.now()): Log {
  return (msg) => process.stderr.write(`[bench ${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
}

/**
 * PostgreSQL (TEST_DATABASE_URL, else embedded in .tmp/<pgDir>) and Temporal (TEMPORAL_ADDRESS,
 * else a dev server) in parallel, a fresh migrated database `hf_bench_<tag>`, hostflow's config
 * (the HTTP port free, not listening yet), Knex and a Temporal client. Each thing started
 * pushes its stop onto `cleanup` (run them with runCleanup).
 */
export async function startBenchEnv(opts: { cleanup: Step[]; log: Log; tag: string; pgDir?: string; temporalLog?: string; temporalDbFile?: string; env?: Record<string, string> }): Promise<BenchEnv> {
  const { cleanup, log } = opts;
  fs.mkdirSync(TMP, { recursive: true });
  const pgStart = (async () => {
    const external = process.env.TEST_DATABASE_URL;
    if (external) return { adminUrl: external, embedded: null };
    const dir = path.join(TMP, opts.pgDir ?? 'bench-pg');
    fs.rmSync(dir, { recursive: true, force: true });
    const embedded = await startEmbeddedPostgres(dir, await freePort());
    return { adminUrl: embedded.url('postgres'), embedded };
  })();
  const temporalStart = (async () => {
    if (process.env.TEMPORAL_ADDRESS) return { address: process.env.TEMPORAL_ADDRESS, dev: null };
    const binary = findTemporalBinary(process.env.TEMPORAL_CLI, ROOT);
    if (!binary) throw new Error(TEMPORAL_MISSING);
    // With temporalDbFile: the dev server's SQLite file, as `npm start` runs it (fresh each run).
    const dbFile = opts.temporalDbFile ? path.join(TMP, opts.temporalDbFile) : undefined;
    if (dbFile) fs.rmSync(dbFile, { force: true });
    const dev = await startTemporalDevServer({ binary, port: await freePort(), dbFile, logFile: path.join(TMP, opts.temporalLog ?? 'temporal-bench.log'), timeoutMs: 90_000 });
    return { address: dev.address, dev };
  })();
  const [pgRes, temporalRes] = await Promise.allSettled([pgStart, temporalStart]);
  if (pgRes.status === 'fulfilled' && pgRes.value.embedded) {
    const embedded = pgRes.value.embedded;
    cleanup.push(['embedded postgres', () => embedded.stop()]);
  }
  if (temporalRes.status === 'fulfilled' && temporalRes.value.dev) {
    const dev = temporalRes.value.dev;
    cleanup.push(['temporal dev server', () => dev.stop()]);
  }
  if (pgRes.status === 'rejected') throw pgRes.reason;
  if (temporalRes.status === 'rejected') throw temporalRes.reason;
  const { adminUrl, embedded } = pgRes.value;
  log(`postgres ${embedded ? 'embedded' : 'external'}, temporal at ${temporalRes.value.address}`);

  const dbName = `hf_bench_${opts.tag}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  await admin.end();
  if (!embedded) {
    // On a shared server, leave nothing behind (runs after the pools are closed).
    cleanup.push([
      'drop database',
      async () => {
        const a = new pg.Client({ connectionString: adminUrl });
        await a.connect();
        await a.query(`drop database if exists ${dbName} with (force)`);
        await a.end();
      },
    ]);
  }
  const dbUrl = new URL(adminUrl);
  dbUrl.pathname = `/${dbName}`;

  const config = loadConfig({
    DATABASE_URL: dbUrl.toString(),
    TEMPORAL_ADDRESS: temporalRes.value.address,
    WU_API_KEY: API_KEY,
    WU_API_SECRET: API_SECRET,
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    LOG_LEVEL: 'silent',
    ...opts.env,
  });
  setLogLevel(config.LOG_LEVEL);

  const db = createDb(config.DATABASE_URL!, config.DB_POOL_MAX);
  cleanup.push(['knex', () => db.destroy()]);
  await migrateLatest(db);
  const settings = await prepareDatabase(db, config);
  const temporal = await connectTemporal(config.TEMPORAL_ADDRESS!, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, taskQueues(config).bulk);
  cleanup.push(['temporal connection', () => temporal.connection.close()]);
  return { config, db, settings, temporal, embedded: embedded !== null };
}

/** hostflow's REST namespace root and the Basic credentials startBenchEnv configured. */
export function hostflowTarget(config: Config): { root: string; headers: Record<string, string> } {
  return {
    root: `http://127.0.0.1:${config.PORT}${config.REST_PREFIX}/${WU_NAMESPACE}`,
    headers: { authorization: `Basic ${Buffer.from(`${API_KEY}:${API_SECRET}`).toString('base64')}` },
  };
}

/** Runs the cleanup steps in reverse, reporting (not throwing) failures. */
export async function runCleanup(cleanup: Step[]): Promise<void> {
  for (const [name, run] of cleanup.reverse()) {
    try {
      await run();
    } catch (err) {
      process.stderr.write(`[bench] cleanup of ${name} failed: ${(err as Error).message}\n`);
    }
  }
}

/** Date, Node and CPU for the results file. */
export function machineMeta() {
  const cpus = os.cpus();
  return {
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
  };
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const cleanup: Step[] = [];
  const log = benchLog();

  try {
    buildDist(log);
    const { config, embedded } = await startBenchEnv({ cleanup, log, tag: RUN_TAG });
    const pool = new pg.Pool({ connectionString: config.DATABASE_URL, max: config.DB_POOL_MAX, application_name: 'bare' });
    cleanup.push(['pg pool', () => pool.end()]);

    const customerIds = await seed(pool, SEED_CUSTOMERS);
    log(`seeded ${customerIds.length} customers`);

    const api = await startApiProcess(config, log);
    cleanup.push(['api process', () => api.stop()]);
    const bare = await startBareProcess('run', 'startRunBare', { DATABASE_URL: config.DATABASE_URL!, DB_POOL_MAX: String(config.DB_POOL_MAX) }, log);
    cleanup.push(['bare process', () => bare.child.stop()]);

    const targets: Target[] = [
      { name: 'hostflow', ...hostflowTarget(config), process: api },
      { name: 'bare', root: bare.root, headers: {}, process: bare.child },
    ];

    const { rows: products } = await pool.query<{ id: number }>('select id from products order by id');
    const ctx: BenchContext = { customerIds, productIds: products.map((p) => Number(p.id)) };
    const results: ScenarioResult[] = [];
    for (const s of selectedScenarios()) {
      // ROUNDS alternating rounds (hostflow then bare, then bare then hostflow, ...), each of
      // duration / ROUNDS: a change in the machine's load then weighs on both alike.
      const rounds: Partial<Record<Target['name'], Measurement[]>> = {};
      const seconds = Number(process.env.BENCH_SECONDS ?? s.duration) / ROUNDS;
      for (let round = 0; round < ROUNDS; round++) {
        for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
          if (process.env.BENCH_TARGET && process.env.BENCH_TARGET !== t.name) continue;
          log(`${s.name}: ${t.name}, round ${round + 1}/${ROUNDS} (${s.connections} connections, ${WARMUP_SECONDS}s warm-up + ${seconds}s)`);
          (rounds[t.name] ??= []).push(await measure(t, { ...s, duration: seconds }, ctx));
        }
      }
      const m: Partial<Record<Target['name'], Measurement>> = {};
      for (const [name, list] of Object.entries(rounds) as [Target['name'], Measurement[]][]) m[name] = combine(list);
      results.push({
        scenario: s.name,
        method: s.method,
        path: s.path(ctx),
        connections: s.connections,
        duration: s.duration,
        hostflow: m.hostflow ?? EMPTY,
        bare: m.bare ?? EMPTY,
        ratio: m.hostflow && m.bare ? m.hostflow.rps / m.bare.rps : 0,
        cpuRatio: m.hostflow?.cpuUsPerRequest && m.bare?.cpuUsPerRequest ? m.bare.cpuUsPerRequest / m.hostflow.cpuUsPerRequest : undefined,
      });
    }

    const meta = {
      ...machineMeta(),
      seededCustomers: customerIds.length,
      warmupSeconds: WARMUP_SECONDS,
      rounds: ROUNDS,
      dbPoolMax: config.DB_POOL_MAX,
      postgres: embedded ? 'embedded' : 'TEST_DATABASE_URL',
    };
    process.stdout.write(
      `\nhostflow vs bare Express 5 + pg (same SQL), ${meta.seededCustomers} customers\n` +
        `node ${meta.node}, ${meta.cpus} CPUs (${meta.cpuModel}), ${meta.date}\n\n` +
        `${table(results)}\n\nratio = hostflow req/s / bare req/s; latencies from autocannon (ms); CPU us/req = the server process's\n` +
        `user + system CPU over the measured seconds / requests answered; CPU ratio = bare's / hostflow's.\n`,
    );
    if (process.env.BENCH_ONLY || process.env.BENCH_TARGET) return;
    const out = path.join(__dirname, 'results.json');
    fs.writeFileSync(out, `${JSON.stringify({ meta, results }, null, 2)}\n`);
    log(`wrote ${path.relative(ROOT, out)}`);
  } finally {
    await runCleanup(cleanup);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`\nbench failed: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  });
}
