/**
 * `npm run bench:memory`: the resident memory (RSS) of the API process alone and of the worker
 * process alone, each as `npm run start:api` / `npm run start:worker` run them (compiled
 * `dist`, `node dist/src/api.js` / `node dist/src/worker.js`), in a process of its own.
 *
 * Starts PostgreSQL and Temporal as bench/run.ts does, builds `dist` (unless BENCH_NO_BUILD),
 * seeds 10,000 customers and 1,000 products, then:
 * 1. API: starts it (LOG_LEVEL info, its output discarded), then puts it under the load of
 *    `npm run bench` (GET one, create, update, the customer create with scrypt) and the
 *    translation batch check (100 packages), each BENCH_SECONDS (8) with autocannon from this
 *    process. RSS is read from /proc/<pid>/status every 100 ms: at rest after the start,
 *    the peak under load, after the load, and after a full GC (asked through the inspector:
 *    the process runs with --inspect on 127.0.0.1, which costs it a little memory).
 * 2. Worker: starts it, then starts BENCH_WORKFLOWS (1,000) chatFollowUp workflows that each
 *    wait on a one-hour timer (so they stay open, and in the worker's cache up to its bound),
 *    waits until the worker has run the first task of each, and reads its RSS before and after
 *    a full GC; then terminates them.
 *
 * BENCH_API_FLAGS: node flags for the API other than start:api's (recorded in the results).
 * Prints a table and writes bench/memory-results.json. Linux only (/proc).
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { setLogLevel } from '../src/logger';
import { apiNodeFlags, buildDist, nodeFlagsOf, ROOT, serviceEnv, startNode } from './processes';
import { benchLog, cannon, hostflowTarget, machineMeta, runCleanup, scenarios, seed, startBenchEnv, textTable, type BenchContext, type Scenario, type Step } from './run';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WORKFLOWS = Number(process.env.BENCH_WORKFLOWS ?? 1000);
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;
const MiB = 1024 * 1024;

/** VmRSS of a process, in bytes. */
function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

/** Peak RSS while `run` runs, sampled every 100 ms. */
async function peakDuring<T>(pid: number, run: () => Promise<T>): Promise<{ result: T; peak: number }> {
  let peak = rss(pid);
  const timer = setInterval(() => {
    peak = Math.max(peak, rss(pid));
  }, 100);
  try {
    return { result: await run(), peak };
  } finally {
    clearInterval(timer);
    peak = Math.max(peak, rss(pid));
  }
}

const mb = (bytes: number) => (bytes / MiB).toFixed(0);

async function main(): Promise<void> {
  if (process.platform !== 'linux') throw new Error('bench:memory reads /proc: Linux only');
  setLogLevel('silent');
  const cleanup: Step[] = [];
  const log = benchLog();
  try {
    buildDist(log, { workflows: true });
    const env = await startBenchEnv({ cleanup, log, tag: RUN_TAG, pgDir: 'bench-memory-pg', temporalLog: 'temporal-bench-memory.log' });
    const { config, temporal } = env;
    const pool = new pg.Pool({ connectionString: config.DATABASE_URL, max: 2 });
    cleanup.push(['pg pool', () => pool.end()]);
    const customerIds = await seed(pool, 10_000);
    const { rows: products } = await pool.query<{ id: number }>('select id from products order by id');
    const ctx: BenchContext = { customerIds, productIds: products.map((p) => Number(p.id)) };
    log(`seeded ${customerIds.length} customers and ${products.length} products`);

    // The processes get what start:api and start:worker read, nothing from this one's config.
    const childEnv = serviceEnv(config, { DATA_DIR: path.join(ROOT, '.tmp', 'bench-memory-data') });

    // ---- the API alone ----
    const api = await startNode(path.join(ROOT, 'dist/src/api.js'), apiNodeFlags(), childEnv, /API listening/, log);
    cleanup.push(['api process', () => api.stop()]);
    await new Promise((r) => setTimeout(r, 1000));
    const apiRest = rss(api.pid);
    const packages = Array.from({ length: 100 }, (_, i) => ({ slug: `bench-unknown-${i}`, type: 'plugin', locale: 'de_DE' }));
    const load: Scenario[] = [
      ...scenarios.filter((s) => s.name !== 'list 20 customers' && s.name !== 'list 20 products'),
      { name: 'translation batch check (100 packages)', method: 'POST', path: () => '/translations/check/batch', body: () => ({ packages }), connections: 8, duration: SECONDS },
    ];
    const target = { name: 'hostflow' as const, ...hostflowTarget(config) };
    const perScenario: { scenario: string; rps: number; peakMiB: number }[] = [];
    const { peak: apiPeak } = await peakDuring(api.pid, async () => {
      for (const s of load) {
        log(`API under load: ${s.name} (${s.connections} connections, ${SECONDS}s)`);
        const { result, peak } = await peakDuring(api.pid, () => cannon(target, s, ctx, SECONDS));
        perScenario.push({ scenario: s.name, rps: result.rps, peakMiB: peak / MiB });
      }
    });
    const apiAfter = rss(api.pid);
    const apiMem = await api.gc();
    const apiAfterGc = rss(api.pid);
    await api.stop();

    // ---- the worker alone ----
    const worker = await startNode(path.join(ROOT, 'dist/src/worker.js'), nodeFlagsOf('start:worker'), childEnv, /temporal worker running/, log);
    cleanup.push(['worker process', () => worker.stop()]);
    await new Promise((r) => setTimeout(r, 2000));
    const workerRest = rss(worker.pid);
    log(`starting ${WORKFLOWS} chatFollowUp workflows waiting on a one-hour timer`);
    const ids: string[] = [];
    const { peak: workerPeak } = await peakDuring(worker.pid, async () => {
      for (let i = 0; i < WORKFLOWS; i += 50) {
        await Promise.all(
          Array.from({ length: Math.min(50, WORKFLOWS - i) }, async (_, k) => {
            const workflowId = `bench-memory-${RUN_TAG}-${i + k}`;
            await temporal.client.workflow.start('chatFollowUp', { taskQueue: config.TEMPORAL_TASK_QUEUE, workflowId, args: [{ sessionId: 1_000_000 + i + k, waitSeconds: 3600 }] });
            ids.push(workflowId);
          }),
        );
      }
      // Each one's first task has run once its timer is in the history.
      for (const id of ids.slice(-20)) {
        for (let t = 0; t < 600; t++) {
          const d = await temporal.client.workflow.getHandle(id).describe();
          if ((d.historyLength ?? 0) >= 5) break;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    });
    const workerLoaded = rss(worker.pid);
    const workerMem = await worker.gc();
    const workerAfterGc = rss(worker.pid);
    await worker.stop();
    await Promise.all(ids.map((id) => temporal.client.workflow.getHandle(id).terminate('bench:memory done').catch(() => undefined)));

    const cacheBound = process.env.WORKER_MAX_CACHED_WORKFLOWS ?? String(config.WORKER_MAX_CACHED_WORKFLOWS);
    const rows = [
      ['API (node dist/src/api.js)', 'at rest after start', mb(apiRest), ''],
      ['API', `peak under load (${load.length} scenarios, ${SECONDS}s each)`, mb(apiPeak), ''],
      ['API', 'after the load', mb(apiAfter), ''],
      ['API', 'after a full GC', mb(apiAfterGc), `${mb(apiMem.heapUsed)} / ${mb(apiMem.heapTotal)}`],
      ['worker (node dist/src/worker.js)', 'at rest after start', mb(workerRest), ''],
      ['worker', `peak while ${WORKFLOWS} workflows start`, mb(workerPeak), ''],
      ['worker', `${WORKFLOWS} workflows open (cache bound ${cacheBound})`, mb(workerLoaded), ''],
      ['worker', 'after a full GC', mb(workerAfterGc), `${mb(workerMem.heapUsed)} / ${mb(workerMem.heapTotal)}`],
    ];
    const meta = { ...machineMeta(), seconds: SECONDS, workflows: WORKFLOWS, maxCachedWorkflows: Number(cacheBound), apiNodeFlags: apiNodeFlags(), workerNodeFlags: nodeFlagsOf('start:worker'), dbPoolMax: config.DB_POOL_MAX, logLevel: childEnv.LOG_LEVEL, postgres: env.embedded ? 'embedded' : 'TEST_DATABASE_URL' };
    process.stdout.write(
      `\nMemory of the API and worker processes, each alone (RSS from /proc, MiB)\n` +
        `node ${meta.node}, ${meta.cpus} CPUs (${meta.cpuModel}), ${meta.date}\n\n` +
        `${textTable(['process', 'when', 'RSS MiB', 'heap used / total MiB'], rows)}\n\n` +
        `${textTable(['API load scenario', 'req/s', 'peak RSS MiB'], perScenario.map((p) => [p.scenario, p.rps.toFixed(0), p.peakMiB.toFixed(0)]))}\n\n` +
        `API goal: at most 200 MiB under load: ${apiPeak <= 200 * MiB ? 'met' : 'NOT met'} (peak ${mb(apiPeak)} MiB).\n`,
    );
    const out = path.join(__dirname, 'memory-results.json');
    const toMiB = (m: NodeJS.MemoryUsage) => Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Math.round((v / MiB) * 10) / 10]));
    fs.writeFileSync(
      out,
      `${JSON.stringify(
        {
          meta,
          api: { restMiB: apiRest / MiB, peakMiB: apiPeak / MiB, afterLoadMiB: apiAfter / MiB, afterGcMiB: apiAfterGc / MiB, memoryUsageAfterGcMiB: toMiB(apiMem), scenarios: perScenario },
          worker: { restMiB: workerRest / MiB, peakMiB: workerPeak / MiB, openWorkflowsMiB: workerLoaded / MiB, afterGcMiB: workerAfterGc / MiB, memoryUsageAfterGcMiB: toMiB(workerMem) },
        },
        null,
        2,
      )}\n`,
    );
    log(`wrote ${path.relative(ROOT, out)}`);
  } finally {
    await runCleanup(cleanup);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`\nbench:memory failed: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  });
}
