/**
 * `npm run record:histories -- [jest test files…]`: records the event histories of real
 * workflow runs into test/histories/, for the replay test (test/replay.test.ts).
 *
 * Starts a Temporal dev server of its own (in memory), runs the given test files (default: the
 * ones that drive every workflow type, crashes included) against it, then keeps, for every
 * workflow type, one history per outcome seen:
 * - each close status (Completed, Failed, Terminated, …) and still Running (e.g. a translation
 *   job parked at approval);
 * - one that received a signal, one that took an update;
 * - one where an activity ran again (a worker killed mid-activity, or an attempt that failed);
 * - one where a durable timer fired (a wait that timed out).
 * Files are named <workflow type>-<what>.json: the history as historyToJSON writes it (the
 * format of `temporal workflow show --output json`), plus the run's `workflowId` (replay gives
 * the workflow the id it ran under). Re-running overwrites those names;
 * review the diff, then commit the histories with the workflow change that needed them.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Connection, WorkflowClient } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import type { temporal } from '@temporalio/proto';
import { findTemporalBinary, freePort, startTemporalDevServer, TEMPORAL_MISSING } from '../src/infra/temporal-server';

const ROOT = path.resolve(__dirname, '..');
const OUT = path.join(ROOT, 'test', 'histories');
const DEFAULT_TESTS = [
  'test/register.test.ts',
  'test/register-crash.test.ts',
  'test/tenants.test.ts',
  'test/tenants-crash.test.ts',
  'test/translations-pipeline.test.ts',
  'test/translations-crash.test.ts',
  'test/translations-bounded.test.ts',
  'test/translations-decisions.test.ts',
  'test/domain-check.test.ts',
  'test/chat-realtime.test.ts',
];
// eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when a history is read
const EventType = (): typeof temporal.api.enums.v1.EventType => require('@temporalio/proto').temporal.api.enums.v1.EventType;

/** What a history shows besides its status: signals received, activities retried after a timeout. */
function traits(history: temporal.api.history.v1.IHistory): string[] {
  const t = EventType();
  const events = history.events ?? [];
  const out: string[] = [];
  if (events.some((e) => e.eventType === t.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)) out.push('signaled');
  if (events.some((e) => e.eventType === t.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)) out.push('activity-timed-out');
  // A durable wait that ran out (e.g. a translation job nobody approved in time).
  if (events.some((e) => e.eventType === t.EVENT_TYPE_TIMER_FIRED)) out.push('timer-fired');
  // A later attempt of an activity: its worker was killed (heartbeat timeout) or it failed and was retried.
  if (events.some((e) => (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1)) out.push('activity-retried');
  if (events.some((e) => e.eventType === t.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)) out.push('updated');
  return out;
}

async function main(): Promise<void> {
  const tests = process.argv.slice(2).length ? process.argv.slice(2) : DEFAULT_TESTS;
  const binary = findTemporalBinary(process.env.TEMPORAL_CLI, ROOT);
  if (!binary) throw new Error(TEMPORAL_MISSING);
  const server = await startTemporalDevServer({ binary, port: await freePort(), logFile: path.join(ROOT, '.tmp', 'temporal-record.log'), timeoutMs: 90_000 });
  try {
    process.stdout.write(`temporal dev server at ${server.address}; running ${tests.join(' ')}\n`);
    const run = spawnSync(process.execPath, [require.resolve('jest/bin/jest'), '--runInBand', ...tests], {
      cwd: ROOT,
      stdio: 'inherit',
      env: { ...process.env, TEMPORAL_ADDRESS: server.address },
    });
    if (run.status !== 0) throw new Error(`the tests failed (exit ${run.status}): histories not recorded`);

    const connection = await Connection.connect({ address: server.address });
    const client = new WorkflowClient({ connection, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default' });
    const kept = new Map<string, { workflowId: string; history: temporal.api.history.v1.IHistory }>();
    for await (const wf of client.list()) {
      const handle = client.getHandle(wf.workflowId, wf.runId);
      const history = await handle.fetchHistory();
      const status = wf.status.name.toLowerCase();
      for (const what of [status, ...traits(history)]) {
        const name = `${wf.type}-${what}`;
        if (!kept.has(name)) kept.set(name, { workflowId: wf.workflowId, history });
      }
    }
    await connection.close();
    fs.mkdirSync(OUT, { recursive: true });
    for (const [name, { workflowId, history }] of [...kept].sort()) {
      // The workflow id rides along: replay needs one, and the file says which run it was.
      const json = JSON.parse(historyToJSON(history as temporal.api.history.v1.History));
      fs.writeFileSync(path.join(OUT, `${name}.json`), `${JSON.stringify({ workflowId, ...json }, null, 1)}\n`);
      process.stdout.write(`  ${name}.json (${history.events?.length ?? 0} events)\n`);
    }
    process.stdout.write(`${kept.size} histories in ${path.relative(ROOT, OUT)}\n`);
  } finally {
    await server.stop();
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
});
