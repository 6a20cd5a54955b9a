import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { answerClientError } from '../src/http/client-error';
import { IDEMPOTENCY_KEY } from '../src/http/idempotency';
import type { RunningWorker } from '../src/temporal/worker';
import { API_KEY, API_SECRET, BASE, createTestContext, type TestContext, startTestWorker } from './helpers';

/**
 * The API fuzzed from its own served OpenAPI document with schemathesis (PyPI; installed by
 * `npm install` into .tools/schemathesis): positive and negative data, every phase (the
 * document's examples, boundary coverage, random fuzzing, and stateful sequences along the
 * document's links: create → read, change, delete), against a real server, PostgreSQL and a
 * worker. It fails on any 5xx and on any answer whose status, content type, headers or body
 * the document does not describe; the contract checker of the test context checks every JSON
 * answer once more.
 *
 * FUZZ_MAX_EXAMPLES and FUZZ_SEED size it: `npm test` runs a few thousand requests with a
 * fixed seed; `npm run fuzz` runs ≥ 20,000 with a random one (FUZZ_ALIASES=1: the singular
 * paths too).
 */
const MAX_EXAMPLES = Number(process.env.FUZZ_MAX_EXAMPLES ?? 2);
const PHASES = process.env.FUZZ_PHASES ?? 'examples,coverage,fuzzing,stateful';
const SEED = process.env.FUZZ_SEED ?? '20261126';
const MIN_REQUESTS = Number(process.env.FUZZ_MIN_REQUESTS ?? 2000);
const TIMEOUT_MS = Number(process.env.FUZZ_TIMEOUT_SECONDS ?? 1500) * 1000;
/** Answers slower than this are listed in the summary (where a slow run spent its time). */
const SLOW_MS = 1000;
const CHECKS = process.env.FUZZ_CHECKS?.split(',') ?? ['not_a_server_error', 'status_code_conformance', 'content_type_conformance', 'response_headers_conformance', 'response_schema_conformance'];

function schemathesisBinary(): string {
  const candidates = [process.env.SCHEMATHESIS_BIN, path.resolve(__dirname, '..', '.tools', 'schemathesis', 'bin', 'st')].filter((c): c is string => !!c);
  const found = candidates.find((c) => fs.existsSync(c));
  if (!found) throw new Error('schemathesis is not installed: run `npm install` (it installs it into .tools/schemathesis) or set SCHEMATHESIS_BIN.');
  return found;
}

describe('fuzzing from the OpenAPI document (schemathesis)', () => {
  let ctx: TestContext;
  let worker: RunningWorker;
  let server: http.Server;
  let origin: string;
  const statuses = new Map<number, number>();
  const workDir = path.resolve(__dirname, '..', '.tmp', `fuzz-${process.pid}`);
  const dataDir = path.join(workDir, 'data');
  let requests = 0;
  const slow: { ms: number; line: string }[] = [];

  beforeAll(async () => {
    ctx = await createTestContext({
      REGISTER_WAIT_SECONDS: '2',
      TENANT_WAIT_SECONDS: '2',
      AUTH_FAILURE_LIMIT: '1000000',
      // Uploads and language packs the fuzzer makes go under .tmp, removed afterwards.
      DATA_DIR: dataDir,
    });
    worker = await startTestWorker(ctx);
    // A little of everything, so that reads and writes by id reach records (the fuzzer's
    // random ids mostly miss; the document's links lead it to the records it creates).
    const [user] = await ctx.db('users').insert({ username: 'fuzzuser', email: 'fuzz@example.com', password_hash: 'x', display_name: 'Fuzz' }).returning('id');
    const [customer] = await ctx.db('customers').insert({ user_id: user.id }).returning('id');
    const [product] = await ctx.db('products').insert({ slug: 'fuzz-plan', name: 'Fuzz Plan', type: 'plan', amount: '9.5' }).returning('id');
    await ctx.db('sites').insert({ title: 'Fuzz', domain: 'fuzz.localhost', path: '/', customer_id: customer.id, type: 'customer_owned' });
    await ctx.db('memberships').insert({ customer_id: customer.id, plan_id: product.id, amount: '9.5' });
    server = http.createServer(ctx.app);
    server.on('clientError', answerClientError);
    server.on('request', (req, res) => {
      requests += 1;
      // Schemathesis sends one Idempotency-Key value over and over (its examples and boundaries),
      // so after the first write every other would be a 409 "key reused" that never reaches its
      // handler. A valid key is made unique to its request here (keys themselves are tested in
      // idempotency.test.ts); an invalid one is left as it is, to be refused.
      const key = req.headers['idempotency-key'];
      if (typeof key === 'string' && IDEMPOTENCY_KEY.test(key) && key.length < 240) req.headers['idempotency-key'] = `${key}.${requests}`;
      const started = process.hrtime.bigint();
      res.on('close', () => {
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        if (ms > SLOW_MS) slow.push({ ms, line: `${Math.round(ms)} ms ${req.method} ${req.url?.slice(0, 160)} → ${res.writableFinished ? res.statusCode : 'not finished'}` });
      });
      // The document lets the fuzzer switch the API (and registration) off through the settings:
      // switch them back on after every settings write, so that the rest of the run reaches the routes.
      if (req.method !== 'GET' && req.url?.includes('/settings')) {
        res.on('finish', () => void ctx.settings.setMany({ enable_api: true, enable_registration: true }));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    await worker.shutdown();
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test(
    'no 5xx and no answer outside the document',
    async () => {
      const reportDir = workDir;
      const args = [
        'run',
        `${origin}${BASE}/openapi.json`,
        // The singular paths (/customer, …) run the same handlers as the plural ones: `npm run fuzz` alone takes them.
        ...(process.env.FUZZ_ALIASES === '1' ? [] : ['--exclude-path-regex', '^/wp-json/wu/v2/(customer|product|membership|payment|site|domain)(/|$)']),
        '--url',
        origin,
        '--auth',
        `${API_KEY}:${API_SECRET}`,
        '--checks',
        CHECKS.join(','),
        '--mode',
        process.env.FUZZ_MODE ?? 'all',
        '--phases',
        PHASES,
        '--max-examples',
        String(MAX_EXAMPLES),
        // One worker: with two, hypothesis (describing a lambda) can run CPython 3.11's ast.parse on two threads at
        // once, whose shared AST state then fails with "SystemError: AST constructor recursion depth mismatch".
        '--workers',
        '1',
        '--request-timeout',
        '30',
        '--suppress-health-check',
        'all',
        '--continue-on-failure',
        '--report',
        'junit',
        '--report-dir',
        reportDir,
        '--output-truncate',
        'true',
        '--no-color',
        ...(SEED === 'random' ? [] : ['--seed', SEED]),
      ];
      const output: string[] = [];
      const code = await new Promise<number | null>((resolve, reject) => {
        fs.mkdirSync(reportDir, { recursive: true });
        // Its working folder holds its cache (.schemathesis/): under .tmp, not in the repository.
        const child = spawn(schemathesisBinary(), args, { cwd: reportDir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', SCHEMATHESIS_TELEMETRY: 'false' } });
        child.stdout.on('data', (c: Buffer) => output.push(c.toString()));
        child.stderr.on('data', (c: Buffer) => output.push(c.toString()));
        // Stopped (SIGINT: it still prints its summary) before jest's own timeout, so that a slow
        // run fails with what it did and where the time went instead of a bare timeout.
        const stop = setTimeout(() => {
          output.push(`\n[stopped after ${TIMEOUT_MS / 1000 - 30} s]\n`);
          child.kill('SIGINT');
          setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
        }, TIMEOUT_MS - 30_000);
        child.on('error', reject);
        child.on('close', (c) => {
          clearTimeout(stop);
          resolve(c);
        });
      });
      const text = output.join('');
      fs.writeFileSync(path.join(reportDir, 'output.txt'), text);
      const slowest = [...slow].sort((a, b) => b.ms - a.ms).slice(0, 20).map((s) => s.line);
      const summary = `schemathesis exit ${code}; ${requests} requests; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; ${slow.length} answers slower than ${SLOW_MS} ms${slowest.length ? `, the slowest:\n  ${slowest.join('\n  ')}` : ''}`;
      // Printed for the record (and for the README's figures from `npm run fuzz`).
      process.stdout.write(`${summary}\n${text.split('\n').filter((l) => /Test cases:|generated|passed|failures|Seed:|ST\d+/.test(l)).join('\n')}\n`);
      if (code !== 0) {
        // The failures, without the (long) reproducing URLs of each.
        const failures = text.split('\n').filter((l) => l.length < 400).join('\n');
        throw new Error(`${summary}\n${failures.slice(-12_000)}`);
      }
      expect([...statuses.keys()].filter((s) => s >= 500)).toEqual([]);
      expect(requests).toBeGreaterThanOrEqual(MIN_REQUESTS);
    },
    TIMEOUT_MS,
  );
});
