/**
 * A deploy of changed workflow code under worker versioning (README "Shipping a workflow
 * change"): workers of deploy A (test/fixtures/deploy/a.ts: the workflows as they are, plus two
 * probes) run a pinned and an auto-upgrade run and park a translation job at approval; workers
 * of deploy B (b.ts: changed code) start and make their version current. The pinned run ends on
 * A, the auto-upgrade run and the parked job move to B, and the job gets through B's change
 * because it is behind patched() (without it, b-unpatched.ts, the parked history does not replay).
 *
 * The test's own worker deployment name: its deploys change the current version of that
 * deployment only, not that of the other test files' workers.
 */
import crypto from 'node:crypto';
import type { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { bundleWorkflows } from '../src/temporal/bundle';
import type { RunningWorker } from '../src/temporal/worker';
import { startWorker } from '../src/worker-runtime';
import { PATCHES } from '../workflows/translationPipeline';
import { NEW_STEP } from './fixtures/deploy/b';
import { BASE, decodedJson, type TestContext } from './helpers';
import { startAiContext, status, waitForJob, type AiContext } from './translation-helpers';
import { samplePot } from './translation-servers';
import { until } from './worker-process';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
type Bundle = Awaited<ReturnType<typeof bundleWorkflows>>;

/** The build id that completed each workflow task of a history, in order. */
const taskBuildIds = (events: HistoryEvent[]) => events.filter((e) => e.workflowTaskCompletedEventAttributes).map((e) => e.workflowTaskCompletedEventAttributes!.deploymentVersion?.buildId ?? '');
const markers = (events: HistoryEvent[]) => decodedJson(events.filter((e) => e.markerRecordedEventAttributes));

describe('worker versioning: deploying changed workflow code', () => {
  const KEY = 'sk-versioning-test-key-1234567890';
  const DEPLOYMENT = `hostflow-test-ver-${process.pid}-${crypto.randomBytes(3).toString('hex')}`;
  let run: AiContext;
  let ctx: TestContext;
  let a: Bundle;
  let b: Bundle;
  const workers: RunningWorker[] = [];

  const start = async (bundle: Bundle, env: Partial<TestContext['config']> = {}) => {
    const worker = await startWorker({
      address: ctx.config.TEMPORAL_ADDRESS!,
      namespace: ctx.config.TEMPORAL_NAMESPACE,
      taskQueue: ctx.config.TEMPORAL_TASK_QUEUE,
      db: ctx.db,
      config: { ...ctx.config, ...env },
      storage: ctx.app.locals.storage,
      bundle: { option: bundle, buildId: bundle.buildId, origin: 'bundled at start' },
    });
    workers.push(worker);
    return worker;
  };
  const deployment = async () =>
    (await ctx.temporal.connection.workflowService.describeWorkerDeployment({ namespace: ctx.config.TEMPORAL_NAMESPACE, deploymentName: DEPLOYMENT })).workerDeploymentInfo!;
  const versionOf = async (workflowId: string) => (await ctx.temporal.client.workflow.getHandle(workflowId).describe()).raw.workflowExecutionInfo?.versioningInfo;

  beforeAll(async () => {
    run = await startAiContext(KEY, { TEMPORAL_DEPLOYMENT_NAME: DEPLOYMENT });
    ctx = run.ctx;
    [a, b] = await Promise.all([bundleWorkflows(require.resolve('./fixtures/deploy/a')), bundleWorkflows(require.resolve('./fixtures/deploy/b'))]);
  }, 120_000);
  afterAll(async () => {
    for (const w of workers) await w.shutdown();
    await run?.close();
  });

  test('the pinned run ends on A, the auto-upgrade run and a job parked at approval move to B, through patched()', async () => {
    expect(a.buildId).toMatch(/^[0-9a-f]{64}$/);
    expect(b.buildId).not.toBe(a.buildId);

    // Deploy A: its first worker makes its version the deployment's current one.
    const workerA = await start(a);
    expect(workerA.version).toEqual({ deploymentName: DEPLOYMENT, buildId: a.buildId });
    expect(await workerA.promoted).toEqual({ state: 'current', previous: null });
    expect((await deployment()).routingConfig?.currentDeploymentVersion?.buildId).toBe(a.buildId);

    const client = ctx.temporal.client;
    const taskQueue = ctx.config.TEMPORAL_TASK_QUEUE;
    const pinned = await client.workflow.start('pinnedProbe', { taskQueue, workflowId: `pinned-${DEPLOYMENT}` });
    const auto = await client.workflow.start('autoUpgradeProbe', { taskQueue, workflowId: `auto-${DEPLOYMENT}` });
    await until(async () => (await versionOf(pinned.workflowId))?.deploymentVersion?.buildId === a.buildId && (await versionOf(auto.workflowId))?.deploymentVersion?.buildId === a.buildId, 30_000);
    expect((await versionOf(pinned.workflowId))?.behavior).toBe(1 /* VERSIONING_BEHAVIOR_PINNED */);
    expect((await versionOf(auto.workflowId))?.behavior).toBe(2 /* VERSIONING_BEHAVIOR_AUTO_UPGRADE */);

    // A translation job parked at approval by deploy A (the pipeline as it is: approval timer).
    const project = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug: 'tver-plugin', type: 'plugin', name: 'Versioning', version: '1.0', pot: samplePot(4), glotpress_url_template: null });
    expect(project.status).toBe(200);
    const check = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tver-plugin', type: 'plugin', locale: 'sv_SE' }).set('Authorization', ctx.basic);
    const jobId: number = check.body.job_id;
    const pending = await waitForJob(ctx, jobId, status('pending_approval'));
    const job = client.workflow.getHandle(pending.workflow_id);
    // Parked: the approval wait's timer started (the last command of that workflow task).
    await until(async () => (await job.fetchHistory()).events!.at(-1)!.timerStartedEventAttributes != null, 30_000);
    const parked = (await job.fetchHistory()).events!;
    expect(new Set(taskBuildIds(parked))).toEqual(new Set([a.buildId]));
    expect(markers(parked)).toContain(PATCHES.approvalTimeout);
    expect(markers(parked)).not.toContain(NEW_STEP);
    const parkedHistory = await job.fetchHistory();
    const parkedRunId = (await job.describe()).runId;

    // Deploy B: its worker starts beside A's and makes B current; A's workers stay for A's pinned runs.
    const workerB = await start(b);
    expect(await workerB.promoted).toEqual({ state: 'current', previous: a.buildId });
    expect((await deployment()).routingConfig?.currentDeploymentVersion?.buildId).toBe(b.buildId);

    await pinned.signal('go');
    await auto.signal('go');
    expect(await pinned.result()).toBe('A');
    expect(await auto.result()).toBe('B');
    expect((await versionOf(pinned.workflowId))?.deploymentVersion?.buildId).toBe(a.buildId);
    expect((await versionOf(auto.workflowId))?.deploymentVersion?.buildId).toBe(b.buildId);
    const autoTasks = taskBuildIds((await auto.fetchHistory()).events!);
    expect(autoTasks[0]).toBe(a.buildId);
    expect(autoTasks.at(-1)).toBe(b.buildId);
    expect(new Set(taskBuildIds((await pinned.fetchHistory()).events!))).toEqual(new Set([a.buildId]));

    // The parked job, approved now, runs on B: B replays A's history (its new first step is
    // behind patched(), which a run without the marker skips) and carries the job to the end.
    expect((await ctx.http.post(`${BASE}/translations/jobs/${jobId}/approve`).set('Authorization', ctx.basic).send({})).status).toBe(200);
    const ready = await waitForJob(ctx, jobId, status('ready'), 120_000);
    expect(ready).toMatchObject({ remaining_strings: 0, failure_step: null });
    const finished = (await client.workflow.getHandle(ready.workflow_id, parkedRunId).fetchHistory()).events!;
    expect(finished.slice(0, parked.length).map((e) => e.eventType)).toEqual(parked.map((e) => e.eventType));
    expect(finished.some((e) => e.workflowTaskFailedEventAttributes)).toBe(false);
    expect(taskBuildIds(finished.slice(parked.length)).every((id) => id === b.buildId)).toBe(true);
    expect(taskBuildIds(finished.slice(parked.length)).length).toBeGreaterThan(0);
    expect(markers(finished)).not.toContain(NEW_STEP);

    // A job started now runs B's new step (the marker, then its timer before the import).
    const fresh = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tver-plugin', type: 'plugin', locale: 'da_DK' }).set('Authorization', ctx.basic);
    const freshJob = await waitForJob(ctx, fresh.body.job_id, status('pending_approval'));
    const freshEvents = (await client.workflow.getHandle(freshJob.workflow_id).fetchHistory()).events!;
    expect(markers(freshEvents)).toContain(NEW_STEP);
    const firstTimer = freshEvents.findIndex((e) => e.timerStartedEventAttributes);
    const firstActivity = freshEvents.findIndex((e) => e.activityTaskScheduledEventAttributes);
    expect(firstTimer).toBeGreaterThan(-1);
    expect(firstTimer).toBeLessThan(firstActivity);
    expect(new Set(taskBuildIds(freshEvents))).toEqual(new Set([b.buildId]));

    // Without patched(), the same change cannot replay the run deploy A parked.
    const unpatched = await bundleWorkflows(require.resolve('./fixtures/deploy/b-unpatched'));
    await expect(Worker.runReplayHistory({ workflowBundle: unpatched }, parkedHistory, pending.workflow_id)).rejects.toBeInstanceOf(DeterminismViolationError);
    await Worker.runReplayHistory({ workflowBundle: b }, parkedHistory, pending.workflow_id);

    // A is no longer current and drains; a worker of A started again (a restart, a rollback
    // without asking) with WORKER_VERSIONING_SET_CURRENT=if-unset leaves B current.
    await until(async () => ((await deployment()).versionSummaries ?? []).some((v) => v.deploymentVersion?.buildId === a.buildId && v.drainageStatus !== 0), 30_000);
    const again = await start(a, { WORKER_VERSIONING_SET_CURRENT: 'if-unset' });
    expect(await again.promoted).toEqual({ state: 'left', current: b.buildId });
    expect((await deployment()).routingConfig?.currentDeploymentVersion?.buildId).toBe(b.buildId);
  }, 240_000);
});
