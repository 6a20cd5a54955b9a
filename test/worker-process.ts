import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { TestContext } from './helpers';

/** Polls `fn` every 100 ms until it is true; throws after `ms`. */
export async function until(fn: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A Temporal worker in a process of its own (test/fixtures/worker.ts) on the test file's
 * database and task queue, for the crash tests: they kill it with SIGKILL mid-workflow.
 * Resolves once it polls. One process: tsx as a loader, not its CLI (which would run the
 * script in a grandchild that SIGKILL would not reach).
 */
export function spawnWorkerProcess(ctx: TestContext, env: Record<string, string> = {}): Promise<ChildProcess> {
  return spawnWorkerScript('worker.ts', ctx, env);
}

/** The same with another script of test/fixtures/ (bench-worker.ts: the bench worker). */
export async function spawnWorkerScript(script: string, ctx: TestContext, env: Record<string, string> = {}): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'fixtures', script)], {
    cwd: path.resolve(__dirname, '..'),
    env: {
      ...process.env,
      ...env,
      DATABASE_URL: ctx.dbUrl,
      TEMPORAL_ADDRESS: process.env.HF_TEST_TEMPORAL_ADDRESS,
      TEMPORAL_TASK_QUEUE: ctx.config.TEMPORAL_TASK_QUEUE,
      LOG_LEVEL: 'silent',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += String(d)));
  child.stderr!.on('data', (d) => (out += String(d)));
  await until(async () => out.includes('worker ready') || child.exitCode !== null, 60_000);
  if (!out.includes('worker ready')) throw new Error(`the worker process did not start:\n${out}`);
  return child;
}

/** SIGKILL, then wait until the process is gone. */
export async function killWorkerProcess(child: ChildProcess): Promise<void> {
  child.kill('SIGKILL');
  await until(async () => child.exitCode !== null || child.signalCode !== null, 10_000);
}
