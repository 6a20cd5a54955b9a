/**
 * Test workers that run the bench workflows too (bench/worker.ts), for the tests that start
 * benchNoop: the production worker no longer has it. Same names as the production ones
 * (test/helpers.ts, test/worker-process.ts), so such a test only imports them from here.
 */
import type { ChildProcess } from 'node:child_process';
import { startBenchWorker } from '../bench/worker';
import type { RunningWorker } from '../src/temporal/worker';
import type { TestContext } from './helpers';
import { spawnWorkerScript } from './worker-process';

export function startTestWorker(ctx: Pick<TestContext, 'config' | 'db'>): Promise<RunningWorker> {
  return startBenchWorker({ address: ctx.config.TEMPORAL_ADDRESS!, namespace: ctx.config.TEMPORAL_NAMESPACE, taskQueue: ctx.config.TEMPORAL_TASK_QUEUE, db: ctx.db, config: ctx.config });
}

export function spawnWorkerProcess(ctx: TestContext, env: Record<string, string> = {}): Promise<ChildProcess> {
  return spawnWorkerScript('bench-worker.ts', ctx, env);
}
