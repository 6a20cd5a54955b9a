import { ActivityFailure, ApplicationFailure, patched, proxyActivities, setWorkflowOptions } from '@temporalio/workflow';
import type { TenantActivities } from '../activities/tenants';

/**
 * Isolated ("sovereign") tenants: bootstrap, verify and teardown, one workflow each per
 * registry entry (ids tenant-{bootstrap,verify,teardown}-<tenant uid>). Every step is an
 * idempotent activity, so a worker that dies half way is replaced and the run resumes at
 * the step it was in; a run that failed is started again from the top and skips what is
 * already done.
 */
/**
 * Changes shipped through patched() (README "Shipping a workflow change"): runs started by older
 * code replay without them.
 */
export const TENANT_PATCHES = {
  /**
   * A run whose step gave up ends Failed (ApplicationFailure TenantOperationFailed, its details
   * the result below) after the registry recorded it, instead of Completed with state failed.
   */
  failRuns: 'tenant-fail-runs',
} as const;

/** The failure type of a tenant run that gave up; its details[0] is the TenantWorkflowResult. */
export const TENANT_OPERATION_FAILED = 'TenantOperationFailed';

// Activities heartbeat from real progress (a batch pushed, a file moved, a check done): a dead or
// stuck worker is noticed after heartbeatTimeout, and the step is retried (idempotent).
const steps = proxyActivities<TenantActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s', maximumAttempts: 5 },
});
// Teardown keeps trying longer: a database host that is briefly down must not leave half a tenant.
const teardownSteps = proxyActivities<TenantActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});
// Recording the outcome must not give up.
const bookkeeping = proxyActivities<TenantActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1s', maximumInterval: '1 minute' },
});

export interface TenantWorkflowInput {
  tenantId: number;
  siteId: number;
}

export interface TenantWorkflowResult {
  state: 'ready' | 'not_ready' | 'failed' | 'torn_down' | 'tearing_down';
  step?: string;
  error?: string;
}

function reason(err: unknown): string {
  if (err instanceof ActivityFailure && err.cause) return err.cause.message;
  if (err instanceof ApplicationFailure || err instanceof Error) return err.message;
  return String(err);
}

type Step = [name: string, run: (tenantId: number) => Promise<unknown>];

/**
 * Runs the steps in order. A step that gives up (its retries spent, or a non-retryable
 * failure) ends the run: the registry entry records the operation, the step and why, then the
 * run fails (TENANT_PATCHES.failRuns) so that operators find it among the Failed ones.
 */
async function runSteps(operation: 'bootstrap' | 'verify' | 'teardown', tenantId: number, list: Step[]): Promise<{ failed?: TenantWorkflowResult; last?: unknown }> {
  let last: unknown;
  for (const [step, run] of list) {
    try {
      last = await run(tenantId);
    } catch (err) {
      const message = reason(err);
      await bookkeeping.tenantMarkFailed({ tenantId, operation, step, message });
      const failed: TenantWorkflowResult = { state: operation === 'teardown' ? 'tearing_down' : operation === 'bootstrap' ? 'failed' : 'not_ready', step, error: message };
      if (patched(TENANT_PATCHES.failRuns)) {
        throw ApplicationFailure.create({ message: `Tenant ${operation} failed at step ${step}: ${message}`, type: TENANT_OPERATION_FAILED, nonRetryable: true, details: [failed] });
      }
      return { failed };
    }
  }
  return { last };
}

const verification: Step[] = [
  ['verification', steps.tenantChecksRunning],
  ['verification', steps.tenantVerify],
];
const readiness = (last: unknown): TenantWorkflowResult => ({ state: (last as { ready: boolean }).ready ? 'ready' : 'not_ready' });

export async function tenantBootstrap(input: TenantWorkflowInput): Promise<TenantWorkflowResult> {
  const out = await runSteps('bootstrap', input.tenantId, [
    ['registry', steps.tenantRegister],
    ['database', steps.tenantCreateDatabase],
    ['schema', steps.tenantCreateSchema],
    ['users', steps.tenantProvisionUsers],
    ['push', steps.tenantPushData],
    ['files_and_routing', steps.tenantCreateFilesAndRoute],
    ...verification,
  ]);
  return out.failed ?? readiness(out.last);
}

export async function tenantVerifyWorkflow(input: TenantWorkflowInput): Promise<TenantWorkflowResult> {
  const out = await runSteps('verify', input.tenantId, verification);
  return out.failed ?? readiness(out.last);
}

export async function tenantTeardown(input: TenantWorkflowInput): Promise<TenantWorkflowResult> {
  const out = await runSteps('teardown', input.tenantId, [
    ['pull_back', teardownSteps.tenantPullBack],
    ['drop_role', teardownSteps.tenantDropRole],
    ['drop_database', teardownSteps.tenantDropDatabase],
    ['remove_files_and_routing', teardownSteps.tenantRemoveFilesAndRoute],
    ['registry', teardownSteps.tenantMarkTornDown],
  ]);
  return out.failed ?? { state: 'torn_down' };
}

/**
 * Carries out a tenant's queued push work (workflow tenant-push-<uid>, started by the push
 * relay; a running one is joined): today the `users` jobs the database queues when a
 * tenant's users change in the network. A failure leaves the jobs failed, which verify's
 * sovereign_push check reports.
 */
export async function tenantPush(input: TenantWorkflowInput): Promise<{ synced: boolean }> {
  for (let round = 0; round < 10; round++) {
    const out = await steps.tenantSyncUsers(input.tenantId);
    if (!out.synced) return { synced: round > 0 };
  }
  return { synced: true };
}

// Worker versioning (README "Shipping a workflow change"): a run lasts seconds to minutes, so it
// finishes on the worker version it started on (PINNED): it never meets code it did not start
// with, and the old version's workers stay until its runs are done.
setWorkflowOptions({ versioningBehavior: 'PINNED' }, tenantBootstrap);
setWorkflowOptions({ versioningBehavior: 'PINNED' }, tenantVerifyWorkflow);
setWorkflowOptions({ versioningBehavior: 'PINNED' }, tenantTeardown);
setWorkflowOptions({ versioningBehavior: 'PINNED' }, tenantPush);
