/**
 * `npm run bench:translations`: POST /translations/check/batch with 100 packages against
 * GET /translations/check of one package, same server, concurrency and duration, and against a
 * bare Express 5 + pg server answering the same batch with the same single query (no auth,
 * validation, logging or metrics), in the same run (two alternating rounds each).
 *
 * Starts PostgreSQL and Temporal as bench/run.ts does (its helpers), seeds 2,000 translation
 * projects and 20,000 jobs in every state (so the lookups run against a realistic table, and
 * no check starts a pipeline), then measures both routes with autocannon. The batch mixes
 * ready, in-flight, failed and missing packages over 10 locales. Prints a table and writes
 * bench/translations-results.json. Every answer must be 200, else it fails. The API runs as
 * `npm run start:api` runs it (BENCH_API_FLAGS: other node flags, recorded in the results) and
 * the bare server in a process of its own (bench/processes.ts), apart from autocannon in this one.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import autocannon from 'autocannon';
import express from 'express';
import pg from 'pg';
import { setLogLevel } from '../src/logger';
import { CHECK_SQL } from '../src/translations/check-query';
import { apiNodeFlags, buildDist, startApiProcess, startBareProcess } from './processes';
import { benchLog, hostflowTarget, machineMeta, runCleanup, startBenchEnv, type Step } from './run';

const CONNECTIONS = Number(process.env.BENCH_CALLERS ?? 8);
const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = 2;
const PROJECTS = 2_000;
const LOCALES = ['de_DE', 'fr_FR', 'es_ES', 'it_IT', 'nl_NL', 'pt_BR', 'ja', 'ru_RU', 'pl_PL', 'sv_SE'];
const STATES = ['ready', 'ready', 'ready', 'ready', 'pending_approval', 'processing', 'importing', 'packaging', 'failed'] as const;
const RUN_TAG = `${process.pid.toString(36)}${Date.now().toString(36)}`;


/**
 * The bare server, in a process of its own (bench/bare-child.ts): plain Express 5 + pg.Pool
 * over DATABASE_URL (DB_POOL_MAX), on PORT: the batch body in, the one query, one status per
 * row out.
 */
export function startTranslationsBare(env: NodeJS.ProcessEnv): Promise<http.Server> {
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL, max: Number(env.DB_POOL_MAX), application_name: 'bare' });
  const port = Number(env.PORT);
  const app = express();
  app.disable('x-powered-by');
  app.use(express.json());
  // /batch sends the statement as plain text (parsed and planned each time), /batch-prepared as a
  // named statement (planned once per connection), as hostflow does.
  app.post(['/translations/check/batch', '/translations/check/batch-prepared'], async (req, res) => {
    const packages = (req.body as { packages: { slug: string; type: string; locale: string }[] }).packages;
    const values = [packages.map((p) => p.slug), packages.map((p) => p.type), packages.map((p) => p.locale)];
    const { rows } = req.path.endsWith('-prepared') ? await pool.query({ name: 'check', text: CHECK_SQL, values }) : await pool.query(CHECK_SQL, values);
    // The same answer as hostflow's: the statuses, the download URL of a ready pack, the failure
    // of a failed one, when to ask again otherwise.
    const base = `${req.protocol}://${req.get('host')}`;
    res.json(
      rows.map((r) => {
        const p = packages[r.ord - 1];
        if (r.project_id === null) return { slug: p.slug, type: p.type, locale: p.locale, status: 'missing', source: 'none', remaining_strings: 0, total_strings: 0, translated_strings: 0 };
        const s: Record<string, unknown> = { slug: p.slug, type: p.type, locale: p.locale, version: r.version, status: r.status, source: r.source, remaining_strings: r.remaining_strings, total_strings: r.total_strings, translated_strings: r.total_strings - r.remaining_strings, job_id: Number(r.job_id) };
        if (r.status === 'ready') s.download_url = `${base}/translations/packages/${p.type}/${p.slug}/${encodeURIComponent(r.version)}/${p.locale}.zip`;
        else if (r.status === 'failed') Object.assign(s, { failure_step: r.failure_step, failure_reason: r.failure_reason });
        else s.retry_after = Math.min(300, Math.round(5 + (Date.now() - new Date(r.status_changed_at).getTime()) / 4000));
        return s;
      }),
    );
  });
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  server.once('close', () => void pool.end());
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
}

async function cannon(opts: { url: string; method: 'GET' | 'POST'; headers: Record<string, string>; body?: string; duration: number; warmup?: boolean }): Promise<Measurement> {
  const result = await autocannon({
    url: opts.url,
    method: opts.method,
    headers: { ...opts.headers, ...(opts.body ? { 'content-type': 'application/json' } : {}) },
    body: opts.body,
    connections: CONNECTIONS,
    duration: opts.duration,
    timeout: 30,
  });
  const codes = result.statusCodeStats ?? {};
  const other = Object.entries(codes).filter(([code]) => code !== '200');
  if (other.length || result.errors > 0 || result.timeouts > 0 || (!opts.warmup && result['2xx'] === 0)) {
    throw new Error(`${opts.method} ${opts.url}: status codes ${JSON.stringify(codes)}, ${result.errors} errors, ${result.timeouts} timeouts; every answer must be 200`);
  }
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, requests: result.requests.total };
}

async function main(): Promise<void> {
  setLogLevel('silent');
  const cleanup: Step[] = [];
  const log = benchLog();
  try {
    buildDist(log);
    const env = await startBenchEnv({ cleanup, log, tag: RUN_TAG, pgDir: 'bench-translations-pg', temporalLog: 'temporal-bench-translations.log' });
    const { config, db } = env;

    log(`seeding ${PROJECTS} projects and ${PROJECTS * LOCALES.length} jobs`);
    const projects = Array.from({ length: PROJECTS }, (_, i) => ({ slug: `bench-plugin-${i}`, type: i % 5 === 0 ? 'theme' : 'plugin', name: `Bench ${i}`, version: '1.0.0', pot: 'msgid "x"\nmsgstr ""\n' }));
    const ids: { id: number; slug: string; type: string }[] = [];
    for (let i = 0; i < projects.length; i += 500) ids.push(...(await db('translation_projects').insert(projects.slice(i, i + 500)).returning(['id', 'slug', 'type'])));
    const jobs = ids.flatMap((p, i) =>
      LOCALES.map((locale, k) => {
        const status = STATES[(i + k) % STATES.length];
        return {
          project_id: p.id,
          slug: p.slug,
          type: p.type,
          version: '1.0.0',
          locale,
          status,
          source: status === 'ready' ? 'mixed' : 'human',
          total_strings: 120,
          remaining_strings: status === 'ready' ? 0 : 40,
          workflow_id: `bench-translation-${p.slug}-${p.type}-1.0.0-${locale}`,
          ...(status === 'ready' ? { package_path: `${p.type}/${p.slug}/1.0.0/${p.slug}-${locale}.zip` } : {}),
          ...(status === 'failed' ? { failure_step: 'processing', failure_reason: 'Translation failed after 3 tries: bench' } : {}),
        };
      }),
    );
    for (let i = 0; i < jobs.length; i += 2000) await db('translation_jobs').insert(jobs.slice(i, i + 2000));
    await db.raw('analyze translation_projects; analyze translation_jobs');

    // 100 packages: 90 of seeded projects over the 10 locales (mixed states), 10 unknown (missing).
    const packages = Array.from({ length: 100 }, (_, i) => {
      if (i % 10 === 9) return { slug: `bench-unknown-${i}`, type: 'plugin', locale: LOCALES[i % LOCALES.length] };
      const p = ids[(i * 17) % ids.length];
      return { slug: p.slug, type: p.type, locale: LOCALES[i % LOCALES.length] };
    });
    const api = await startApiProcess(config, log, {}, apiNodeFlags());
    cleanup.push(['api process', () => api.stop()]);
    const { root, headers } = hostflowTarget(config);
    const probe = await fetch(`${root}/translations/check/batch`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ packages }) });
    const probeBody = (await probe.json()) as { status: string }[];
    if (probe.status !== 200 || probeBody.length !== 100) throw new Error(`probe batch answered ${probe.status}`);
    const mix: Record<string, number> = {};
    for (const s of probeBody) mix[s.status] = (mix[s.status] ?? 0) + 1;
    log(`batch status mix: ${JSON.stringify(mix)}`);

    const single = packages[0];
    const singleUrl = `${root}/translations/check?slug=${single.slug}&type=${single.type}&locale=${single.locale}`;
    const batchUrl = `${root}/translations/check/batch`;
    const body = JSON.stringify({ packages });

    const bare = await startBareProcess('translations', 'startTranslationsBare', { DATABASE_URL: config.DATABASE_URL!, DB_POOL_MAX: String(config.DB_POOL_MAX) }, log);
    cleanup.push(['bare process', () => bare.child.stop()]);
    const bareUrl = `${bare.root}/translations/check/batch`;
    const barePreparedUrl = `${bare.root}/translations/check/batch-prepared`;

    log(`warm-up ${WARMUP_SECONDS}s each`);
    await cannon({ url: batchUrl, method: 'POST', headers, body, duration: WARMUP_SECONDS, warmup: true });
    await cannon({ url: bareUrl, method: 'POST', headers: {}, body, duration: WARMUP_SECONDS, warmup: true });
    await cannon({ url: barePreparedUrl, method: 'POST', headers: {}, body, duration: WARMUP_SECONDS, warmup: true });
    await cannon({ url: singleUrl, method: 'GET', headers, duration: WARMUP_SECONDS, warmup: true });
    // Hostflow's batch and the bare ones in two alternating rounds of DURATION / 2 each (in one
    // order, then in the reverse order): a change in the machine's load weighs on all of them.
    const half = DURATION / 2;
    const measureBatch = () => cannon({ url: batchUrl, method: 'POST', headers, body, duration: half });
    const targets = {
      hostflow: measureBatch,
      bare: () => cannon({ url: bareUrl, method: 'POST', headers: {}, body, duration: half }),
      'bare (prepared)': () => cannon({ url: barePreparedUrl, method: 'POST', headers: {}, body, duration: half }),
    };
    const rounds: Record<keyof typeof targets, Measurement[]> = { hostflow: [], bare: [], 'bare (prepared)': [] };
    for (let round = 0; round < 2; round++) {
      const order = Object.keys(targets) as (keyof typeof targets)[];
      for (const which of round === 0 ? order : order.reverse()) {
        log(`${which} batch of 100, round ${round + 1}/2: ${CONNECTIONS} connections, ${half}s`);
        // BENCH_PROFILE=1: a CPU profile of the API process over hostflow's batch rounds (.tmp/profiles);
        // BENCH_PROFILE=alloc: its allocations, and what a request allocated.
        if (which === 'hostflow' && process.env.BENCH_PROFILE) {
          const m = await api.profiled(`translations-batch-hostflow-${round + 1}`, measureBatch);
          rounds[which].push(m);
          // BENCH_PROFILE=alloc: what a batch allocated in the API, from the sampled bytes.
          const bytes = api.sampledBytes();
          if (bytes !== undefined) log(`hostflow batch, round ${round + 1}: about ${Math.round(bytes / m.requests / 1024)} KB allocated per request (${(bytes / 1e6).toFixed(0)} MB sampled over ${m.requests} requests)`);
        } else rounds[which].push(await targets[which]());
      }
    }
    const mean = (list: Measurement[]): Measurement => ({
      rps: (list[0].rps + list[1].rps) / 2,
      p50: (list[0].p50 + list[1].p50) / 2,
      p99: (list[0].p99 + list[1].p99) / 2,
      requests: list[0].requests + list[1].requests,
    });
    const batch = mean(rounds.hostflow);
    const bareBatch = mean(rounds.bare);
    const barePrepared = mean(rounds['bare (prepared)']);
    log(`single check: ${CONNECTIONS} connections, ${DURATION}s`);
    const one = await cannon({ url: singleUrl, method: 'GET', headers, duration: DURATION });

    const rows = [
      { scenario: 'POST /translations/check/batch (100 packages)', m: batch, packagesPerSecond: batch.rps * 100 },
      { scenario: 'bare Express + pg, same batch, same query', m: bareBatch, packagesPerSecond: bareBatch.rps * 100 },
      { scenario: 'bare, the query prepared as hostflow does', m: barePrepared, packagesPerSecond: barePrepared.rps * 100 },
      { scenario: 'GET /translations/check (1 package)', m: one, packagesPerSecond: one.rps },
    ];
    const header = ['scenario', 'req/s', 'packages/s', 'p50 ms', 'p99 ms'];
    const cells = rows.map((r) => [r.scenario, r.m.rps.toFixed(1), r.packagesPerSecond.toFixed(0), r.m.p50.toFixed(1), r.m.p99.toFixed(1)]);
    const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
    const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join('  ');
    const meta = { ...machineMeta(), apiNodeFlags: apiNodeFlags(), connections: CONNECTIONS, durationSeconds: DURATION, warmupSeconds: WARMUP_SECONDS, projects: PROJECTS, jobs: jobs.length, batchStatusMix: mix, postgres: env.embedded ? 'embedded' : 'TEST_DATABASE_URL' };
    process.stdout.write(
      `\nTranslation status checks: a batch of 100 packages vs one package (${PROJECTS} projects, ${jobs.length} jobs)\n` +
        `node ${meta.node}, ${meta.cpus} CPUs (${meta.cpuModel}), ${meta.date}; the API: node ${meta.apiNodeFlags.join(' ')}\n\n` +
        `${[line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n')}\n\n` +
        `${CONNECTIONS} connections, ${DURATION}s after a ${WARMUP_SECONDS}s warm-up; latencies from autocannon.\n` +
        `A batch costs ${(batch.p50 / one.p50).toFixed(1)}x one check at p50 for 100x the packages.\n` +
        `Batch against bare: ${(batch.rps / bareBatch.rps).toFixed(2)}x the rate (${(batch.rps / barePrepared.rps).toFixed(2)}x the bare server preparing the query too; goal at least 0.8x); p99 ${batch.p99} ms (goal at most 15 ms).\n`,
    );
    const out = path.join(__dirname, 'translations-results.json');
    fs.writeFileSync(out, `${JSON.stringify({ meta, results: rows.map((r) => ({ scenario: r.scenario, ...r.m, packagesPerSecond: r.packagesPerSecond })) }, null, 2)}\n`);
    log(`wrote ${path.relative(path.resolve(__dirname, '..'), out)}`);
  } finally {
    await runCleanup(cleanup);
  }
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`\nbench:translations failed: ${(err as Error).stack ?? err}\n`);
    process.exitCode = 1;
  });
}
