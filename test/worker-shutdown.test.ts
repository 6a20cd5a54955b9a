import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningWorker } from '../src/temporal/worker';
import { BASE, createTestContext, startTestWorker, type TestContext } from './helpers';
import { status, waitForJob } from './translation-helpers';
import { samplePot, startFakeAi, type FakeAi } from './translation-servers';
import { until } from './worker-process';

/**
 * A worker stopped in the middle of an AI batch (a deploy's SIGTERM): with the shutdown grace
 * time the batch finishes and is not asked again; with none (the SDK's default) it is cancelled
 * and asked again by the next worker, one of its tries spent.
 */
describe.each([
  { grace: '60', asked: 1 },
  { grace: '0', asked: 2 },
])('worker shutdown with WORKER_SHUTDOWN_GRACE_SECONDS=$grace', ({ grace, asked }) => {
  const KEY = 'sk-shutdown-test-key-1234567890';
  let ctx: TestContext;
  let ai: FakeAi;
  let worker: RunningWorker | undefined;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-shutdown-'));
    ai = await startFakeAi(KEY);
    ctx = await createTestContext({
      DATA_DIR: dataDir,
      TRANSLATION_AI_BASE_URL: ai.baseUrl,
      TRANSLATION_AI_MODEL: 'fake-gpt',
      TRANSLATION_AI_API_KEY: KEY,
      TRANSLATION_AI_BATCH_SIZE: '100',
      OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
      WORKER_SHUTDOWN_GRACE_SECONDS: grace,
    });
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    await ai?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test(`the batch in flight when the worker stops is asked of the AI ${asked === 1 ? 'once' : 'again'}, and the job ends ready`, async () => {
    ai.mode.delayMs = 2500;
    worker = await startTestWorker(ctx);
    const slug = `tshutdown-${grace}`;
    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug, type: 'plugin', name: 'Shutdown', version: '1.0', pot: samplePot(3), glotpress_url_template: null, auto_approve: true });
    expect(created.status).toBe(200);
    const check = await ctx.http.get(`${BASE}/translations/check`).query({ slug, type: 'plugin', locale: 'de_DE' }).set('Authorization', ctx.basic);
    expect(check.status).toBe(200);
    await until(async () => ai.requests.length >= 1, 30_000);
    await worker.shutdown();
    worker = await startTestWorker(ctx);
    ai.mode.delayMs = 0;
    const job = await waitForJob(ctx, check.body.job_id, status('ready'), 90_000);
    expect(job.remaining_strings).toBe(0);
    expect(ai.requests.filter((r) => r.locale === 'de_DE').length).toBe(asked);
  }, 120_000);
});
