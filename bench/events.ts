/**
 * `npm run bench:events`: what the event log and its webhooks cost and deliver, in one run.
 *
 * 1. The extra latency of writing events. Two stacks side by side, each with its own database
 *    (created and migrated the same way), HTTP server, worker (on task queues of its own) and
 *    relays, all in this process, on one PostgreSQL and one Temporal dev server:
 *    - `events`: as shipped;
 *    - `baseline`: the same code, in a database where a `BEFORE INSERT ON events FOR EACH ROW`
 *      trigger returns NULL. Each event's INSERT is still built and sent (the payload
 *      serialized, the round trip, its parse, plan and the row trigger's call); the row, its
 *      indexes, its WAL and the relay passes that dispatch it are gone (the relay still polls,
 *      and finds nothing). No production switch is involved;
 *    - `events, webhook relay stopped`: the events stack without its webhook relay for the
 *      round (its other relays run), to tell the writes from the relay passes they wake.
 *    autocannon, CONNECTIONS connections, ROUNDS rounds of SECONDS after a warm-up, the
 *    variants' order reversed every other round: `POST /register` for an existing user with a
 *    site, and `POST /customers` with `user_id` (no password to hash: scrypt's 100+ ms would
 *    hide a sub-millisecond write in its noise; the events are the same). What the baseline
 *    keeps is measured apart: one event INSERT in a transaction, on each database (rolled back).
 *    Each `/register` leaves its membership's lifecycle start in the outbox for the start relay
 *    (5 s after the commit: the registration's activity has no fast path), and starting it is
 *    work for the shared Temporal dev server and worker: after each /register round both stacks'
 *    outboxes are drained (and the last lifecycles' first tasks run) before anything else is
 *    measured, so no round pays for the starts another one left behind.
 * 2. and 3. Delivery. A node:http receiver on 127.0.0.1 answering 204 and a webhook with event
 *    `*` (WEBHOOK_ALLOWED_HOSTS allows the address); then `POST /customers` on the events stack,
 *    first at PACED_RATE a second for PACED_SECONDS, then as fast as CONNECTIONS connections go
 *    for BURST_SECONDS: events written and delivered per second, and the time from each event's
 *    `date_created` (the body's `timestamp`: its transaction's start) to its arrival at the
 *    receiver, over all deliveries, with the p50 of each stage read from the delivery rows.
 * Prints the tables and writes bench/events-results.json. BENCH_SECONDS (8), BENCH_ROUNDS (2),
 * BENCH_CALLERS (8), BENCH_PACED_RATE (10) and BENCH_BURST_SECONDS (5) change the run.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import pg from 'pg';
import type { Config } from '../src/config';
import { createDb, type Db } from '../src/db/knex';
import { migrateLatest } from '../src/db/migrate';
import { recordEvent } from '../src/events/record';
import { freePort } from '../src/infra/temporal-server';
import { setLogLevel } from '../src/logger';
import { prepareDatabase, startHttp } from '../src/runtime';
import { connectTemporal, type TemporalHandle } from '../src/temporal/client';
import { taskQueues } from '../src/temporal/task-queues';
import { dispatchEvents } from '../src/webhooks/dispatch';
import { startRelays, startWorker } from '../src/worker-runtime';
import { benchLog, hostflowTarget, machineMeta, runCleanup, startBenchEnv, textTable, type Log, type Step } from './run';

const CONNECTIONS = Number(process.env.BENCH_CALLERS ?? 8);
/** The settings of these names that the environment gives. */
const passThrough = (names: string[]): Record<string, string> => Object.fromEntries(names.filter((n) => process.env[n] !== undefined).map((n) => [n, process.env[n]!]));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 2));
const WARMUP_SECONDS = 2;
const BURST_SECONDS = Number(process.env.BENCH_BURST_SECONDS ?? 5);
/** The steady run before the burst: creates a second, and for how long. */
const PACED_RATE = Number(process.env.BENCH_PACED_RATE ?? 10);
const PACED_SECONDS = 10;
/** How long the deliveries of the burst may take to arrive before the bench gives up. */
const DELIVERY_WAIT_MS = 180_000;
/** The INSERT alone: batches of ROUND_TRIPS, alternating the databases, the median batch kept. */
const ROUND_TRIPS = 200;
const ROUND_TRIP_BATCHES = 5;
const PLAN_SLUG = 'bench-plan';
/** Users without a customer, per stack: more than the creates can use (a quiet machine creates about 800 a second: 20,000 a round of 2). */
const SEEDED_USERS = 20_000 * Math.max(2, ROUNDS);
/** Lower-case alphanumeric (site_url's rule), unique per run. */
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;

type StackName = 'events' | 'baseline';
type Variant = StackName | 'events, webhook relay stopped';

interface Stack {
  name: StackName;
  config: Config;
  db: Db;
  temporal: TemporalHandle;
  /** Stops and starts again the stack's relays (the events stack's variant without them). */
  relays: { stop(): Promise<void> };
  root: string;
  headers: Record<string, string>;
  userIds: number[];
  nextUser: number;
}

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** Answers other than 2xx, errors and timeouts. */
  failed: number;
}

interface Overhead {
  scenario: string;
  eventsPerRequest: number;
  events: Measurement;
  baseline: Measurement;
  eventsWebhookRelayStopped: Measurement;
  p50OverheadPercent: number;
  p99OverheadPercent: number;
  rateCostPercent: number;
  webhookRelayStoppedP50OverheadPercent: number;
  webhookRelayStoppedRateCostPercent: number;
  rounds: Record<Variant, Measurement[]>;
  /** Per round (/register only): the lifecycle starts the stacks' outboxes held after it, and how long they took to drain. */
  startDrains: StartDrain[];
}

interface StartDrain {
  variant: Variant;
  round: number;
  stack: StackName;
  pending: number;
  seconds: number;
}

interface DeliveryRun {
  label: string;
  targetRate: number | null;
  seconds: number;
  creates: number;
  createP50: number;
  createP99: number;
  eventsWritten: number;
  eventsWrittenPerSecond: number;
  delivered: number;
  /** Deliveries that arrived again (the same webhook-id). */
  duplicates: number;
  attempts: number;
  deliveredPerSecondDuringLoad: number;
  deliveredPerSecond: number;
  lastDeliveryAfterLoadMs: number;
  changeToDeliveryP50: number;
  changeToDeliveryP99: number;
  changeToDeliveryMax: number;
  stageP50Ms: { dispatch: number; signal: number; send: number };
}

/** The drains of the rounds that left starts: how many, and how long they took. */
function drainSummary(drains: StartDrain[]): string {
  const left = drains.filter((d) => d.pending > 0);
  if (!left.length) return 'none';
  return left.map((d) => `${d.stack} after ${d.variant} round ${d.round}: ${d.pending} in ${d.seconds}s`).join('; ');
}

const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN);
const r2 = (n: number) => Math.round(n * 100) / 100;

let counter = 0;
function takeUser(stack: Stack): number {
  const id = stack.userIds[stack.nextUser++];
  if (id === undefined) throw new Error(`${stack.name}: out of seeded users`);
  return id;
}
const bodies = {
  register: (stack: Stack) => ({
    customer: { user_id: takeUser(stack) },
    products: [PLAN_SLUG],
    site: { site_url: `shop${RUN_TAG}x${++counter}`, site_title: 'Bench Shop' },
    payment: { status: 'completed' },
    membership: { status: 'active' },
  }),
  customer: (stack: Stack) => ({ user_id: takeUser(stack) }),
};
type Scenario = keyof typeof bodies;
const PATHS: Record<Scenario, string> = { register: '/register', customer: '/customers' };
const LABELS: Record<Scenario, string> = { register: 'POST /register, existing user + site', customer: 'POST /customers, user_id' };

/** `rate`: requests a second over all connections (default: as fast as they answer). */
async function cannon(stack: Stack, scenario: Scenario, seconds: number, rate?: number): Promise<Measurement> {
  const result = await autocannon({
    url: `${stack.root}${PATHS[scenario]}`,
    method: 'POST',
    headers: { ...stack.headers, 'content-type': 'application/json' },
    connections: CONNECTIONS,
    duration: seconds,
    timeout: 60,
    ...(rate ? { overallRate: rate } : {}),
    requests: [{ setupRequest: (req) => ({ ...req, body: JSON.stringify(bodies[scenario](stack)) }) }],
  });
  return {
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    failed: result.non2xx + result.errors + result.timeouts,
  };
}

/** One stack on its migrated database: a plan, SEEDED_USERS users without a customer, its worker, relays and HTTP server. */
async function startStack(name: StackName, config: Config, db: Db, temporal: TemporalHandle, cleanup: Step[], log: Log): Promise<Stack> {
  const settings = await prepareDatabase(db, config);
  await db('products').insert({ slug: PLAN_SLUG, name: 'Bench Plan', type: 'plan', amount: '29.99', setup_fee: '0', duration: 1, duration_unit: 'month' });
  const { rows } = await db.raw(
    `INSERT INTO users (username, email, password_hash, display_name)
     SELECT 'seed' || g, 'seed' || g || '@example.com', 'scrypt$seeded', 'Seeded' FROM generate_series(1, ?::int) g RETURNING id`,
    [SEEDED_USERS],
  );
  await db.raw('VACUUM ANALYZE users');
  const worker = await startWorker({ address: config.TEMPORAL_ADDRESS!, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, db, config });
  cleanup.push([`${name} worker`, () => worker.shutdown()]);
  const stack: Stack = { name, config, db, temporal, relays: startRelays(db, temporal, config), ...hostflowTarget(config), userIds: [], nextUser: 0 };
  cleanup.push([`${name} relays`, () => stack.relays.stop()]);
  const server = await startHttp(config, db, settings, temporal);
  cleanup.push([`${name} http`, () => server.close()]);
  log(`${name} stack: port ${config.PORT}, task queue ${config.TEMPORAL_TASK_QUEUE}`);
  stack.userIds = rows.map((r: { id: string }) => Number(r.id));
  return stack;
}

/** Waits for the workflows of the last registrations (one per connection) of a stack: they finish roughly in the order they started. */
async function drainRegistrations(stack: Stack): Promise<void> {
  const ids: string[] = await stack.db('registrations').orderBy('id', 'desc').limit(CONNECTIONS).pluck('workflow_id');
  await Promise.all(ids.map((id) => stack.temporal.client.workflow.getHandle(id).result().catch(() => undefined)));
}

/** How long drainStarts waits for a stack's outbox before the bench gives up. */
const START_DRAIN_WAIT_MS = 300_000;

/**
 * Waits until the stack's start outbox is empty (the start relay beside its worker started
 * every entry), then for the first tasks of the last lifecycles started (no workflow task or
 * activity pending): the work /register leaves behind. Answers how many entries were waiting.
 */
async function drainStarts(stack: Stack): Promise<number> {
  const waiting = async () => Number((await stack.db('workflow_starts').whereNull('started_at').count('* as n').first())?.n ?? 0);
  const until = Date.now() + START_DRAIN_WAIT_MS;
  const pending = await waiting();
  for (let n = pending; n > 0; n = await waiting()) {
    if (Date.now() > until) throw new Error(`${stack.name}: ${n} workflow starts still waiting after ${START_DRAIN_WAIT_MS / 1000}s`);
    await new Promise((r) => setTimeout(r, 200));
  }
  if (pending === 0) return 0;
  const ids: string[] = await stack.db('workflow_starts').whereNotNull('started_at').orderBy('started_at', 'desc').limit(CONNECTIONS).pluck('workflow_id');
  for (const id of ids) {
    for (;;) {
      const { raw } = await stack.temporal.client.workflow.getHandle(id).describe();
      if (!raw.pendingWorkflowTask && !raw.pendingActivities?.length) break;
      if (Date.now() > until) throw new Error(`${stack.name}: workflow ${id} still busy after ${START_DRAIN_WAIT_MS / 1000}s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return pending;
}

/** ms per event INSERT (recordEvent, a customer's payload) in one transaction, rolled back. */
async function roundTrip(db: Db, payload: Record<string, unknown>): Promise<number> {
  const rollback = new Error('rollback');
  let ms = 0;
  await db
    .transaction(async (trx) => {
      for (let i = 0; i < 50; i++) await recordEvent(trx, { slug: 'customer_created', objectId: i, payload });
      const t0 = performance.now();
      for (let i = 0; i < ROUND_TRIPS; i++) await recordEvent(trx, { slug: 'customer_created', objectId: i, payload });
      ms = (performance.now() - t0) / ROUND_TRIPS;
      throw rollback;
    })
    .catch((err) => {
      if (err !== rollback) throw err;
    });
  return ms;
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const loadAverageBefore = os.loadavg();
  const cleanup: Step[] = [];
  const log = benchLog();
  try {
    const env = await startBenchEnv({
      cleanup,
      log,
      tag: `events_${RUN_TAG}`,
      pgDir: 'bench-events-pg',
      temporalLog: 'temporal-bench-events.log',
      temporalDbFile: 'bench-events-temporal.sqlite',
      // No worker metrics port: another bench or test may hold the default one.
      // WEBHOOK_DELIVERY_SHARDS and WORKER_MAX_BULK_ACTIVITIES from the environment, to compare settings.
      env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', TEMPORAL_DEPLOYMENT_NAME: 'hostflow-bench-events', WORKER_METRICS_PORT: '0', ...passThrough(['WEBHOOK_DELIVERY_SHARDS', 'WORKER_MAX_BULK_ACTIVITIES']) },
    });

    // The baseline's database: created and migrated as startBenchEnv made the events one.
    const baseName = `hf_bench_events_${RUN_TAG}_base`;
    const admin = new pg.Client({ connectionString: env.config.DATABASE_URL });
    await admin.connect();
    await admin.query(`create database ${baseName}`);
    await admin.end();
    if (!env.embedded) {
      // After the baseline's pool is closed (pushed before it), before the events database is
      // dropped (its connection string is the one used here).
      cleanup.push([
        'drop baseline database',
        async () => {
          const a = new pg.Client({ connectionString: env.config.DATABASE_URL });
          await a.connect();
          await a.query(`drop database if exists ${baseName} with (force)`);
          await a.end();
        },
      ]);
    }
    const baseUrl = new URL(env.config.DATABASE_URL!);
    baseUrl.pathname = `/${baseName}`;
    const baseQueue = `${env.config.TEMPORAL_TASK_QUEUE}-baseline`;
    const baseConfig: Config = {
      ...env.config,
      DATABASE_URL: baseUrl.toString(),
      PORT: await freePort(),
      TEMPORAL_TASK_QUEUE: baseQueue,
      TEMPORAL_BULK_TASK_QUEUE: `${baseQueue}-bulk`,
      TEMPORAL_DEPLOYMENT_NAME: 'hostflow-bench-events-baseline',
    };
    const baseDb = createDb(baseConfig.DATABASE_URL!, baseConfig.DB_POOL_MAX);
    cleanup.push(['baseline knex', () => baseDb.destroy()]);
    await migrateLatest(baseDb);
    // The event writes removed, their statements kept: the row is skipped (so are its indexes
    // and WAL), and the relay's polls find nothing to dispatch.
    await baseDb.raw(`CREATE FUNCTION bench_events_skip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`);
    await baseDb.raw('CREATE TRIGGER bench_events_skip BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION bench_events_skip()');
    const queues = taskQueues(baseConfig);
    const baseTemporal = await connectTemporal(baseConfig.TEMPORAL_ADDRESS!, baseConfig.TEMPORAL_NAMESPACE, queues.interactive, queues.bulk);
    cleanup.push(['baseline temporal connection', () => baseTemporal.connection.close()]);

    const events = await startStack('events', env.config, env.db, env.temporal, cleanup, log);
    const baseline = await startStack('baseline', baseConfig, baseDb, baseTemporal, cleanup, log);
    const stacks = { events, baseline };

    // Each stack answers, and only the events one keeps its events.
    const probes: Record<string, number> = {};
    for (const stack of [events, baseline]) {
      for (const scenario of ['register', 'customer'] as Scenario[]) {
        const before = Number((await stack.db('events').max('id as max').first())?.max ?? 0);
        const res = await fetch(`${stack.root}${PATHS[scenario]}`, { method: 'POST', headers: { ...stack.headers, 'content-type': 'application/json' }, body: JSON.stringify(bodies[scenario](stack)) });
        if (!res.ok) throw new Error(`${stack.name}: probe POST ${PATHS[scenario]} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
        const written = Number((await stack.db('events').where('id', '>', before).count('* as n').first())?.n ?? 0);
        if (stack.name === 'events') probes[scenario] = written;
        else if (written !== 0) throw new Error(`baseline: ${PATHS[scenario]} kept ${written} events`);
      }
      await drainRegistrations(stack);
      await drainStarts(stack);
    }
    log(`events per request: /register ${probes.register}, /customers ${probes.customer}`);

    // 1. Latency with and without the event writes; and without the webhook relay, to tell the
    // writes from the relay passes that dispatch them.
    const variants: { name: Variant; stack: Stack; before?: () => Promise<void>; after?: () => Promise<void> }[] = [
      { name: 'events', stack: events },
      { name: 'baseline', stack: baseline },
      {
        name: 'events, webhook relay stopped',
        stack: events,
        before: async () => {
          await events.relays.stop();
          events.relays = startRelays(events.db, events.temporal, events.config, { webhooks: false });
        },
        after: async () => {
          await events.relays.stop();
          events.relays = startRelays(events.db, events.temporal, events.config);
          await dispatchEvents(events.db);
        },
      },
    ];
    const overhead: Overhead[] = [];
    for (const scenario of ['register', 'customer'] as Scenario[]) {
      const rounds: Record<Variant, Measurement[]> = { events: [], baseline: [], 'events, webhook relay stopped': [] };
      const startDrains: StartDrain[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        for (const v of round % 2 === 0 ? variants : [...variants].reverse()) {
          log(`${LABELS[scenario]}: ${v.name}, round ${round + 1}/${ROUNDS} (${CONNECTIONS} connections, ${WARMUP_SECONDS}s warm-up + ${SECONDS}s)`);
          await v.before?.();
          await cannon(v.stack, scenario, WARMUP_SECONDS);
          if (scenario === 'register') await drainRegistrations(v.stack);
          const m = await cannon(v.stack, scenario, SECONDS);
          if (m.failed) throw new Error(`${v.name} ${LABELS[scenario]}: ${m.failed} failed of ${m.requests}`);
          // The work behind /register's answers ends before the next variant is measured: its
          // workflows, then the lifecycle starts it left in the outboxes.
          if (scenario === 'register') await drainRegistrations(v.stack);
          await v.after?.();
          log(`  p50 ${m.p50} ms, p99 ${m.p99} ms, ${m.rps.toFixed(1)}/s`);
          if (scenario === 'register') {
            for (const stack of [events, baseline]) {
              const t0 = Date.now();
              const pending = await drainStarts(stack);
              startDrains.push({ variant: v.name, round: round + 1, stack: stack.name, pending, seconds: r2((Date.now() - t0) / 1000) });
              if (pending) log(`  ${stack.name}: ${pending} lifecycle starts waiting in the outbox, drained in ${r2((Date.now() - t0) / 1000)}s`);
            }
          }
          rounds[v.name].push(m);
        }
      }
      // Rounds of equal length: mean rate and latencies, summed counts (as bench/run.ts).
      const summary = (list: Measurement[]): Measurement => {
        const mean = (f: (m: Measurement) => number) => r2(list.reduce((a, m) => a + f(m), 0) / list.length);
        return { rps: mean((m) => m.rps), p50: mean((m) => m.p50), p99: mean((m) => m.p99), requests: list.reduce((a, m) => a + m.requests, 0), failed: 0 };
      };
      const [e, b, n] = [summary(rounds.events), summary(rounds.baseline), summary(rounds['events, webhook relay stopped'])];
      const percent = (x: number, y: number) => r2((x / y - 1) * 100);
      overhead.push({
        scenario: LABELS[scenario],
        eventsPerRequest: probes[scenario],
        events: e,
        baseline: b,
        eventsWebhookRelayStopped: n,
        p50OverheadPercent: percent(e.p50, b.p50),
        p99OverheadPercent: percent(e.p99, b.p99),
        rateCostPercent: r2((1 - e.rps / b.rps) * 100),
        webhookRelayStoppedP50OverheadPercent: percent(n.p50, b.p50),
        webhookRelayStoppedRateCostPercent: r2((1 - n.rps / b.rps) * 100),
        rounds,
        startDrains,
      });
    }

    // What the baseline keeps, and a whole event write, each alone (no other requests).
    const payload = (await events.db('customers').orderBy('id', 'desc').first()) as Record<string, unknown>;
    const batches: Record<StackName, number[]> = { events: [], baseline: [] };
    for (let i = 0; i < ROUND_TRIP_BATCHES; i++) {
      for (const stack of i % 2 === 0 ? [events, baseline] : [baseline, events]) batches[stack.name].push(await roundTrip(stack.db, payload));
    }
    const median = (list: number[]) => r2(pct([...list].sort((a, b) => a - b), 50));
    const kept = { baselineInsertMs: median(batches.baseline), eventInsertMs: median(batches.events) };
    log(`one event INSERT in a transaction: ${kept.eventInsertMs} ms; the baseline's (row skipped): ${kept.baselineInsertMs} ms`);

    // 2. and 3. Deliveries to a healthy receiver on loopback: creates at a steady rate, then a burst.
    const arrivals = new Map<string, { eventId: number; at: number; lagMs: number }>();
    let duplicates = 0;
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const at = Date.now();
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { type: string; timestamp: string; event_id?: number };
        const id = String(req.headers['webhook-id']);
        if (body.type !== 'ping') {
          if (arrivals.has(id)) duplicates++;
          else arrivals.set(id, { eventId: Number(body.event_id), at, lagMs: at - Date.parse(body.timestamp) });
        }
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
    cleanup.push(['receiver', () => new Promise((resolve) => receiver.close(resolve))]);
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    // Part 1's events go to nobody: the cursor passes them before the webhook exists.
    await dispatchEvents(events.db);
    const hook = await fetch(`${events.root}/webhooks`, {
      method: 'POST',
      headers: { ...events.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench receiver', webhook_url: receiverUrl, event: '*' }),
    });
    if (!hook.ok) throw new Error(`POST /webhooks answered ${hook.status}: ${(await hook.text()).slice(0, 300)}`);
    const webhookId = Number(((await hook.json()) as { id: number }).id);

    const deliveryRun = async (label: string, seconds: number, rate?: number): Promise<DeliveryRun> => {
      const firstEvent = Number((await events.db('events').max('id as max').first())?.max ?? 0) + 1;
      const duplicatesBefore = duplicates;
      log(`${label}: POST /customers, ${CONNECTIONS} connections${rate ? `, ${rate}/s` : ''}, ${seconds}s, delivered to ${receiverUrl}`);
      const start = Date.now();
      const load = await cannon(events, 'customer', seconds, rate);
      const end = Date.now();
      if (load.failed) throw new Error(`${label}: ${load.failed} failed of ${load.requests}`);
      // Counted again while waiting: autocannon stops with requests in flight, which still commit.
      const writtenNow = async () => Number((await events.db('events').where('id', '>=', firstEvent).count('* as n').first())?.n ?? 0);
      const ours = () => [...arrivals.values()].filter((a) => a.eventId >= firstEvent);
      const waitUntil = Date.now() + DELIVERY_WAIT_MS;
      let written = await writtenNow();
      while (ours().length < written && Date.now() < waitUntil) {
        await new Promise((r) => setTimeout(r, 200));
        written = await writtenNow();
      }
      const delivered = ours().sort((a, b) => a.at - b.at);
      if (delivered.length < written) log(`only ${delivered.length} of ${written} events delivered after ${DELIVERY_WAIT_MS / 1000}s`);
      const lastAt = delivered.length ? delivered[delivered.length - 1].at : NaN;
      const lags = delivered.map((a) => a.lagMs).sort((a, b) => a - b);
      // Where the time goes, from the rows: the event's transaction start to its delivery row
      // (the relay's dispatch), to its signal to the delivery workflow, to the recorded success.
      const stages = (
        await events.db.raw(
          `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.date_created - e.date_created)) * 1000 AS dispatch_p50,
                  percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.signalled_at - d.date_created)) * 1000 AS signal_p50,
                  percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.date_delivered - d.signalled_at)) * 1000 AS send_p50
             FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
            WHERE d.webhook_id = ? AND d.event_id >= ?`,
          [webhookId, firstEvent],
        )
      ).rows[0];
      const attempts = await events.db('webhook_delivery_attempts as a').join('webhook_deliveries as d', 'd.id', 'a.delivery_id').where('d.webhook_id', webhookId).where('d.event_id', '>=', firstEvent).count('* as n').first();
      const secs = (end - start) / 1000;
      const run: DeliveryRun = {
        label,
        targetRate: rate ?? null,
        seconds: r2(secs),
        creates: load.requests,
        createP50: load.p50,
        createP99: load.p99,
        eventsWritten: written,
        eventsWrittenPerSecond: r2(written / secs),
        delivered: delivered.length,
        duplicates: duplicates - duplicatesBefore,
        attempts: Number(attempts?.n ?? 0),
        deliveredPerSecondDuringLoad: r2(delivered.filter((a) => a.at <= end).length / secs),
        // From the start to the last arrival: the drain after the load included.
        deliveredPerSecond: r2(delivered.length / ((lastAt - start) / 1000)),
        lastDeliveryAfterLoadMs: lastAt - end,
        changeToDeliveryP50: pct(lags, 50),
        changeToDeliveryP99: pct(lags, 99),
        changeToDeliveryMax: lags[lags.length - 1],
        stageP50Ms: { dispatch: r2(Number(stages.dispatch_p50)), signal: r2(Number(stages.signal_p50)), send: r2(Number(stages.send_p50)) },
      };
      log(`  ${run.eventsWrittenPerSecond} events/s written, ${run.deliveredPerSecond} delivered/s, change -> delivery p50 ${run.changeToDeliveryP50} ms, p99 ${run.changeToDeliveryP99} ms`);
      return run;
    };
    const delivery = [await deliveryRun('steady', PACED_SECONDS, PACED_RATE), await deliveryRun('burst', BURST_SECONDS)];

    const meta = {
      ...machineMeta(),
      connections: CONNECTIONS,
      rounds: ROUNDS,
      secondsPerRound: SECONDS,
      pacedRate: PACED_RATE,
      pacedSeconds: PACED_SECONDS,
      burstSeconds: BURST_SECONDS,
      warmupSeconds: WARMUP_SECONDS,
      dbPoolMax: env.config.DB_POOL_MAX,
      webhookDeliveryShards: env.config.WEBHOOK_DELIVERY_SHARDS,
      workerMaxBulkActivities: env.config.WORKER_MAX_BULK_ACTIVITIES,
      loadAverageBefore,
      loadAverage: os.loadavg(),
      postgres: env.embedded ? 'embedded' : 'TEST_DATABASE_URL',
      temporal: process.env.TEMPORAL_ADDRESS ? 'TEMPORAL_ADDRESS' : 'dev server, SQLite file',
    };
    const rows = overhead.flatMap((o) => [
      [o.scenario, 'events', String(o.eventsPerRequest), String(o.events.p50), String(o.events.p99), o.events.rps.toFixed(1), `${o.p50OverheadPercent}%`, `${o.p99OverheadPercent}%`, `${o.rateCostPercent}%`],
      [o.scenario, 'baseline', '0', String(o.baseline.p50), String(o.baseline.p99), o.baseline.rps.toFixed(1), '', '', ''],
      [
        o.scenario,
        'events, webhook relay stopped',
        String(o.eventsPerRequest),
        String(o.eventsWebhookRelayStopped.p50),
        String(o.eventsWebhookRelayStopped.p99),
        o.eventsWebhookRelayStopped.rps.toFixed(1),
        `${o.webhookRelayStoppedP50OverheadPercent}%`,
        '',
        `${o.webhookRelayStoppedRateCostPercent}%`,
      ],
    ]);
    const deliveryRows = delivery.map((d) => [
      d.targetRate ? `steady ${d.targetRate}/s` : 'burst',
      String(d.seconds),
      String(d.eventsWritten),
      String(d.eventsWrittenPerSecond),
      String(d.delivered),
      String(d.deliveredPerSecondDuringLoad),
      String(d.deliveredPerSecond),
      String(d.lastDeliveryAfterLoadMs),
      String(d.changeToDeliveryP50),
      String(d.changeToDeliveryP99),
      `${d.stageP50Ms.dispatch} / ${d.stageP50Ms.signal} / ${d.stageP50Ms.send}`,
    ]);
    process.stdout.write(
      `\nWriting events: ${CONNECTIONS} connections, ${ROUNDS} alternating rounds of ${SECONDS}s; + is against the baseline (rows skipped, statements kept)\n` +
        `node ${meta.node}, ${meta.cpus} CPUs (${meta.cpuModel}), ${meta.date}, load average before ${loadAverageBefore.map((l) => l.toFixed(2)).join(' ')}, at the end ${meta.loadAverage.map((l) => l.toFixed(2)).join(' ')}\n\n` +
        `${textTable(['scenario', 'variant', 'events/req', 'p50 ms', 'p99 ms', 'req/s', 'p50 +', 'p99 +', 'rate -'], rows)}\n\n` +
        `one event INSERT in a transaction, alone: ${kept.eventInsertMs} ms; the baseline's (row skipped): ${kept.baselineInsertMs} ms\n` +
        `lifecycle starts each /register round left in the outboxes, drained before the next round: ${drainSummary(overhead.flatMap((o) => o.startDrains))}\n\n` +
        `Delivery to a receiver on loopback (one webhook, "*"), POST /customers (one event each):\n` +
        `${textTable(['load', 's', 'events', 'written/s', 'delivered', 'delivered/s (load)', 'delivered/s (to last)', 'last after load ms', 'change->delivery p50 ms', 'p99 ms', 'p50 dispatch/signal/send ms'], deliveryRows)}\n\n` +
        `Goals: overhead under 10% (${overhead.map((o) => `${o.scenario}: p50 ${o.p50OverheadPercent >= 0 ? '+' : ''}${o.p50OverheadPercent}%`).join('; ')}); ` +
        `change -> delivery p50 under 1 s (${delivery.map((d) => `${d.label}: ${d.changeToDeliveryP50} ms`).join('; ')}).\n`,
    );
    const out = path.join(__dirname, 'events-results.json');
    fs.writeFileSync(out, `${JSON.stringify({ meta, overhead, kept, delivery }, null, 2)}\n`);
    log(`wrote ${path.relative(path.resolve(__dirname, '..'), out)}`);
  } finally {
    await runCleanup(cleanup);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`\nbench:events failed: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  });
}
