/**
 * `npm run bench:register`: POST /register (the `register` saga: HTTP, validation, scrypt,
 * then one workflow of several activities, awaited) next to a bare `benchNoop` workflow running
 * the same number of no-op activities, started and awaited with client.workflow.execute, at
 * the same concurrency and duration, on the same Temporal server, worker and process.
 *
 * Starts PostgreSQL and Temporal as bench/run.ts does (its helpers), runs a worker in-process
 * (startWorker with the app's config), seeds one plan product, counts the activities one
 * registration runs from a probe's history, then measures both. Prints a table and writes
 * bench/register-results.json. Every /register answer must be 200, else it fails.
 */
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { setLogLevel } from '../src/logger';
import { workflowIdFor } from '../src/register/service';
import { startHttp } from '../src/runtime';
import { startWorker } from '../src/temporal/worker';
import type { benchNoop } from '../workflows/benchNoop';
import { benchLog, hostflowTarget, machineMeta, runCleanup, startBenchEnv, type Step } from './run';

const CONNECTIONS = 4;
const DURATION = 15;
const WARMUP_SECONDS = 2;
const PLAN_SLUG = 'bench-plan';
/** Lower-case alphanumeric (site_url's rule), unique per run. */
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;

let counter = 0;
function registerBody(n: number) {
  const t = `${RUN_TAG}x${n}`;
  return {
    customer: { username: `reg${t}`, password: 'secret123', email: `reg${t}@example.com` },
    products: [PLAN_SLUG],
    duration: 1,
    duration_unit: 'month',
    auto_renew: true,
    site: { site_url: `shop${t}`, site_title: 'Bench Shop' },
    payment: { status: 'completed' },
    membership: { status: 'active' },
  };
}

export interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  durationSeconds: number;
}

/** POST /register with autocannon, a fresh body per request; anything but 200 throws. */
async function cannonRegister(url: string, headers: Record<string, string>, duration: number, warmup = false): Promise<Measurement> {
  const result = await autocannon({
    url,
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    connections: CONNECTIONS,
    duration,
    timeout: 60,
    requests: [{ setupRequest: (req) => ({ ...req, body: JSON.stringify(registerBody(++counter)) }) }],
  });
  const codes = result.statusCodeStats ?? {};
  const other = Object.entries(codes).filter(([code]) => code !== '200');
  if (other.length || result.errors > 0 || result.timeouts > 0 || (!warmup && result['2xx'] === 0)) {
    const sample = await fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(registerBody(++counter)) })
      .then(async (r) => `${r.status} ${(await r.text()).slice(0, 300)}`)
      .catch((err: Error) => err.message);
    throw new Error(
      `POST /register: status codes ${JSON.stringify(codes)}, ${result.errors} errors, ${result.timeouts} timeouts; ` +
        `every answer must be 200; a fresh request answered: ${sample}`,
    );
  }
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, requests: result.requests.total, durationSeconds: result.duration };
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** `concurrency` loops that each start and await benchNoop(activities) until `duration` is over. */
async function loopNoop(
  execute: (id: string) => Promise<number>,
  concurrency: number,
  duration: number,
): Promise<Measurement> {
  const latencies: number[] = [];
  const start = performance.now();
  const deadline = start + duration * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        await execute(`bench-noop-${RUN_TAG}-${worker}-${++counter}`);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return { rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), requests: latencies.length, durationSeconds: elapsed };
}

interface Row {
  scenario: string;
  connections: number;
  m: Measurement;
  /** req/s relative to the bare workflow */
  ratio: number;
}

function table(rows: Row[]): string {
  const header = ['scenario', 'conc', 'req/s', 'p50 ms', 'p99 ms', 'ratio'];
  const body = rows.map((r) => [r.scenario, String(r.connections), r.m.rps.toFixed(1), r.m.p50.toFixed(1), r.m.p99.toFixed(1), r.ratio.toFixed(2)]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const cleanup: Step[] = [];
  const log = benchLog();
  try {
    const env = await startBenchEnv({ cleanup, log, tag: RUN_TAG, pgDir: 'bench-register-pg', temporalLog: 'temporal-bench-register.log' });
    const { config, db, settings, temporal } = env;

    const worker = await startWorker({ address: config.TEMPORAL_ADDRESS!, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, db, config });
    cleanup.push(['temporal worker', () => worker.shutdown()]);
    await db('products').insert({ slug: PLAN_SLUG, name: 'Bench Plan', type: 'plan', amount: '29.99', setup_fee: '0', duration: 1, duration_unit: 'month' });

    const hostflow = await startHttp(config, db, settings, temporal);
    cleanup.push(['hostflow http', () => hostflow.close()]);
    const { root, headers } = hostflowTarget(config);
    const url = `${root}/register`;

    // A probe with an Idempotency-Key (so its workflow id is known): how many activities does
    // one registration run?
    const key = `bench-probe-${RUN_TAG}`;
    const probe = await fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify(registerBody(++counter)) });
    if (probe.status !== 200) throw new Error(`probe POST /register answered ${probe.status}: ${(await probe.text()).slice(0, 300)}`);
    const history = await temporal.client.workflow.getHandle(workflowIdFor(key)).fetchHistory();
    const activities = (history.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes).length;
    if (activities < 1) throw new Error('the probe registration ran no activities');
    log(`one registration (with a site) runs ${activities} activities`);

    log(`/register: ${CONNECTIONS} connections, ${WARMUP_SECONDS}s warm-up + ${DURATION}s`);
    const warm = await cannonRegister(url, headers, WARMUP_SECONDS, true);
    log(`warm-up: ${warm.requests} registrations, p50 ${warm.p50} ms`);
    const reg = await cannonRegister(url, headers, DURATION);

    const execute = (workflowId: string) =>
      temporal.client.workflow.execute<typeof benchNoop>('benchNoop', { taskQueue: config.TEMPORAL_TASK_QUEUE, workflowId, args: [activities] });
    log(`benchNoop(${activities}): ${CONNECTIONS} concurrent loops, ${WARMUP_SECONDS}s warm-up + ${DURATION}s`);
    await loopNoop(execute, CONNECTIONS, WARMUP_SECONDS);
    const noop = await loopNoop(execute, CONNECTIONS, DURATION);

    const rows: Row[] = [
      { scenario: 'POST /register (hostflow)', connections: CONNECTIONS, m: reg, ratio: reg.rps / noop.rps },
      { scenario: `benchNoop workflow (${activities} no-op activities)`, connections: CONNECTIONS, m: noop, ratio: 1 },
    ];
    const meta = {
      ...machineMeta(),
      activitiesPerRegistration: activities,
      connections: CONNECTIONS,
      durationSeconds: DURATION,
      warmupSeconds: WARMUP_SECONDS,
      dbPoolMax: config.DB_POOL_MAX,
      postgres: env.embedded ? 'embedded' : 'TEST_DATABASE_URL',
      temporal: process.env.TEMPORAL_ADDRESS ? 'TEMPORAL_ADDRESS' : 'dev server',
    };
    process.stdout.write(
      `\nPOST /register vs a bare workflow of ${activities} no-op activities (same server, worker and process)\n` +
        `node ${meta.node}, ${meta.cpus} CPUs (${meta.cpuModel}), ${meta.date}\n\n` +
        `${table(rows)}\n\nratio = req/s / benchNoop req/s; /register latencies from autocannon, benchNoop from execute() (ms).\n`,
    );
    const out = path.join(__dirname, 'register-results.json');
    fs.writeFileSync(
      out,
      `${JSON.stringify({ meta, results: rows.map((r) => ({ scenario: r.scenario, connections: r.connections, ...r.m, ratio: r.ratio })) }, null, 2)}\n`,
    );
    log(`wrote ${path.relative(path.resolve(__dirname, '..'), out)}`);
  } finally {
    await runCleanup(cleanup);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`\nbench:register failed: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  });
}
