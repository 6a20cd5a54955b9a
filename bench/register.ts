/**
 * `npm run bench:register`: POST /register next to the bare workflows it is measured against,
 * in the same run, on the same Temporal dev server (SQLite file, as `npm start` runs it),
 * worker and process, at 1 and at 16 concurrent callers:
 * - POST /register of a new account with a site (HTTP, validation, scrypt, the registration
 *   row, the workflow's start, the records transaction in the API, the answer read
 *   from the row); its work after the answer is not part of the latency;
 * - POST /register for an existing user (`customer.user_id`): the same without the password
 *   to hash, to show what scrypt costs;
 * - `benchLocal`: a bare workflow running ONE no-op local activity (the goal's reference),
 *   started and awaited with client.workflow.execute;
 * - the same bare workflow started and not awaited: how fast Temporal takes starts, and how
 *   long its worker then needs to finish them ("drain"), to set beside /register's drain;
 * - `benchNoop(7)`: seven no-op regular activities (the former saga's shape), for reference;
 * - scrypt alone (the password hash, as hashPassword runs it).
 * Each: p50, p99, rate and the count of 5xx. Prints a table with the goals and writes
 * bench/register-results.json. BENCH_SECONDS (15), BENCH_CALLERS (1,16) and DB_POOL_MAX (the
 * app's default) can be set to try other runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { setLogLevel } from '../src/logger';
import { startHttp } from '../src/runtime';
import { hashPassword } from '../src/users/password';
import { benchLog, hostflowTarget, machineMeta, runCleanup, startBenchEnv, textTable, type Step } from './run';
import { startBenchWorker } from './worker';
import { benchLocal, benchNoop } from './workflows/benchNoop';

const CALLERS = (process.env.BENCH_CALLERS ?? '1,16').split(',').map(Number);
const DURATION = Number(process.env.BENCH_SECONDS ?? 15);
const WARMUP_SECONDS = 3;
const PLAN_SLUG = 'bench-plan';
/** Lower-case alphanumeric (site_url's rule), unique per run. */
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;
/** Existing users for the `customer.user_id` scenario: more than it can use. */
const SEEDED_USERS = 6000;

let counter = 0;
function newAccountBody() {
  const tag = `${RUN_TAG}x${++counter}`;
  return {
    customer: { username: `reg${tag}`, password: 'secret123', email: `reg${tag}@example.com` },
    products: [PLAN_SLUG],
    duration: 1,
    duration_unit: 'month',
    auto_renew: true,
    site: { site_url: `shop${tag}`, site_title: 'Bench Shop' },
    payment: { status: 'completed' },
    membership: { status: 'active' },
  };
}
let nextUser = 0;
let userIds: number[] = [];
function existingUserBody() {
  const userId = userIds[nextUser++];
  if (userId === undefined) throw new Error('out of seeded users');
  const tag = `${RUN_TAG}u${++counter}`;
  return { customer: { user_id: userId }, products: [PLAN_SLUG], site: { site_url: `shop${tag}`, site_title: 'Bench Shop' }, payment: { status: 'completed' }, membership: { status: 'active' } };
}

export interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** Answers of status 500 and above (or failed executions). */
  errors5xx: number;
  /** Other answers than 200, below 500. */
  other: number;
  durationSeconds: number;
  /** Event loop delay of this process during the run (API and worker share it): p99 and max, ms. */
  loopDelayP99?: number;
  loopDelayMax?: number;
  /** p99 of an fs.stat every 20 ms during the run: how long libuv's thread pool (scrypt's) keeps other work waiting, ms. */
  poolWaitP99?: number;
  /** /register and the started-only bare workflow: after the last answer, how long until the last workflows started had finished (the work behind the answers), ms. */
  drainMs?: number;
}

/** POST /register with autocannon, a fresh body per request. */
async function cannon(url: string, headers: Record<string, string>, body: () => object, connections: number, duration: number): Promise<Measurement> {
  const result = await autocannon({
    url,
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    connections,
    duration,
    timeout: 60,
    requests: [{ setupRequest: (req) => ({ ...req, body: JSON.stringify(body()) }) }],
  });
  const codes = result.statusCodeStats ?? {};
  const count = (pred: (code: number) => boolean) => Object.entries(codes).reduce((n, [code, s]) => n + (pred(Number(code)) ? (s as { count: number }).count : 0), 0);
  return {
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    errors5xx: count((c) => c >= 500) + result.errors + result.timeouts,
    other: count((c) => c !== 200 && c < 500),
    durationSeconds: result.duration,
  };
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** `concurrency` loops, each running `once` until `duration` is over. */
async function loop(once: (i: number) => Promise<unknown>, concurrency: number, duration: number): Promise<Measurement> {
  const latencies: number[] = [];
  let failed = 0;
  const start = performance.now();
  const deadline = start + duration * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        try {
          await once(++counter);
          latencies.push(performance.now() - t0);
        } catch {
          failed++;
        }
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return { rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), requests: latencies.length, errors5xx: failed, other: 0, durationSeconds: elapsed };
}

interface Row {
  scenario: string;
  callers: number;
  m: Measurement;
}

function table(rows: Row[]): string {
  const header = ['scenario', 'callers', 'p50 ms', 'p99 ms', 'rate/s', '5xx', 'other', 'loop p99/max ms', 'pool p99 ms', 'drain ms', 'done/s'];
  const body = rows.map((r) => [
    r.scenario,
    String(r.callers),
    r.m.p50.toFixed(0),
    r.m.p99.toFixed(0),
    r.m.rps.toFixed(1),
    String(r.m.errors5xx),
    String(r.m.other),
    `${r.m.loopDelayP99?.toFixed(0)}/${r.m.loopDelayMax?.toFixed(0)}`,
    r.m.poolWaitP99?.toFixed(0) ?? '',
    r.m.drainMs?.toFixed(0) ?? '',
    // Workflows finished per second, the drain included (the rate the work behind the answers keeps up).
    r.m.drainMs === undefined ? '' : (r.m.requests / (r.m.durationSeconds + r.m.drainMs / 1000)).toFixed(1),
  ]);
  return textTable(header, body);
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
      tag: RUN_TAG,
      pgDir: 'bench-register-pg',
      temporalLog: 'temporal-bench-register.log',
      temporalDbFile: 'bench-register-temporal.sqlite',
      // The pool size can be tried out: DB_POOL_MAX=20 npm run bench:register.
      env: process.env.DB_POOL_MAX ? { DB_POOL_MAX: process.env.DB_POOL_MAX } : {},
    });
    const { config, db, settings, temporal } = env;

    const worker = await startBenchWorker({ address: config.TEMPORAL_ADDRESS!, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, db, config });
    cleanup.push(['temporal worker', () => worker.shutdown()]);
    await db('products').insert({ slug: PLAN_SLUG, name: 'Bench Plan', type: 'plan', amount: '29.99', setup_fee: '0', duration: 1, duration_unit: 'month' });
    const users = await db('users')
      .insert(Array.from({ length: SEEDED_USERS }, (_, i) => ({ username: `seed${RUN_TAG}x${i}`, email: `seed${RUN_TAG}x${i}@example.com`, password_hash: 'scrypt$seeded', display_name: 'Seeded' })))
      .returning('id');
    userIds = users.map((u: { id: string }) => Number(u.id));

    const hostflow = await startHttp(config, db, settings, temporal);
    cleanup.push(['hostflow http', () => hostflow.close()]);
    const { root, headers } = hostflowTarget(config);
    const url = `${root}/register`;
    const probe = await fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(newAccountBody()) });
    if (probe.status !== 200) throw new Error(`probe POST /register answered ${probe.status}: ${(await probe.text()).slice(0, 300)}`);

    const startedOnly: string[] = [];
    const execute = {
      local: (i: number) => temporal.client.workflow.execute(benchLocal, { taskQueue: config.TEMPORAL_TASK_QUEUE, workflowId: `bench-local-${RUN_TAG}-${i}` }),
      // Started, not awaited: like /register's answers, the starts may outrun the worker.
      localStartOnly: async (i: number) => {
        const handle = await temporal.client.workflow.start(benchLocal, { taskQueue: config.TEMPORAL_TASK_QUEUE, workflowId: `bench-local-start-${RUN_TAG}-${i}` });
        startedOnly.push(handle.workflowId);
      },
      noop: (i: number) => temporal.client.workflow.execute(benchNoop, { taskQueue: config.TEMPORAL_TASK_QUEUE, workflowId: `bench-noop-${RUN_TAG}-${i}`, args: [7] }),
    };
    // The workflows behind the answers, read from their histories (visibility lags under
    // load): they finish roughly in the order they started, so the last registrations' ones
    // (one per caller) are the last to finish.
    const lastRegistrations = (callers: number): Promise<string[]> => db('registrations').orderBy('id', 'desc').limit(callers).pluck('workflow_id');
    const drained = async (last: string[]) => {
      const t0 = performance.now();
      await Promise.all(last.map((id) => temporal.client.workflow.getHandle(id).result().catch(() => undefined)));
      return performance.now() - t0;
    };
    const scenarios: { name: string; run: (callers: number, seconds: number) => Promise<Measurement> }[] = [
      { name: 'POST /register, new account (scrypt) + site', run: (c, s) => cannon(url, headers, newAccountBody, c, s) },
      { name: 'POST /register, existing user (no hash) + site', run: (c, s) => cannon(url, headers, existingUserBody, c, s) },
      { name: 'bare workflow, 1 local activity (benchLocal)', run: (c, s) => loop(execute.local, c, s) },
      { name: 'bare workflow, 1 local activity, started only', run: (c, s) => loop(execute.localStartOnly, c, s) },
      { name: 'bare workflow, 7 regular activities (benchNoop)', run: (c, s) => loop(execute.noop, c, s) },
      { name: 'scrypt hash alone (hashPassword)', run: (c, s) => loop(() => hashPassword('secret123'), c, s) },
    ];
    const rows: Row[] = [];
    for (const callers of CALLERS) {
      for (const s of scenarios) {
        log(`${s.name}: ${callers} caller(s), ${WARMUP_SECONDS}s warm-up + ${DURATION}s`);
        await s.run(callers, WARMUP_SECONDS);
        // The warm-up's workflows finish before the measured run starts.
        if (s.name.startsWith('POST /register')) await drained(await lastRegistrations(callers));
        if (s.name.endsWith('started only')) await drained(startedOnly.slice(-callers));
        const lag = monitorEventLoopDelay({ resolution: 5 });
        lag.enable();
        let running = true;
        const poolWaits: number[] = [];
        const poolProbe = (async () => {
          while (running) {
            const t0 = performance.now();
            await fs.promises.stat(__dirname);
            poolWaits.push(performance.now() - t0);
            await new Promise((r) => setTimeout(r, 20));
          }
        })();
        const m = await s.run(callers, DURATION);
        running = false;
        await poolProbe;
        lag.disable();
        m.loopDelayP99 = lag.percentile(99) / 1e6;
        m.loopDelayMax = lag.max / 1e6;
        m.poolWaitP99 = percentile(poolWaits.sort((a, b) => a - b), 99);
        // The answers do not wait for the workflows; they must not fall behind either.
        if (s.name.startsWith('POST /register')) m.drainMs = await drained(await lastRegistrations(callers));
        if (s.name.endsWith('started only')) m.drainMs = await drained(startedOnly.slice(-callers));
        log(`  p50 ${m.p50.toFixed(0)} ms, p99 ${m.p99.toFixed(0)} ms, ${m.rps.toFixed(1)}/s, 5xx ${m.errors5xx}, other ${m.other}`);
        rows.push({ scenario: s.name, callers, m });
      }
    }

    const find = (prefix: string, callers: number) => rows.find((r) => r.scenario.startsWith(prefix) && r.callers === callers)!.m;
    const goals = (name: string, reg: Measurement, reg16: Measurement) => {
      const bare1 = find('bare workflow, 1 local', 1);
      const bare16 = find('bare workflow, 1 local', 16);
      const p50Ratio = reg.p50 / bare1.p50;
      const rateRatio = reg16.rps / bare16.rps;
      return {
        scenario: name,
        oneCallerP50Ratio: p50Ratio,
        oneCallerP50Goal: p50Ratio <= 1.3,
        sixteenCallersRateRatio: rateRatio,
        sixteenCallersRateGoal: rateRatio >= 0.7,
        sixteenCallersP99Goal: reg16.p99 < 1000,
        sixteenCallersNo5xx: reg16.errors5xx === 0,
      };
    };
    // The goals compare 1 and 16 callers: only when both ran (BENCH_CALLERS).
    const verdicts =
      CALLERS.includes(1) && CALLERS.includes(16)
        ? [
            goals('new account', find('POST /register, new', 1), find('POST /register, new', 16)),
            goals('existing user', find('POST /register, existing', 1), find('POST /register, existing', 16)),
          ]
        : [];
    const meta = {
      ...machineMeta(),
      durationSeconds: DURATION,
      warmupSeconds: WARMUP_SECONDS,
      dbPoolMax: config.DB_POOL_MAX,
      uvThreadpoolSize: process.env.UV_THREADPOOL_SIZE ?? '4 (default)',
      loadAverageBefore,
      loadAverage: os.loadavg(),
      postgres: env.embedded ? 'embedded' : 'TEST_DATABASE_URL',
      temporal: process.env.TEMPORAL_ADDRESS ? 'TEMPORAL_ADDRESS' : 'dev server, SQLite file',
    };
    const yes = (b: boolean) => (b ? 'met' : 'NOT met');
    process.stdout.write(
      `\nPOST /register vs bare workflows (same dev server, worker and process)\n` +
        `node ${meta.node}, ${meta.cpus} CPUs (${meta.cpuModel}), ${meta.date}, UV_THREADPOOL_SIZE ${meta.uvThreadpoolSize}, ` +
        `load average before ${meta.loadAverageBefore.map((l) => l.toFixed(2)).join(' ')}, at the end ${meta.loadAverage.map((l) => l.toFixed(2)).join(' ')}\n\n` +
        `${table(rows)}\n\n` +
        verdicts
          .map(
            (v) =>
              `${v.scenario}: 1 caller p50 = ${v.oneCallerP50Ratio.toFixed(2)}x bare (goal <= 1.3: ${yes(v.oneCallerP50Goal)}); ` +
              `16 callers rate = ${v.sixteenCallersRateRatio.toFixed(2)}x bare (goal >= 0.7: ${yes(v.sixteenCallersRateGoal)}), p99 < 1 s: ${yes(v.sixteenCallersP99Goal)}, no 5xx: ${yes(v.sixteenCallersNo5xx)}`,
          )
          .join('\n') +
        `\n\n/register latencies from autocannon; the workflows' from execute() (start to result); ms.\n`,
    );
    const out = path.join(__dirname, 'register-results.json');
    fs.writeFileSync(out, `${JSON.stringify({ meta, goals: verdicts, results: rows.map((r) => ({ scenario: r.scenario, callers: r.callers, ...r.m })) }, null, 2)}\n`);
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
