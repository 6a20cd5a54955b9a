/**
 * `npm run bench:tenants`: how long isolating a site takes, end to end through the API.
 * For one tenant at a time (3 rounds) and for 20 tenants at once: bootstrap (POST, then
 * migration-status polled every 50 ms until ready), verify (POST, answered when done) and
 * teardown (DELETE, answered when done). Real databases and roles on the bench PostgreSQL
 * server, the workflows on the bench Temporal server, one in-process worker.
 * Prints a table and writes bench/tenants-results.json.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setLogLevel } from '../src/logger';
import { startHttp } from '../src/runtime';
import { startWorker } from '../src/worker-runtime';
import { benchLog, hostflowTarget, machineMeta, runCleanup, startBenchEnv, type Step } from './run';

const ROUNDS = 3;
const PARALLEL = 20;
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;

type Phase = 'bootstrap' | 'verify' | 'teardown';
interface Timing {
  scenario: string;
  phase: Phase;
  tenants: number;
  wallMs: number;
  p50Ms: number;
  p99Ms: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const cleanup: Step[] = [];
  const log = benchLog();
  const dataDir = path.resolve(__dirname, '..', '.tmp', `bench-tenants-${RUN_TAG}`);
  try {
    const env = await startBenchEnv({
      cleanup,
      log,
      tag: RUN_TAG,
      pgDir: 'bench-tenants-pg',
      temporalLog: 'temporal-bench-tenants.log',
      env: { TENANT_CREDENTIALS_KEY: crypto.randomBytes(32).toString('hex'), DATA_DIR: dataDir, TENANT_WAIT_SECONDS: '300' },
    });
    cleanup.push(['data dir', async () => fs.rmSync(dataDir, { recursive: true, force: true })]);
    const { config, db, settings, temporal } = env;
    const worker = await startWorker({ address: config.TEMPORAL_ADDRESS!, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, db, config });
    cleanup.push(['temporal worker', () => worker.shutdown()]);
    const http = await startHttp(config, db, settings, temporal);
    cleanup.push(['hostflow http', () => http.close()]);
    const { root, headers } = hostflowTarget(config);
    const call = async (method: string, p: string, body?: unknown) => {
      const res = await fetch(`${root}${p}`, { method, headers: { ...headers, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };
    let n = 0;
    const makeSite = async () => {
      const tag = `${RUN_TAG}x${++n}`;
      const c = await call('POST', '/customers', { username: `ten${tag}`, email: `ten${tag}@example.com`, password: 'secret123' });
      if (c.status !== 200) throw new Error(`customer: ${c.status} ${JSON.stringify(c.body)}`);
      const s = await call('POST', '/sites', { title: 'Bench tenant', domain: `ten${tag}.example.com`, customer_id: c.body.id });
      if (s.status !== 200) throw new Error(`site: ${s.status} ${JSON.stringify(s.body)}`);
      return s.body.id as number;
    };
    const timed = async (fn: () => Promise<void>) => {
      const t0 = performance.now();
      await fn();
      return performance.now() - t0;
    };
    const phases: Record<Phase, (site: number) => Promise<void>> = {
      async bootstrap(site) {
        const r = await call('POST', `/tenants/${site}/bootstrap`, {});
        if (r.status !== 202) throw new Error(`bootstrap ${site}: ${r.status} ${JSON.stringify(r.body)}`);
        for (;;) {
          const s = await call('GET', `/tenants/${site}/migration-status`);
          if (s.body.state === 'ready') return;
          if (s.body.state !== 'bootstrapping') throw new Error(`bootstrap ${site} ended ${s.body.state}: ${JSON.stringify(s.body.checks ?? s.body.error)}`);
          await new Promise((res) => setTimeout(res, 50));
        }
      },
      async verify(site) {
        const r = await call('POST', `/tenants/${site}/verify`);
        if (r.status !== 200 || r.body.ready !== true) throw new Error(`verify ${site}: ${r.status} ${JSON.stringify(r.body)}`);
      },
      async teardown(site) {
        const r = await call('DELETE', `/tenants/${site}`);
        if (r.status !== 200) throw new Error(`teardown ${site}: ${r.status} ${JSON.stringify(r.body)}`);
      },
    };

    const rows: Timing[] = [];
    const run = async (scenario: string, sites: number[]) => {
      for (const phase of ['bootstrap', 'verify', 'teardown'] as Phase[]) {
        const each: number[] = [];
        const wall = await timed(async () => {
          await Promise.all(sites.map(async (s) => each.push(await timed(() => phases[phase](s)))));
        });
        each.sort((a, b) => a - b);
        rows.push({ scenario, phase, tenants: sites.length, wallMs: wall, p50Ms: percentile(each, 50), p99Ms: percentile(each, 99) });
        log(`${scenario} ${phase}: ${sites.length} tenant(s) in ${wall.toFixed(0)} ms`);
      }
    };

    // Warm-up (workflow bundle, first connections), not counted.
    await run('warm-up', [await makeSite()]);
    rows.length = 0;
    const single: Timing[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      await run('one tenant', [await makeSite()]);
      single.push(...rows.splice(0));
    }
    // One tenant: the median round of each phase.
    for (const phase of ['bootstrap', 'verify', 'teardown'] as Phase[]) {
      const walls = single.filter((t) => t.phase === phase).map((t) => t.wallMs).sort((a, b) => a - b);
      rows.push({ scenario: `one tenant (median of ${ROUNDS})`, phase, tenants: 1, wallMs: percentile(walls, 50), p50Ms: percentile(walls, 50), p99Ms: walls[walls.length - 1] });
    }
    const many = await Promise.all(Array.from({ length: PARALLEL }, () => makeSite()));
    await run(`${PARALLEL} tenants at once`, many);

    const header = ['scenario', 'phase', 'tenants', 'wall ms', 'p50 ms', 'max/p99 ms'];
    const body = rows.map((r) => [r.scenario, r.phase, String(r.tenants), r.wallMs.toFixed(0), r.p50Ms.toFixed(0), r.p99Ms.toFixed(0)]);
    const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
    const line = (cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
    const meta = { ...machineMeta(), rounds: ROUNDS, parallel: PARALLEL, postgres: env.embedded ? 'embedded' : 'TEST_DATABASE_URL', temporal: process.env.TEMPORAL_ADDRESS ? 'TEMPORAL_ADDRESS' : 'dev server' };
    process.stdout.write(
      `\nTenant bootstrap / verify / teardown through the API (node ${meta.node}, ${meta.cpus} CPUs, ${meta.date})\n\n` +
        `${[line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n')}\n\n` +
        'wall = from the first request to the last tenant done; p50/p99 over the tenants of the run.\n',
    );
    const out = path.join(__dirname, 'tenants-results.json');
    fs.writeFileSync(out, `${JSON.stringify({ meta, results: rows }, null, 2)}\n`);
    log(`wrote ${path.relative(path.resolve(__dirname, '..'), out)}`);
  } finally {
    await runCleanup(cleanup);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`\nbench:tenants failed: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  });
}
