/**
 * `npm run bench:billing`: renewals at scale (issue 18, README "Benchmarks", Renewals).
 *
 * BENCH_BILLING_MEMBERSHIPS (100,000) active monthly memberships, written through the
 * memberships service with the configured BILLING_LIFECYCLE_HORIZON_HOURS (24): the lifecycle
 * rule puts the start of each one due within the horizon in the outbox, and the relay beside the
 * worker starts them, as in production; the others wait for the sweep. Most expire 10 to 40 days
 * out (their starts deferred: one sweep pass over them is timed; 1,000 are due in 20 hours,
 * within the horizon: their starts time the relay); BENCH_BILLING_DUE (10,000) of them fall due
 * within BENCH_BILLING_WINDOW_SECONDS (3,600: the same hour), spread evenly, starting
 * BENCH_BILLING_LEAD_SECONDS (60) after the last of them was written and started (estimated). Their gateway is `http`: a
 * node:http fake on 127.0.0.1 that charges at once (idempotent by key), so every renewal runs to
 * its end: the renewal payment, the charge, the completion moving the period on, continue-as-new.
 *
 * Measured: the renewal lag (the renewal payment's date_created minus its due date) p50/p99/max
 * and how many were created within 60 s of their due time; the time to completion; the Temporal
 * actions per renewal (from the histories of sampled renewed runs: the run's start, activities
 * scheduled, timers started, signals, the continue-as-new); the process's RSS (the worker, the
 * relays and this driver share it) sampled every second. One Temporal dev server and one
 * PostgreSQL (TEST_DATABASE_URL, or embedded), one worker. Prints a table and writes
 * bench/billing-results.json.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { eachLimited } from '../src/infra/each-limited';
import { lifecycleHorizonMs, MembershipLifecycles } from '../src/memberships/lifecycle';
import { createMembershipService } from '../src/memberships/service';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { startRelays, startWorker } from '../src/worker-runtime';
import { benchLog, machineMeta, runCleanup, startBenchEnv, textTable, type Step } from './run';

const TOTAL = Number(process.env.BENCH_BILLING_MEMBERSHIPS ?? 100_000);
const DUE = Number(process.env.BENCH_BILLING_DUE ?? 10_000);
const WINDOW_S = Number(process.env.BENCH_BILLING_WINDOW_SECONDS ?? 3600);
const LEAD_S = Number(process.env.BENCH_BILLING_LEAD_SECONDS ?? 60);
const WRITERS = 8;
const CUSTOMERS = 100;
const SAMPLE = 20;
/** Memberships of the later ones due within the horizon (20 hours out), whose starts time the relay. */
const CALIBRATE = 1000;
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;
const DAY = 86_400_000;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** The `http` gateway's protocol, answering succeeded at once; one charge per idempotency key. */
async function fakeGateway(): Promise<{ url: string; charges: () => number; close: () => Promise<void> }> {
  const answers = new Map<string, string>();
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const key = String(req.headers['idempotency-key']);
      let body = answers.get(key);
      if (!body) answers.set(key, (body = JSON.stringify({ id: `ch_${++n}`, status: 'succeeded' })));
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, charges: () => answers.size, close: () => new Promise<void>((r) => server.close(() => r())) };
}

async function main(): Promise<void> {
  const cleanup: Step[] = [];
  const log = benchLog();
  try {
    const gateway = await fakeGateway();
    cleanup.push(['fake gateway', () => gateway.close()]);
    const env = await startBenchEnv({ cleanup, log, tag: RUN_TAG, pgDir: 'bench-billing-pg', temporalLog: 'temporal-bench-billing.log', env: { BILLING_HTTP_GATEWAY_URL: gateway.url } });
    const { config, db, temporal } = env;
    let peakRss = 0;
    const rss = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 1000);
    cleanup.push(['rss sampler', async () => clearInterval(rss)]);
    const worker = await startWorker({ address: config.TEMPORAL_ADDRESS!, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, db, config });
    cleanup.push(['temporal worker', () => worker.shutdown()]);
    const relays = startRelays(db, temporal, config);
    cleanup.push(['relays', () => relays.stop()]);

    const [plan] = await db('products').insert({ slug: 'bench-monthly', name: 'Monthly', type: 'plan', amount: '10', duration: 1, duration_unit: 'month', recurring: true }).returning('id');
    const customers: number[] = [];
    for (let i = 0; i < CUSTOMERS; i++) {
      const [u] = await db('users').insert({ username: `bill${RUN_TAG}${i}`, email: `bill${RUN_TAG}${i}@example.com`, password_hash: '!' }).returning('id');
      const [c] = await db('customers').insert({ user_id: u.id }).returning('id');
      customers.push(Number(c.id));
    }
    // Written as the API writes them (the lifecycle rule and its outbox start in each write's transaction); no signal (no Temporal gateway here: the relay starts them).
    const lifecycles = new MembershipLifecycles(new WorkflowIds(db, config.WORKFLOW_ID_PREFIX), null, undefined, lifecycleHorizonMs(config));
    const memberships = createMembershipService(db, lifecycles);
    const write = (i: number, expiration: Date) =>
      memberships.create({
        customer_id: customers[i % CUSTOMERS],
        plan_id: Number(plan.id),
        status: 'active',
        amount: '10',
        currency: 'USD',
        recurring: true,
        auto_renew: true,
        duration: 1,
        duration_unit: 'month',
        gateway: 'http',
        date_expiration: expiration.toISOString(),
      });
    const later = TOTAL - DUE;
    const startsLeft = async () => Number((await db('workflow_starts').whereNull('started_at').count({ n: '*' }))[0].n);
    const drained = async () => {
      while ((await startsLeft()) > 0) await new Promise((r) => setTimeout(r, 500));
    };
    // 1. The memberships due later. First CALIBRATE of them due in 20 hours (within the horizon,
    // after the bench), alone: each write puts its start in the outbox, and the time until the
    // relay has started them all gives its start rate (the writes take a small part of it).
    // Then the rest, due 10 to 40 days out: written; their lifecycles wait for the horizon (the sweep).
    const calibrate = Math.min(CALIBRATE, later);
    let t0 = Date.now();
    await eachLimited(
      Array.from({ length: calibrate }, (_, i) => i),
      WRITERS,
      async (i) => {
        await write(i, new Date(Date.now() + 20 * 3_600_000 + i * 1000));
      },
    );
    await drained();
    const startRate = calibrate / Math.max(0.001, (Date.now() - t0) / 1000);
    t0 = Date.now();
    await eachLimited(
      Array.from({ length: later - calibrate }, (_, i) => calibrate + i),
      WRITERS,
      async (i) => {
        await write(i, new Date(Date.now() + 10 * DAY + Math.floor((i / Math.max(1, later)) * 30 * DAY)));
      },
    );
    const writeSeconds = (Date.now() - t0) / 1000;
    const writeRate = (later - calibrate) / Math.max(0.001, writeSeconds);
    const deferred = Number((await db('memberships').whereNotNull('lifecycle_deferred_due').count({ n: '*' }))[0].n);
    const started = Number((await db('workflow_starts').where({ workflow_type: 'membershipLifecycle' }).count({ n: '*' }))[0].n);
    log(
      `${calibrate} memberships due in 20 hours (within the horizon) written and started at ${startRate.toFixed(1)} starts/s through the relay; ${later - calibrate} due later written in ${writeSeconds.toFixed(1)} s (${writeRate.toFixed(0)}/s): ${deferred} lifecycle starts deferred to the horizon, ${started} started`,
    );
    // One sweep pass with nothing within the horizon, over the deferred rows (the workers' sweep runs it every minute).
    const sweepMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      await lifecycles.startDeferred(db);
      sweepMs.push(performance.now() - t);
    }
    sweepMs.sort((a, b) => a - b);
    log(`a sweep pass over ${deferred} deferred starts, none due: median ${sweepMs[2].toFixed(1)} ms of 5`);
    // 2. The due ones, due within the horizon, so each write puts its lifecycle's start in the
    // outbox: their window starts LEAD_S after they are all written and started (estimated from
    // the rates above, with a margin), as the horizon's day of lead does in production, so the
    // lag measured is the renewal's, not the start's (reported: how many were started before
    // their due date, and the least lead).
    const firstDue = Date.now() + Math.ceil((DUE / Math.min(writeRate, startRate)) * 1.3 * 1000) + LEAD_S * 1000;
    const dueAt = (i: number) => new Date(firstDue + Math.floor((i / DUE) * WINDOW_S * 1000));
    t0 = Date.now();
    await eachLimited(
      Array.from({ length: DUE }, (_, i) => i),
      WRITERS,
      async (i) => {
        await write(later + i, dueAt(i));
      },
    );
    const dueWriteSeconds = (Date.now() - t0) / 1000;
    await drained();
    const dueStartSeconds = (Date.now() - t0) / 1000;
    log(`${DUE} memberships due from ${new Date(firstDue).toISOString()} over ${WINDOW_S} s written in ${dueWriteSeconds.toFixed(1)} s, their lifecycles started in ${dueStartSeconds.toFixed(1)} s (${(DUE / dueStartSeconds).toFixed(1)}/s through the relay)`);

    // Wait for the window to pass and every due renewal to complete (or 10 minutes more).
    const deadline = firstDue + WINDOW_S * 1000 + 600_000;
    const renewedCount = async () => Number((await db('payments').whereNotNull('renewal_period_start').where({ status: 'completed' }).count({ n: '*' }))[0].n);
    let last = -1;
    for (;;) {
      const done = await renewedCount();
      if (done !== last) {
        log(`${done} of ${DUE} renewals completed`);
        last = done;
      }
      if (done >= DUE || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 5000));
    }
    const rows: { lag: number; done: number }[] = (
      await db('payments').whereNotNull('renewal_period_start').select(db.raw('extract(epoch from (date_created - renewal_period_start)) * 1000 as lag'), db.raw('extract(epoch from (date_modified - renewal_period_start)) * 1000 as done'))
    ).map((r: { lag: string; done: string }) => ({ lag: Number(r.lag), done: Number(r.done) }));
    const lags = rows.map((r) => r.lag).sort((a, b) => a - b);
    const dones = rows.map((r) => r.done).sort((a, b) => a - b);
    const within60 = lags.filter((l) => l <= 60_000).length;
    // How long before its due date each renewed lifecycle was started (the outbox's started_at).
    const leads: number[] = (
      await db('payments as p')
        .join('memberships as m', 'm.id', 'p.membership_id')
        .join('workflow_starts as s', 's.workflow_id', 'm.workflow_id')
        .whereNotNull('p.renewal_period_start')
        .select(db.raw('extract(epoch from (p.renewal_period_start - s.started_at)) * 1000 as lead'))
    )
      .map((r: { lead: string }) => Number(r.lead))
      .sort((a: number, b: number) => a - b);

    // Temporal actions of a renewal: the renewed run (the one before the current run of a due membership).
    const sample: string[] = await db('memberships').whereNotNull('workflow_id').where('times_billed', '>', 0).orderByRaw('random()').limit(SAMPLE).pluck('workflow_id');
    const actions: number[] = [];
    const events: number[] = [];
    for (const id of sample) {
      const current = await temporal.client.workflow.getHandle(id).fetchHistory();
      const previous = current.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
      if (!previous) continue;
      const h = await temporal.client.workflow.getHandle(id, previous).fetchHistory();
      const evs = h.events ?? [];
      const count = (pred: (e: (typeof evs)[number]) => unknown) => evs.filter(pred).length;
      // Local activities (the row's reads) are markers in the history; each counts as an action here too.
      const local = count((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity');
      actions.push(1 + count((e) => e.activityTaskScheduledEventAttributes) + local + count((e) => e.timerStartedEventAttributes) + count((e) => e.workflowExecutionSignaledEventAttributes) + count((e) => e.workflowExecutionContinuedAsNewEventAttributes));
      events.push(evs.length);
    }
    const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
    const result = {
      ...machineMeta(),
      memberships: TOTAL,
      due: DUE,
      windowSeconds: WINDOW_S,
      renewalsCreated: rows.length,
      renewalsCompleted: last,
      charges: gateway.charges(),
      lagMs: { p50: Math.round(percentile(lags, 50)), p99: Math.round(percentile(lags, 99)), max: Math.round(lags[lags.length - 1] ?? 0) },
      within60s: within60,
      completedAfterDueMs: { p50: Math.round(percentile(dones, 50)), p99: Math.round(percentile(dones, 99)) },
      temporalActionsPerRenewal: mean(actions),
      historyEventsPerRenewedRun: mean(events),
      writesPerSecond: Math.round(writeRate),
      calibrationStartsPerSecond: Math.round(startRate * 10) / 10,
      deferredStarts: deferred,
      sweepPassMs: Math.round(sweepMs[2] * 10) / 10,
      lifecycleStartsPerSecond: Math.round((DUE / dueStartSeconds) * 10) / 10,
      startedBeforeDue: leads.filter((l) => l > 0).length,
      leastStartLeadMs: Math.round(leads[0] ?? 0),
      peakRssMb: Math.round(peakRss / 1048576),
    };
    const table = textTable(
      ['memberships', 'due', 'window', 'created', 'within 60 s', 'lag p50', 'lag p99', 'lag max', 'done p50', 'actions/renewal', 'events/run', 'peak RSS'],
      [
        [
          String(TOTAL),
          String(DUE),
          `${WINDOW_S} s`,
          String(rows.length),
          String(within60),
          `${result.lagMs.p50} ms`,
          `${result.lagMs.p99} ms`,
          `${result.lagMs.max} ms`,
          `${result.completedAfterDueMs.p50} ms`,
          result.temporalActionsPerRenewal.toFixed(1),
          result.historyEventsPerRenewedRun.toFixed(1),
          `${result.peakRssMb} MB`,
        ],
      ],
    );
    process.stdout.write(`${table}\n`);
    process.stdout.write(
      `lifecycle starts deferred to the horizon: ${deferred}; one sweep pass over them: ${result.sweepPassMs} ms; the due ones started at ${result.lifecycleStartsPerSecond}/s, ${result.startedBeforeDue} of ${leads.length} before their due date (least lead ${result.leastStartLeadMs} ms)\n`,
    );
    fs.writeFileSync(path.join(__dirname, 'billing-results.json'), `${JSON.stringify(result, null, 1)}\n`);
  } finally {
    await runCleanup(cleanup);
  }
}

main().catch((err) => {
  process.stderr.write(`${err?.stack ?? err}\n`);
  process.exit(1);
});
