/**
 * The worker's Prometheus metrics (WORKER_METRICS_PORT / WORKER_METRICS_HOST): the SDK's own
 * temporal_* series, served at /metrics by the worker process. A process of its own: the SDK's
 * runtime (and so its exporter) is installed once per process.
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { benchNoop } from '../bench/workflows';
import { loadConfig } from '../src/config';
import { ApiError } from '../src/http/errors';
import { freePort } from '../src/infra/temporal-server';
import { TemporalGateway } from '../src/temporal/gateway';
import { metricsBindAddress } from '../src/temporal/worker';
import { WorkflowIds } from '../src/temporal/workflow-ids';
import { spawnWorkerProcess } from './bench-workers';
import { createTestContext, type TestContext } from './helpers';
import { killWorkerProcess, until } from './worker-process';

test('the bind address: host and port, IPv6 bracketed, port 0 turns the exporter off', () => {
  expect(metricsBindAddress(loadConfig({}))).toBe('127.0.0.1:9464');
  expect(metricsBindAddress(loadConfig({ WORKER_METRICS_HOST: '::1', WORKER_METRICS_PORT: '9000' }))).toBe('[::1]:9000');
  expect(metricsBindAddress(loadConfig({ WORKER_METRICS_PORT: '0' }))).toBeNull();
});

describe('a worker process with WORKER_METRICS_PORT set', () => {
  let ctx: TestContext;
  let child: ChildProcess | undefined;
  let port: number;
  beforeAll(async () => {
    ctx = await createTestContext();
    port = await freePort();
    child = await spawnWorkerProcess(ctx, { WORKER_METRICS_PORT: String(port), WORKER_METRICS_HOST: '127.0.0.1' });
  }, 90_000);
  afterAll(async () => {
    if (child) await killWorkerProcess(child);
    await ctx.close();
  });

  const scrape = async () => {
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
  };

  test('serves the SDK metrics: slots and pollers per task queue, and workflows completed', async () => {
    const gateway = new TemporalGateway(ctx.temporal, null, { callTimeoutMs: 10_000, ids: new WorkflowIds(ctx.db, ctx.config.WORKFLOW_ID_PREFIX) });
    try {
      const handle = await gateway.start(benchNoop, { workflowId: `metrics-${Date.now()}`, args: [2], summary: 'metrics' }, () => new ApiError(503, 'x', 'unreachable'));
      expect(await handle.result()).toBe(2);
    } finally {
      gateway.close();
    }
    let last = { status: 0, type: '', text: '' };
    await until(async () => {
      last = await scrape().catch(() => last);
      return /^temporal_workflow_completed\{[^}]*task_queue="hostflow-test-[^"]+"/m.test(last.text);
    }, 20_000).catch(() => undefined);
    expect(last.status).toBe(200);
    expect(last.type).toMatch(/^text\/plain/);
    expect(last.text).toMatch(new RegExp(`^temporal_workflow_completed\\{[^}]*task_queue="${ctx.config.TEMPORAL_TASK_QUEUE}"[^}]*\\} 1$`, 'm'));
    expect(last.text).toMatch(new RegExp(`^temporal_activity_execution_latency_count\\{[^}]*task_queue="${ctx.config.TEMPORAL_TASK_QUEUE}"`, 'm'));
    // Both queues' workers report their slots.
    for (const queue of [ctx.config.TEMPORAL_TASK_QUEUE, `${ctx.config.TEMPORAL_TASK_QUEUE}-bulk`]) {
      expect(last.text).toMatch(new RegExp(`^temporal_worker_task_slots_available\\{[^}]*task_queue="${queue}"`, 'm'));
    }
  }, 60_000);

  test('a port already taken stops the worker at its start, naming the setting', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    try {
      const busy = (taken.address() as net.AddressInfo).port;
      await expect(spawnWorkerProcess(ctx, { WORKER_METRICS_PORT: String(busy) })).rejects.toThrow(
        new RegExp(`worker metrics \\(WORKER_METRICS_HOST:WORKER_METRICS_PORT = 127\\.0\\.0\\.1:${busy}\\): .*Address already in use.*or 0 to turn them off`),
      );
    } finally {
      taken.close();
    }
  }, 90_000);
});
