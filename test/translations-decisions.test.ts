import { WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../activities';
import type { TemporalHandle } from '../src/temporal/client';
import { TemporalGateway, UPDATE_TRIES } from '../src/temporal/gateway';
import { promoteVersion, workerDeploymentOptions } from '../src/temporal/versioning';
import { workerBundle } from '../src/temporal/worker';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { TranslationJobs } from '../src/translations/jobs';
import { approveSignal, DECISION_REFUSED, PATCHES, translationApproveUpdate, translationRejectUpdate } from '../workflows/translationPipeline';
import { BASE, decodedJson, type TestContext } from './helpers';
import { startAiContext, status, waitForJob, type AiContext } from './translation-helpers';
import { samplePot } from './translation-servers';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/**
 * Approve and reject are updates of the pipeline (README "Decisions: updates and signals"):
 * a call whose answer is lost is asked again with the same update id and decides once; a
 * decision the pipeline refuses changes nothing; bulk approval goes the same way. The worker
 * here runs the real activities, but the failure step waits for the test when it says so, so
 * that a rejected run stays open for a late approve.
 */
describe('translation decisions are updates', () => {
  const KEY = 'sk-decisions-test-key-1234567890';
  const SLUG = 'tdecide-plugin';
  let run: AiContext;
  let ctx: TestContext;
  let worker: { worker: Worker; done: Promise<void> } | undefined;
  let holdFail: Promise<void> | null = null;
  const auth = () => ({ Authorization: ctx.basic });
  const post = (p: string, body: object = {}) => ctx.http.post(`${BASE}${p}`).set(auth()).send(body);

  beforeAll(async () => {
    run = await startAiContext(KEY, { TRANSLATION_AI_BATCH_SIZE: '5' });
    ({ ctx } = run);
    const code = await workerBundle(); // installs the SDK runtime (our logger) before any worker
    // The workflows state their versioning behaviour, which only a versioned worker may run: a
    // deployment of this file's own, made current once the worker polls.
    const version = { deploymentName: `decisions-${process.pid}`, buildId: code.buildId };
    const connection = await NativeConnection.connect({ address: ctx.config.TEMPORAL_ADDRESS! });
    const activities = createActivities({ db: ctx.db, config: ctx.config, storage: ctx.app.locals.storage });
    const w = await Worker.create({
      connection,
      namespace: ctx.config.TEMPORAL_NAMESPACE,
      taskQueue: ctx.temporal.taskQueues.bulk, // translation pipelines run on the bulk queue
      workflowBundle: code.option,
      workerDeploymentOptions: workerDeploymentOptions(version),
      activities: {
        ...activities,
        translationFail: async (...args: Parameters<typeof activities.translationFail>) => {
          if (holdFail) await holdFail;
          return activities.translationFail(...args);
        },
      },
    });
    worker = { worker: w, done: w.run().finally(() => connection.close()) };
    await promoteVersion({ connection: () => connection, namespace: ctx.config.TEMPORAL_NAMESPACE, version, mode: 'always', stopped: worker.done });
    const created = await post('/translations/projects', { slug: SLUG, type: 'plugin', name: 'Decisions', version: '1.0', pot: samplePot(10), glotpress_url_template: null });
    expect(created.status).toBe(200);
  });
  afterAll(async () => {
    if (worker?.worker.getState() === 'RUNNING') worker.worker.shutdown();
    await worker?.done;
    await run?.close();
  });

  /** A job of the project for `locale`, parked at approval. */
  async function parked(locale: string): Promise<{ id: number; workflowId: string }> {
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: SLUG, type: 'plugin', locale }).set(auth());
    expect(first.status).toBe(200);
    const job = await waitForJob(ctx, first.body.job_id, status('pending_approval'));
    return { id: job.id, workflowId: job.workflow_id };
  }
  const history = async (workflowId: string): Promise<HistoryEvent[]> => (await ctx.temporal.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const accepted = (events: HistoryEvent[]) => events.flatMap((e) => (e.workflowExecutionUpdateAcceptedEventAttributes ? [e.workflowExecutionUpdateAcceptedEventAttributes.acceptedRequest?.meta?.updateId] : []));
  const decideActivities = (events: HistoryEvent[]) => events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'translationDecide').length;
  const logLines = async (id: number, pattern: RegExp) => ((await ctx.db('translation_jobs').where({ id }).first('logs')).logs as { message: string }[]).filter((l) => pattern.test(l.message));

  /**
   * A gateway over the test's Temporal connection whose update calls lose their answer: the
   * first `lose` calls reach the server and run, then throw what the client throws when its
   * deadline passes before the answer came. `calls` records each call's update id.
   */
  function lossyGateway(lose: number): { gateway: TemporalGateway; calls: string[] } {
    const calls: string[] = [];
    const real = ctx.temporal.client;
    const client = {
      workflow: {
        getHandle: (workflowId: string) => {
          const handle = real.workflow.getHandle(workflowId);
          return {
            executeUpdate: async (...args: Parameters<typeof handle.executeUpdate>) => {
              calls.push(String((args[1] as { updateId?: string }).updateId));
              const answer = await handle.executeUpdate(...args);
              if (lose-- > 0) throw new WorkflowUpdateRPCTimeoutOrCancelledError('Workflow update call timeout or cancelled');
              return answer;
            },
          };
        },
      },
    } as unknown as Client;
    const handle: TemporalHandle = { ...ctx.temporal, client };
    return { gateway: new TemporalGateway(handle, null, { callTimeoutMs: 10_000, ids: new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX) }), calls };
  }

  test('an approve whose first answer is lost is asked again with the same update id: decided once, and the job goes on', async () => {
    const job = await parked('de_DE');
    const { gateway, calls } = lossyGateway(1);
    await new TranslationJobs(ctx.db, gateway, ctx.config).approve(job.id, 'admin');
    expect(calls).toEqual([`approve-${job.id}`, `approve-${job.id}`]);
    const row = await ctx.db('translation_jobs').where({ id: job.id }).first('approved_at', 'approved_by');
    expect(row.approved_at).not.toBeNull();
    expect(row.approved_by).toBe('admin');
    expect(await logLines(job.id, /^Approved/)).toHaveLength(1);
    const events = await history(job.workflowId);
    expect(accepted(events)).toEqual([`approve-${job.id}`]);
    expect(decideActivities(events)).toBe(1);
    expect(decodedJson(events.filter((e) => e.markerRecordedEventAttributes))).toContain(PATCHES.decisionUpdates);
    await waitForJob(ctx, job.id, status('ready'));
  });

  test('a reject whose every answer is lost: 503 saying that sending it again is safe; it was recorded once, and the job ended rejected', async () => {
    const job = await parked('fr_FR');
    const { gateway, calls } = lossyGateway(UPDATE_TRIES);
    const err = await new TranslationJobs(ctx.db, gateway, ctx.config).reject(job.id, 'Wrong glossary', 'admin').catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 503, code: 'wu_rest_temporal_unavailable' });
    expect((err as Error).message).toContain('Sending the same request again is safe');
    expect(calls).toEqual(Array(UPDATE_TRIES).fill(`reject-${job.id}`));
    const failed = await waitForJob(ctx, job.id, status('failed'));
    expect(failed).toMatchObject({ failure_step: 'pending_approval', rejection_reason: 'Wrong glossary', approved_at: null });
    expect(await logLines(job.id, /^Rejected \(admin\)/)).toHaveLength(1);
    const result = await ctx.temporal.client.workflow.getHandle(job.workflowId).result();
    expect(result).toMatchObject({ status: 'failed', step: 'pending_approval' });
    expect(accepted(await history(job.workflowId))).toEqual([`reject-${job.id}`]);
    // The same request again, through the API: the job is no longer pending, and stays as it was.
    expect((await post(`/translations/jobs/${job.id}/reject`, { reason: 'Wrong glossary' })).body).toMatchObject({ code: 'wu_rest_translation_job_not_pending', data: { status: 409 } });
    expect(await logLines(job.id, /^Rejected \(admin\)/)).toHaveLength(1);
  });

  test('approve after reject: the pipeline, still open, refuses it (validator), and nothing changes', async () => {
    const job = await parked('it_IT');
    let release!: () => void;
    holdFail = new Promise<void>((r) => (release = r));
    try {
      const rejected = await post(`/translations/jobs/${job.id}/reject`, { reason: 'Not this locale' });
      expect(rejected.status).toBe(200);
      expect(rejected.body).toMatchObject({ status: 'failed', rejection_reason: 'Not this locale', approved_at: null });
      const before = await ctx.db('translation_jobs').where({ id: job.id }).first();
      // The API refuses at once (the row says failed)...
      expect((await post(`/translations/jobs/${job.id}/approve`)).body).toMatchObject({ code: 'wu_rest_translation_job_not_pending', data: { status: 409, job_status: 'failed' } });
      // ...and so does the pipeline for a caller that read the row before the reject (the run is
      // still open: its failure step waits for this test).
      const handle = ctx.temporal.client.workflow.getHandle(job.workflowId);
      expect((await handle.describe()).status.name).toBe('RUNNING');
      const refusal = await handle.executeUpdate(translationApproveUpdate, { args: [{ by: 'late admin' }], updateId: `approve-${job.id}` }).catch((e: unknown) => e);
      expect(refusal).toBeInstanceOf(WorkflowUpdateFailedError);
      const cause = (refusal as WorkflowUpdateFailedError).cause as ApplicationFailure;
      expect(cause).toBeInstanceOf(ApplicationFailure);
      expect(cause.type).toBe(DECISION_REFUSED);
      expect(cause.details).toEqual([{ state: 'rejected' }]);
      // A second reject is refused the same way (already decided).
      const again = await handle.executeUpdate(translationRejectUpdate, { args: [{ by: 'admin', reason: 'twice' }], updateId: `reject-${job.id}-other` }).catch((e: unknown) => e);
      expect(((again as WorkflowUpdateFailedError).cause as ApplicationFailure).details).toEqual([{ state: 'rejected' }]);
      // A refused update leaves nothing in the history; the row is as it was.
      const events = await history(job.workflowId);
      expect(accepted(events)).toEqual([`reject-${job.id}`]);
      expect(decideActivities(events)).toBe(1);
      expect(await ctx.db('translation_jobs').where({ id: job.id }).first()).toEqual(before);
    } finally {
      holdFail = null;
      release();
    }
    expect(await ctx.temporal.client.workflow.getHandle(job.workflowId).result()).toMatchObject({ status: 'failed', reason: 'Rejected by an administrator: Not this locale' });
  });

  test('reject while the job is processing: refused by the pipeline (already approved); the API says 409 and the job finishes', async () => {
    run.ai.mode.delayMs = 300;
    try {
      const job = await parked('sv_SE');
      expect((await post(`/translations/jobs/${job.id}/approve`)).status).toBe(200);
      await waitForJob(ctx, job.id, status('processing'));
      const refusal = await ctx.temporal.client.workflow
        .getHandle(job.workflowId)
        .executeUpdate(translationRejectUpdate, { args: [{ by: 'admin', reason: 'late' }], updateId: `reject-${job.id}` })
        .catch((e: unknown) => e);
      expect(((refusal as WorkflowUpdateFailedError).cause as ApplicationFailure).details).toEqual([{ state: 'approved' }]);
      expect((await post(`/translations/jobs/${job.id}/reject`, { reason: 'late' })).body).toMatchObject({ code: 'wu_rest_translation_job_not_pending', data: { status: 409 } });
      const ready = await waitForJob(ctx, job.id, status('ready'));
      expect(ready).toMatchObject({ rejection_reason: null, failure_reason: null });
    } finally {
      run.ai.mode.delayMs = 0;
    }
  });

  test('bulk approval: one update per job (approve-<id>), each decided once; a job whose run ended is reported failed, the others approved', async () => {
    const a = await parked('nl_NL');
    const b = await parked('pl_PL');
    const gone = await parked('es_ES');
    await ctx.temporal.client.workflow.getHandle(gone.workflowId).terminate('operator test');
    const bulk = await post('/translations/jobs/approve', { slug: SLUG });
    expect(bulk.status).toBe(200);
    expect(bulk.body.approved).toEqual([a.id, b.id]);
    expect(bulk.body.failed).toEqual([{ id: gone.id, error: expect.stringContaining('not running') }]);
    for (const j of [a, b]) {
      expect(await logLines(j.id, /^Approved in bulk \(/)).toHaveLength(1);
      expect(accepted(await history(j.workflowId))).toEqual([`approve-${j.id}`]);
      await waitForJob(ctx, j.id, status('ready'));
    }
    // The terminated job's row was left as it was.
    expect(await ctx.db('translation_jobs').where({ id: gone.id }).first('status', 'approved_at')).toEqual({ status: 'pending_approval', approved_at: null });
    // Nothing left pending: a second bulk approval approves nothing new and fails the terminated one again.
    expect((await post('/translations/jobs/approve', { slug: SLUG })).body).toEqual({ approved: [], failed: [{ id: gone.id, error: expect.any(String) }] });
  });

  test('the signal an API replica of the older code sends (after writing the row) still moves a run of this code on', async () => {
    const job = await parked('pt_BR');
    await ctx.db('translation_jobs').where({ id: job.id }).update({ approved_at: ctx.db.fn.now(), approved_by: 'old replica' });
    await ctx.temporal.client.workflow.getHandle(job.workflowId).signal(approveSignal, { by: 'old replica' });
    const ready = await waitForJob(ctx, job.id, status('ready'));
    expect(ready.approved_by).toBe('old replica');
    expect(accepted(await history(job.workflowId))).toEqual([]);
  });
});
