import type { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import gettextParser from 'gettext-parser';
import { createActivities } from '../activities';
import { createTranslationActivities } from '../activities/translations';
import { taskQueues } from '../src/temporal/task-queues';
import { workflowBundle, type RunningWorker } from '../src/temporal/worker';
import { PATCHES } from '../workflows/translationPipeline';
import { BASE, decodedJson, type TestContext, startTestWorker } from './helpers';
import { binaryParser, startAiContext, status, unzip, waitForJob, type AiContext } from './translation-helpers';
import { samplePot, type FakeAi } from './translation-servers';
import { until } from './worker-process';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/**
 * Every run of a workflow id, oldest first, from the latest back along continue-as-new (each
 * run's first event names the run it continues). A retry's new run starts a chain of its own.
 */
async function runsOf(ctx: TestContext, workflowId: string): Promise<HistoryEvent[][]> {
  const client = ctx.temporal.client;
  let runId: string | undefined = (await client.workflow.getHandle(workflowId).describe()).runId;
  const runs: HistoryEvent[][] = [];
  while (runId) {
    const events: HistoryEvent[] = (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
    runs.unshift(events);
    runId = events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return runs;
}

const continuedAsNew = (events: HistoryEvent[]) => events.some((e) => e.workflowExecutionContinuedAsNewEventAttributes);
const patchMarkers = (events: HistoryEvent[]) => decodedJson(events.filter((e) => e.markerRecordedEventAttributes));

/**
 * Longest history one run of the pipeline may have with `perRun` batches per run: 6 events per
 * batch (activity scheduled, started, completed; workflow task scheduled, started, completed),
 * plus at most 40 for the rest of the run: start, import, approval (its timer and a signal),
 * the processing start, the patch markers, packaging and the close (README "Shipping a
 * workflow change").
 */
const runBound = (perRun: number) => 40 + 6 * perRun;

describe('translation pipeline histories stay bounded (continue-as-new)', () => {
  const KEY = 'sk-bounded-test-key-1234567890';
  const PER_RUN = 4;
  let ctx: TestContext;
  let ai: FakeAi;
  let worker: RunningWorker;
  let run: AiContext;

  beforeAll(async () => {
    run = await startAiContext(KEY, {
      // The worst case: one string per batch, so one batch per string.
      TRANSLATION_AI_BATCH_SIZE: '1',
      TRANSLATION_BATCHES_PER_RUN: String(PER_RUN),
    });
    ({ ctx, ai } = run);
    worker = await startTestWorker(ctx);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await run?.close();
  });

  test('20 strings, one per batch, 4 batches per run: 5 runs under the bound, every string translated, the pack built; the API follows the id across runs', async () => {
    ai.mode.delayMs = 100;
    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug: 'tbound-plugin', type: 'plugin', name: 'Bounded', version: '1.0', pot: samplePot(10), glotpress_url_template: null, auto_approve: true });
    expect(created.status).toBe(200);
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tbound-plugin', type: 'plugin', locale: 'nl_NL' }).set('Authorization', ctx.basic);
    const jobId = first.body.job_id;

    // In the second run: the API's paths that name the workflow by id (describe, through retry) see the running run.
    await waitForJob(ctx, jobId, (j) => j.batches_done > PER_RUN);
    const retry = await ctx.http.post(`${BASE}/translations/jobs/${jobId}/retry`).set('Authorization', ctx.basic).send({});
    expect(retry.status).toBe(409);
    expect(retry.body).toMatchObject({ code: 'wu_rest_translation_job_not_failed', data: { status: 409 } });
    expect(retry.body.message).toContain('its workflow is running');
    ai.mode.delayMs = 0;

    const ready = await waitForJob(ctx, jobId, status('ready'), 120_000);
    expect(ready).toMatchObject({ total_strings: 20, remaining_strings: 0, ai_strings: 20, batches_done: 20, failure_step: null });
    // Each string asked once: a continued run picks up where the row says, nothing is asked again.
    expect(ai.requests).toHaveLength(20);
    expect(new Set(ai.requests.map((r) => `${r.strings[0].context ?? ''}|${r.strings[0].text}`)).size).toBe(20);

    const dl = await ctx.http.get(new URL(ready.download_url).pathname).buffer(true).parse(binaryParser);
    expect(dl.status).toBe(200);
    const mo = gettextParser.mo.parse((await unzip(dl.body))['tbound-plugin-nl_NL.mo']);
    expect(Object.values(mo.translations).reduce((n, g) => n + Object.keys(g).filter((k) => k !== '').length, 0)).toBe(20);

    const runs = await runsOf(ctx, ready.workflow_id);
    expect(runs).toHaveLength(5);
    expect(runs.slice(0, -1).every(continuedAsNew)).toBe(true);
    expect(runs.at(-1)!.at(-1)!.workflowExecutionCompletedEventAttributes).toBeTruthy();
    const batchesPerRun = runs.map((events) => events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'translationBatch').length);
    expect(batchesPerRun).toEqual([4, 4, 4, 4, 4]);
    const lengths = runs.map((events) => events.length);
    for (const n of lengths) expect(n).toBeLessThanOrEqual(runBound(PER_RUN));
    // Unbounded, the same job would be one history of them all.
    expect(lengths.reduce((a, b) => a + b, 0)).toBeGreaterThan(runBound(PER_RUN) * 2);
    // A continued run carries the job and the step, nothing else (no key, no strings).
    const carried = runs[1][0].workflowExecutionStartedEventAttributes!;
    const input = JSON.parse(Buffer.from(carried.input!.payloads![0].data!).toString('utf8'));
    expect(input).toEqual({ jobId, slug: 'tbound-plugin', type: 'plugin', version: '1.0', locale: 'nl_NL', aiMaxTries: 3, approvalTimeoutSeconds: 30 * 86_400, batchesPerRun: PER_RUN, fromStep: 'processing' });
    expect(decodedJson(runs)).not.toContain(KEY);
    // Operators see the same memo on the last run as on the first.
    expect((await ctx.temporal.client.workflow.getHandle(ready.workflow_id).describe()).memo).toMatchObject({ job_id: jobId, slug: 'tbound-plugin', locale: 'nl_NL' });
    for (const events of runs) expect(patchMarkers(events)).toContain(PATCHES.continueAsNew);
  }, 180_000);
});

describe('translation approval wait times out', () => {
  const KEY = 'sk-expiry-test-key-1234567890';
  const TIMEOUT_SECONDS = 5;
  let ctx: TestContext;
  let ai: FakeAi;
  let worker: RunningWorker;
  let run: AiContext;
  const post = (p: string, body: unknown = {}) => ctx.http.post(`${BASE}${p}`).set('Authorization', ctx.basic).send(body as object);

  beforeAll(async () => {
    run = await startAiContext(KEY, {
      TRANSLATION_APPROVAL_TIMEOUT_DAYS: String(TIMEOUT_SECONDS / 86_400),
    });
    ({ ctx, ai } = run);
    worker = await startTestWorker(ctx);
    const created = await post('/translations/projects', { slug: 'texpiry-plugin', type: 'plugin', name: 'Expiry', version: '1.0', pot: samplePot(), glotpress_url_template: null });
    expect(created.status).toBe(200);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await run?.close();
  });

  test('nobody approves: the job is expired, saying so; approve and reject answer 409 and change nothing; retry waits again and an approval finishes it', async () => {
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'texpiry-plugin', type: 'plugin', locale: 'it_IT' }).set('Authorization', ctx.basic);
    const jobId = first.body.job_id;
    await waitForJob(ctx, jobId, status('pending_approval'));
    const expired = await waitForJob(ctx, jobId, status('expired'), 60_000);
    expect(expired).toMatchObject({ failure_step: 'pending_approval', failure_kind: 'expired', approved_at: null, remaining_strings: 10 });
    expect(expired.failure_reason).toBe(
      `Not approved within ${TIMEOUT_SECONDS} seconds (TRANSLATION_APPROVAL_TIMEOUT_DAYS): the wait for approval ended. POST /translations/jobs/${jobId}/retry waits for approval again.`,
    );
    expect(expired.logs.some((l: any) => l.level === 'warn' && l.step === 'pending_approval' && l.message === expired.failure_reason)).toBe(true);
    expect(await ctx.temporal.client.workflow.getHandle(expired.workflow_id).result()).toEqual({ status: 'expired', step: 'pending_approval', reason: expired.failure_reason });
    expect(ai.requests).toHaveLength(0);

    // The status sites poll, and the jobs list filter.
    const checked = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'texpiry-plugin', type: 'plugin', locale: 'it_IT' }).set('Authorization', ctx.basic);
    expect(checked.body).toMatchObject({ status: 'expired', failure_step: 'pending_approval', failure_reason: expired.failure_reason });
    expect(checked.body.retry_after).toBeUndefined();
    const listed = await ctx.http.get(`${BASE}/translations/jobs`).query({ status: 'expired' }).set('Authorization', ctx.basic);
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.body)).toContain(`"id":${jobId}`);

    for (const [action, body] of [['approve', {}], ['reject', { reason: 'too late' }]] as const) {
      const res = await post(`/translations/jobs/${jobId}/${action}`, body);
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'wu_rest_translation_job_expired', data: { status: 409, job_status: 'expired' } });
      expect(res.body.message).toContain('POST .../retry');
    }
    const after = await waitForJob(ctx, jobId, () => true);
    expect(after).toMatchObject({ status: 'expired', approved_at: null, rejection_reason: null, failure_reason: expired.failure_reason });

    const retried = await post(`/translations/jobs/${jobId}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'pending_approval', failure_step: null, failure_reason: null });
    expect((await post(`/translations/jobs/${jobId}/approve`)).status).toBe(200);
    const ready = await waitForJob(ctx, jobId, status('ready'));
    expect(ready).toMatchObject({ remaining_strings: 0, ai_strings: 10 });
    expect(ready.logs.some((l: any) => l.message === 'Retry of an expired job: waiting for approval again.')).toBe(true);
  }, 120_000);

  test('an approval the API recorded just before the timer fired wins: the expiry activity leaves the job pending and approved', async () => {
    const project = await ctx.db('translation_projects').where({ slug: 'texpiry-plugin' }).first('id');
    const [row] = await ctx
      .db('translation_jobs')
      .insert({ project_id: project.id, slug: 'texpiry-plugin', type: 'plugin', version: '1.0', locale: 'fr_FR', status: 'pending_approval', workflow_id: 'translation-race', approved_at: ctx.db.fn.now(), approved_by: 'admin' })
      .returning('id');
    const activities = createTranslationActivities({ db: ctx.db, config: ctx.config, storage: ctx.app.locals.storage });
    expect(await activities.translationExpire(row.id, TIMEOUT_SECONDS)).toEqual({ state: 'approved', reason: '' });
    expect(await ctx.db('translation_jobs').where({ id: row.id }).first('status', 'failure_reason')).toEqual({ status: 'pending_approval', failure_reason: null });

    // Rejected first: the rejection stands; not yet decided: expired (and asked again, the same answer).
    await ctx.db('translation_jobs').where({ id: row.id }).update({ approved_at: null, status: 'failed', failure_step: 'pending_approval', rejection_reason: 'wrong locale' });
    expect(await activities.translationExpire(row.id, TIMEOUT_SECONDS)).toEqual({ state: 'rejected', reason: 'wrong locale' });
    await ctx.db('translation_jobs').where({ id: row.id }).update({ status: 'pending_approval', failure_step: null, rejection_reason: null });
    const outcome = await activities.translationExpire(row.id, 30 * 86_400);
    expect(outcome).toMatchObject({ state: 'expired', reason: expect.stringContaining('Not approved within 30 days') });
    expect(await activities.translationExpire(row.id, 30 * 86_400)).toEqual(outcome);
    expect(await ctx.db('translation_jobs').where({ id: row.id }).first('status', 'failure_step')).toEqual({ status: 'expired', failure_step: 'pending_approval' });
  });
});

describe('a job waiting for approval survives a changed workflow (patched())', () => {
  const KEY = 'sk-patch-test-key-1234567890';
  const PER_RUN = 3;
  let ctx: TestContext;
  let ai: FakeAi;
  let old: { worker: Worker; done: Promise<void>; connection: NativeConnection } | undefined;
  let worker: RunningWorker | undefined;
  let run: AiContext;

  beforeAll(async () => {
    run = await startAiContext(KEY, {
      TRANSLATION_AI_BATCH_SIZE: '2',
      TRANSLATION_BATCHES_PER_RUN: String(PER_RUN),
    });
    ({ ctx, ai } = run);
  });
  afterAll(async () => {
    if (old?.worker.getState() === 'RUNNING') old.worker.shutdown();
    await old?.done;
    await worker?.shutdown();
    await run?.close();
  });

  test('parked at approval by the code before the change; the worker restarts with the new bundle; approved, the run goes on (no timeout of its own) and continues as new', async () => {
    // The old deployment: the pipeline as it was before patched(), with today's activities.
    await workflowBundle(); // installs the SDK runtime (our logger) before any worker
    const connection = await NativeConnection.connect({ address: ctx.config.TEMPORAL_ADDRESS! });
    const oldWorker = await Worker.create({
      connection,
      namespace: ctx.config.TEMPORAL_NAMESPACE,
      taskQueue: taskQueues(ctx.config).bulk,
      workflowBundle: await bundleWorkflowCode({ workflowsPath: require.resolve('./fixtures/translationPipeline-v1'), logger: { info() {}, debug() {}, trace() {}, log() {}, warn() {}, error() {} } }),
      activities: createActivities({ db: ctx.db, config: ctx.config, storage: ctx.app.locals.storage }),
    });
    old = { worker: oldWorker, connection, done: oldWorker.run().finally(() => connection.close()) };

    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug: 'tpatch-plugin', type: 'plugin', name: 'Patch', version: '1.0', pot: samplePot(10), glotpress_url_template: null });
    expect(created.status).toBe(200);
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tpatch-plugin', type: 'plugin', locale: 'sv_SE' }).set('Authorization', ctx.basic);
    const jobId = first.body.job_id;
    const pending = await waitForJob(ctx, jobId, status('pending_approval'));
    const handle = ctx.temporal.client.workflow.getHandle(pending.workflow_id);
    // Parked: the old code's approval wait has no timer, and no patch was recorded.
    await until(async () => (await handle.fetchHistory()).events!.at(-1)!.workflowTaskCompletedEventAttributes != null, 30_000);
    const parked = (await handle.fetchHistory()).events!;
    expect(parked.some((e) => e.timerStartedEventAttributes)).toBe(false);
    expect(parked.some((e) => e.markerRecordedEventAttributes)).toBe(false);
    const parkedRunId = (await handle.describe()).runId;

    // The deploy: the old worker stops, one with the current bundle takes the queue.
    oldWorker.shutdown();
    await old.done;
    worker = await startTestWorker(ctx);

    expect((await ctx.http.post(`${BASE}/translations/jobs/${jobId}/approve`).set('Authorization', ctx.basic).send({})).status).toBe(200);
    const ready = await waitForJob(ctx, jobId, status('ready'), 120_000);
    expect(ready).toMatchObject({ remaining_strings: 0, ai_strings: 20, batches_done: 10, failure_step: null });
    expect(ai.requests).toHaveLength(10);

    const runs = await runsOf(ctx, ready.workflow_id);
    const firstRun = runs[0];
    expect(firstRun[0].workflowExecutionStartedEventAttributes).toBeTruthy();
    expect((await ctx.temporal.client.workflow.getHandle(ready.workflow_id, parkedRunId).describe()).status.name).toBe('CONTINUED_AS_NEW');
    // The same run, replayed by the new code without a failed workflow task: the approval wait
    // it began under the old code kept its shape (no timer), and the processing it reached under
    // the new code took the new behaviour (the continue-as-new patch, then a continued run).
    expect(firstRun.slice(0, parked.length).map((e) => e.eventType)).toEqual(parked.map((e) => e.eventType));
    expect(firstRun.some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
    expect(firstRun.some((e) => e.timerStartedEventAttributes)).toBe(false);
    expect(patchMarkers(firstRun)).not.toContain(PATCHES.approvalTimeout);
    expect(patchMarkers(firstRun)).toContain(PATCHES.continueAsNew);
    // The approval reached the old run as an update: the handler this code registers in every
    // run recorded it (its marker) and the run went on.
    expect(firstRun.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).map((e) => e.workflowExecutionUpdateAcceptedEventAttributes!.acceptedRequest?.meta?.updateId)).toEqual([`approve-${jobId}`]);
    expect(patchMarkers(firstRun)).toContain(PATCHES.decisionUpdates);
    expect(runs.length).toBe(Math.ceil(10 / PER_RUN));
    expect(continuedAsNew(firstRun)).toBe(true);
  }, 180_000);
});
