/**
 * `npm run bench:ab`: two (or more) builds of hostflow's API side by side, for a change's effect
 * on CPU per request. On a shared machine, `npm run bench`'s CPU per request moves with the
 * other jobs' load by more than a change of 10-20% (issue 14): here the builds run at the same
 * time, each in a process of its own, on one database and Temporal, and are measured in short
 * alternating rounds (a, b, then b, a, ...), so each pair of rounds sees the same load.
 *
 * AB_DISTS: comma-separated build folders (each what `tsc -p tsconfig.build.json` writes to
 * dist/; copy one aside before changing the code), the first one the reference. AB_FLAGS:
 * `|`-separated node flags per build (default: start:api's). AB_ENV: `|`-separated environment
 * per build, each space-separated NAME=value pairs (e.g. `DB_POOL_MAX=10|DB_POOL_MAX=3`).
 * BENCH_ONLY: scenario names of bench/run.ts (default the four of issue 14). AB_ROUNDS (14)
 * rounds of AB_SECONDS (1.5) per build and scenario, each after AB_WARM (0.5) seconds of
 * warm-up. AB_CONNECTIONS: the callers of every scenario (default: the scenario's own); with 1, the latency is a request's
 * own, round trips included, and not the queue's. Prints, per scenario and build: CPU µs per
 * request over all rounds, the median of the per-round ratios to the first build, the rate,
 * and the mean latency (callers / rate, in µs: autocannon's percentiles are whole
 * milliseconds). Writes no file.
 *
 * AB_SHAPES: list shapes at scale instead (a regular expression on bench:scale's "resource
 * shape", e.g. `date_created|search`): the database is seeded as `npm run bench:scale` seeds it
 * (BENCH_ROWS per resource, a million by default), the builds sample the searched tables as
 * they start, and each shape is a scenario of 8 callers (AB_CONNECTIONS), with its p50 and p99
 * (means over the rounds) printed beside the CPU. The deep page through Link and GET one at
 * random ids are not among them.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../src/infra/temporal-server';
import { nodeFlagsOf, ROOT, serviceEnv, startNode, type Child } from './processes';
import { benchLog, cannon, hostflowTarget, runCleanup, scenarios, seed, startBenchEnv, type BenchContext, type Scenario, type Step, type Target } from './run';
import { CONNECTIONS, RESOURCES, searchesSampled, seed as seedScale, shapesOf } from './scale';

/** User + system CPU of a process so far, in microseconds (Linux /proc; USER_HZ 100). */
function cpuUs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const cleanup: Step[] = [];
  const log = benchLog();
  try {
    const dists = (process.env.AB_DISTS ?? '').split(',').filter(Boolean);
    if (dists.length < 2) throw new Error('AB_DISTS: at least two build folders, comma-separated (e.g. .tmp/dist-main,dist)');
    const flags = process.env.AB_FLAGS ? process.env.AB_FLAGS.split('|').map((f) => f.split(' ').filter(Boolean)) : [nodeFlagsOf('start:api')];
    const envs = (process.env.AB_ENV ?? '').split('|').map((e) => {
      const pairs = e.split(' ').filter(Boolean);
      const bad = pairs.find((kv) => !/^[A-Z_][A-Z0-9_]*=/.test(kv));
      if (bad) throw new Error(`AB_ENV: ${bad} is not NAME=value`);
      return Object.fromEntries(pairs.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])) as Record<string, string>;
    });
    const only = (process.env.BENCH_ONLY ?? 'GET one customer,create product,update product,update customer').split(',').map((s) => s.trim());
    const rounds = Number(process.env.AB_ROUNDS ?? 14);
    const seconds = Number(process.env.AB_SECONDS ?? 1.5);
    const warm = Number(process.env.AB_WARM ?? 0.5);

    const atScale = process.env.AB_SHAPES ? new RegExp(process.env.AB_SHAPES) : undefined;

    const { config, db } = await startBenchEnv({ cleanup, log, tag: `ab${process.pid.toString(36)}${Date.now().toString(36)}` });
    const pool = new pg.Pool({ connectionString: config.DATABASE_URL, max: 2 });
    cleanup.push(['pg pool', () => pool.end()]);
    let ctx: BenchContext = { customerIds: [], productIds: [] };
    if (atScale) {
      log('seeding as bench:scale does');
      await seedScale(pool, log);
    } else {
      const customerIds = await seed(pool, 10_000);
      const { rows: products } = await pool.query<{ id: number }>('select id from products order by id');
      ctx = { customerIds, productIds: products.map((p) => Number(p.id)) };
    }

    const targets: (Target & { label: string; child: Child })[] = [];
    for (const [i, dist] of dists.entries()) {
      const cfg = { ...config, PORT: await freePort() };
      const nodeFlags = flags[i] ?? flags[0];
      const env = envs[i] ?? {};
      const child = await startNode(path.resolve(ROOT, dist, 'src/api.js'), nodeFlags, serviceEnv(cfg, env), /API listening/, log);
      cleanup.push([`api ${dist}`, () => child.stop()]);
      const envLabel = Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ');
      const label = [flags[i] && process.env.AB_FLAGS ? nodeFlags.join(' ') : '', envLabel].filter(Boolean).join(', ');
      targets.push({ name: 'hostflow', ...hostflowTarget(cfg), process: child, child, label: `${dist}${label ? ` (${label})` : ''}` });
    }

    const callers = process.env.AB_CONNECTIONS ? Number(process.env.AB_CONNECTIONS) : undefined;
    let selected: Scenario[];
    if (atScale) {
      await searchesSampled(pool, log);
      selected = RESOURCES.flatMap((r) => shapesOf(r, db))
        .filter((s) => atScale.test(`${s.resource} ${s.name}`))
        .map((s) => ({ name: `${s.resource} ${s.name}`, method: 'GET' as const, path: () => s.url, connections: callers ?? CONNECTIONS, duration: seconds }));
      if (selected.length === 0) throw new Error(`AB_SHAPES: no shape of bench:scale matches ${atScale}`);
    } else selected = scenarios.filter((s) => only.includes(s.name)).map((s) => (callers ? { ...s, connections: callers } : s));
    // The JIT warm: every scenario on every build first.
    for (const s of selected) for (const t of targets) await cannon(t, s, ctx, 2, true);
    const lines: string[] = [];
    for (const s of selected) {
      const acc = targets.map(() => ({ cpu: 0, requests: 0, perRound: [] as number[], p50: 0, p99: 0 }));
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? targets.map((_, i) => i) : targets.map((_, i) => targets.length - 1 - i);
        for (const i of order) {
          const t = targets[i];
          await cannon(t, s, ctx, warm, true);
          const before = cpuUs(t.child.pid);
          const m = await cannon(t, s, ctx, seconds);
          const used = cpuUs(t.child.pid) - before;
          acc[i].cpu += used;
          acc[i].requests += m.requests;
          acc[i].perRound.push(used / m.requests);
          acc[i].p50 += m.p50 / rounds;
          acc[i].p99 += m.p99 / rounds;
        }
      }
      for (const [i, t] of targets.entries()) {
        const ratio = median(acc[i].perRound.map((v, r) => v / acc[0].perRound[r]));
        const rate = acc[i].requests / rounds / seconds;
        const line = `${s.name}: ${t.label}: ${(acc[i].cpu / acc[i].requests).toFixed(0)} CPU µs/req, ${rate.toFixed(0)} req/s, median per-round ratio to ${dists[0]} ${ratio.toFixed(2)}, mean latency ${((s.connections / rate) * 1e6).toFixed(0)} µs${atScale ? `, p50 ${acc[i].p50.toFixed(1)} / p99 ${acc[i].p99.toFixed(1)} ms` : ''}`;
        log(line);
        lines.push(line);
      }
    }
    process.stdout.write(`\n${lines.join('\n')}\nload average ${fs.readFileSync('/proc/loadavg', 'utf8')}`);
  } finally {
    await runCleanup(cleanup);
  }
}

main().catch((err) => {
  process.stderr.write(`\nbench:ab failed: ${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
});
