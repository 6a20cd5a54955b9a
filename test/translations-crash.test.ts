import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningWorker } from '../src/temporal/worker';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';
import { status, waitForJob } from './translation-helpers';
import { samplePot, startFakeAi, type FakeAi } from './translation-servers';
import { killWorkerProcess, spawnWorkerProcess, until } from './worker-process';

/**
 * The worker killed (SIGKILL) while the AI translates batch 4 of 10; another worker picks the
 * job up: the finished batches are not asked again, the one in flight is, and the pack is built.
 */
describe('translation pipeline survives a worker crash during processing', () => {
  const KEY = 'sk-crash-test-key-0987654321';
  let ctx: TestContext;
  let ai: FakeAi;
  let child: ChildProcess | undefined;
  let worker: RunningWorker | undefined;
  let dataDir: string;
  const env = () => ({
    DATA_DIR: dataDir,
    TRANSLATION_AI_BASE_URL: ai.baseUrl,
    TRANSLATION_AI_MODEL: 'fake-gpt',
    TRANSLATION_AI_API_KEY: KEY,
    TRANSLATION_AI_BATCH_SIZE: '2',
    OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
  });

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tr-'));
    ai = await startFakeAi(KEY);
    ai.mode.delayMs = 600;
    ctx = await createTestContext(env());
  });
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await worker?.shutdown();
    await ctx?.close();
    await ai?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('killed in batch 4: batches 1-3 are not asked again, the pack is complete', async () => {
    child = await spawnWorkerProcess(ctx, env());

    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug: 'tcrash-plugin', type: 'plugin', name: 'Crash', version: '1.0', pot: samplePot(10), glotpress_url_template: null, auto_approve: true });
    expect(created.body).toMatchObject({ slug: 'tcrash-plugin' });
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tcrash-plugin', type: 'plugin', locale: 'nl_NL' }).set('Authorization', ctx.basic);
    const jobId = first.body.job_id;

    // Batch 4 asked (three finished and stored), not yet answered: kill.
    await until(async () => ai.requests.length >= 4, 60_000).catch(async (err) => {
      throw new Error(`${err.message}: ${JSON.stringify(first.body)} ${JSON.stringify(await ctx.db('translation_jobs').first('status', 'logs'))}`);
    });
    await killWorkerProcess(child);
    const atCrash = await ctx.db('translation_jobs').where({ id: jobId }).first('status', 'batches_done', 'remaining_strings');
    expect(atCrash).toEqual({ status: 'processing', batches_done: 3, remaining_strings: 14 });
    const progress = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tcrash-plugin', type: 'plugin', locale: 'nl_NL' }).set('Authorization', ctx.basic);
    expect(progress.body).toMatchObject({ status: 'processing', remaining_strings: 14, total_strings: 20 });

    worker = await startTestWorker(ctx);
    const ready = await waitForJob(ctx, jobId, status('ready'), 90_000);
    expect(ready).toMatchObject({ remaining_strings: 0, ai_strings: 20, batches_done: 10 });

    // Each string was asked once, but for the batch in flight at the crash (asked twice).
    const asked = new Map<string, number>();
    for (const r of ai.requests) for (const s of r.strings) asked.set(`${s.context ?? ''}|${s.text}`, (asked.get(`${s.context ?? ''}|${s.text}`) ?? 0) + 1);
    expect(asked.size).toBe(20);
    const twice = [...asked.entries()].filter(([, n]) => n > 1).map(([k]) => k);
    expect(twice).toEqual(ai.requests[3].strings.map((s) => `${s.context ?? ''}|${s.text}`));
    expect(ai.requests).toHaveLength(11);
    // The history shows the batch activity tried again after the crash.
    const history = await ctx.temporal.client.workflow.getHandle(ready.workflow_id).fetchHistory();
    const attempts = (history.events ?? []).filter((e) => e.activityTaskStartedEventAttributes).map((e) => e.activityTaskStartedEventAttributes!.attempt ?? 1);
    expect(Math.max(...attempts)).toBeGreaterThan(1);
    // The batch timed out with its dead worker: no failure of the provider, none of its error budget spent.
    expect(await ctx.db('translation_jobs').where({ id: jobId }).first('provider_failures')).toEqual({ provider_failures: 0 });
  }, 150_000);
});
