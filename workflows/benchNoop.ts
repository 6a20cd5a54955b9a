import { proxyActivities } from '@temporalio/workflow';

/**
 * Bench only (`npm run bench:register`): `count` no-op activities in sequence, with the same
 * activity options as the register workflow's steps, so the bench can set /register against
 * the bare cost of the same number of Temporal round trips.
 */
const { benchNoopActivity } = proxyActivities<{ benchNoopActivity(): Promise<void> }>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 8 },
});

export async function benchNoop(count: number): Promise<number> {
  for (let i = 0; i < count; i++) await benchNoopActivity();
  return count;
}
