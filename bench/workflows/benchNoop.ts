import { proxyActivities, proxyLocalActivities, setWorkflowOptions } from '@temporalio/workflow';

type BenchActivities = { benchNoopActivity(): Promise<void> };

/**
 * Bench only (`npm run bench:register`): `count` no-op activities in sequence, with the
 * activity options the saga /register used to run, as the reference cost of seven Temporal
 * round trips.
 */
const { benchNoopActivity } = proxyActivities<BenchActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 8 },
});

export async function benchNoop(count: number): Promise<number> {
  for (let i = 0; i < count; i++) await benchNoopActivity();
  return count;
}

// The register workflow's local-activity options.
const local = proxyLocalActivities<BenchActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 6 },
});

/** Bench only: the bare cost /register is measured against: one workflow running ONE no-op local activity. */
export async function benchLocal(): Promise<number> {
  await local.benchNoopActivity();
  return 1;
}

// Worker versioning (README "Shipping a workflow change"): a bench run lasts seconds, so it
// finishes on the worker version it started on (PINNED): it never meets code it did not start
// with, and the old version's workers stay until its runs are done.
setWorkflowOptions({ versioningBehavior: 'PINNED' }, benchNoop);
setWorkflowOptions({ versioningBehavior: 'PINNED' }, benchLocal);
