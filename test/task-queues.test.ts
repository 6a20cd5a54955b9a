/**
 * Task queues (src/temporal/task-queues.ts): interactive work (register, chat follow-ups, domain
 * checks) on TEMPORAL_TASK_QUEUE, bulk work (translations, tenants) on TEMPORAL_BULK_TASK_QUEUE;
 * a worker process polls the queues WORKER_TASK_QUEUES names, each with its own concurrency.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import * as workflows from '../bench/workflows';
import { ConfigError, loadConfig } from '../src/config';
import { ApiError } from '../src/http/errors';
import { TemporalGateway } from '../src/temporal/gateway';
import { taskQueueFor, taskQueues, WORKFLOW_TASK_QUEUES, workerTaskQueues } from '../src/temporal/task-queues';
import { workerBounds, type RunningWorker } from '../src/temporal/worker';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { startTestWorker } from './bench-workers';
import { createTestContext, type TestContext } from './helpers';
import { until } from './worker-process';

describe('which queue each workflow type runs on', () => {
  test('every workflow type is placed, translations, tenants, webhook deliveries and membership lifecycles on the bulk queue, the rest interactive', () => {
    expect(Object.keys(WORKFLOW_TASK_QUEUES).sort()).toEqual(Object.keys(workflows).sort());
    const queues = { interactive: 'hf', bulk: 'hf-bulk' };
    expect(Object.fromEntries(Object.keys(workflows).map((t) => [t, taskQueueFor(t, queues)]))).toEqual({
      register: 'hf',
      chatFollowUp: 'hf',
      domainCheck: 'hf',
      benchNoop: 'hf',
      benchLocal: 'hf',
      translationPipeline: 'hf-bulk',
      tenantBootstrap: 'hf-bulk',
      tenantVerifyWorkflow: 'hf-bulk',
      tenantTeardown: 'hf-bulk',
      tenantPush: 'hf-bulk',
      webhookDelivery: 'hf-bulk',
      membershipLifecycle: 'hf-bulk',
      webhookShard: 'hf-bulk',
    });
    expect(() => taskQueueFor('somethingNew', queues)).toThrow(/somethingNew has no task queue/);
  });

  test('configuration: the bulk queue defaults to <main>-bulk; WORKER_TASK_QUEUES names known queues only', () => {
    const c = loadConfig({});
    expect(taskQueues(c)).toEqual({ interactive: 'hostflow', bulk: 'hostflow-bulk' });
    expect(taskQueues(loadConfig({ TEMPORAL_TASK_QUEUE: 'a', TEMPORAL_BULK_TASK_QUEUE: 'b' }))).toEqual({ interactive: 'a', bulk: 'b' });
    expect(workerTaskQueues(c, taskQueues(c))).toEqual([
      { kind: 'interactive', name: 'hostflow' },
      { kind: 'bulk', name: 'hostflow-bulk' },
    ]);
    const bulkOnly = loadConfig({ WORKER_TASK_QUEUES: ' hostflow-bulk ' });
    expect(workerTaskQueues(bulkOnly, taskQueues(bulkOnly))).toEqual([{ kind: 'bulk', name: 'hostflow-bulk' }]);
    expect(() => loadConfig({ WORKER_TASK_QUEUES: 'hostflow,elsewhere' })).toThrow(ConfigError);
    expect(() => loadConfig({ WORKER_TASK_QUEUES: 'hostflow,elsewhere' })).toThrow(/WORKER_TASK_QUEUES="hostflow,elsewhere": "elsewhere" is neither the interactive queue \(hostflow\) nor the bulk queue \(hostflow-bulk\)/);
    expect(() => loadConfig({ WORKER_TASK_QUEUES: ',' })).toThrow(/WORKER_TASK_QUEUES/);
    expect(() => loadConfig({ TEMPORAL_BULK_TASK_QUEUE: 'hostflow' })).toThrow(/TEMPORAL_BULK_TASK_QUEUE="hostflow": must differ/);
  });

  test('concurrency: WORKER_MAX_ACTIVITIES (10) on the interactive queue, WORKER_MAX_BULK_ACTIVITIES (5) on the bulk one', () => {
    const c = loadConfig({});
    expect(c.DB_POOL_MAX).toBe(10);
    expect(workerBounds(c, 'interactive').maxConcurrentActivityTaskExecutions).toBe(10);
    expect(workerBounds(c, 'bulk').maxConcurrentActivityTaskExecutions).toBe(5);
    expect(workerBounds(loadConfig({ WORKER_MAX_BULK_ACTIVITIES: '2' }), 'bulk').maxConcurrentActivityTaskExecutions).toBe(2);
  });
});

describe('starts and workers', () => {
  let ctx: TestContext;
  let gateway: TemporalGateway;
  const unavailable = () => new ApiError(503, 'temporal_unavailable', 'unreachable');
  beforeAll(async () => {
    ctx = await createTestContext();
    gateway = new TemporalGateway(ctx.temporal, null, { callTimeoutMs: 10_000, ids: new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX) });
  });
  afterAll(async () => {
    gateway.close();
    await ctx.close();
  });

  const pollers = async (queue: string) =>
    (await ctx.temporal.connection.workflowService.describeTaskQueue({ namespace: ctx.temporal.namespace, taskQueue: { name: queue }, taskQueueType: 1 })).pollers?.length ?? 0;

  test('a worker polling only the interactive queue runs interactive work; bulk work waits for a bulk worker', async () => {
    const queues = taskQueues(ctx.config);
    let worker: RunningWorker | undefined = await startTestWorker({ ...ctx, config: { ...ctx.config, WORKER_TASK_QUEUES: [queues.interactive] } });
    try {
      const quick = await gateway.start(workflows.benchNoop, { workflowId: `tq-noop-${Date.now()}`, args: [0], summary: 'bench' }, unavailable);
      const bulk = await gateway.start(workflows.tenantPush, { workflowId: `tq-push-${Date.now()}`, args: [{ tenantId: -1, siteId: -1 }], summary: 'push' }, unavailable);
      expect((await quick.describe()).taskQueue).toBe(queues.interactive);
      expect((await bulk.describe()).taskQueue).toBe(queues.bulk);
      expect(await quick.result()).toBe(0);
      expect(await pollers(queues.interactive)).toBeGreaterThan(0);
      expect(await pollers(queues.bulk)).toBe(0);
      // Nothing polls the bulk queue: the push has not run a single task.
      await new Promise((r) => setTimeout(r, 1000));
      expect((await bulk.describe()).status.name).toBe('RUNNING');
      expect((await bulk.fetchHistory()).events?.some((e) => e.workflowTaskStartedEventAttributes)).toBe(false);
      await worker.shutdown();

      // A bulk-only worker takes it: its activity runs (and refuses the made-up tenant).
      worker = await startTestWorker({ ...ctx, config: { ...ctx.config, WORKER_TASK_QUEUES: [queues.bulk] } });
      await until(async () => (await pollers(queues.bulk)) > 0, 20_000);
      const err = await bulk.result().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect(((err as WorkflowFailedError).cause?.cause as ApplicationFailure).type).toBe('TenantGone');
    } finally {
      await worker?.shutdown();
    }
  }, 90_000);
});
