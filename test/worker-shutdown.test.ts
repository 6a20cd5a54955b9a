import type { RunningWorker } from '../src/temporal/worker';
import { BASE, startTestWorker, type TestContext } from './helpers';
import { startAiContext, status, waitForJob, type AiContext } from './translation-helpers';
import { samplePot, type FakeAi } from './translation-servers';
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
  let run: AiContext;

  beforeAll(async () => {
    run = await startAiContext(KEY, { TRANSLATION_AI_BATCH_SIZE: '100', WORKER_SHUTDOWN_GRACE_SECONDS: grace });
    ({ ctx, ai } = run);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await run?.close();
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
    // A batch cancelled by the stopping worker is not the provider's failure: none of its error budget spent.
    expect(await ctx.db('translation_jobs').where({ id: check.body.job_id }).first('provider_failures', 'batch_provider_failures')).toEqual({ provider_failures: 0, batch_provider_failures: 0 });
  }, 120_000);
});
