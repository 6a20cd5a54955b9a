import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { TenantActivities } from '../activities/tenants';

/**
 * Isolated ("sovereign") tenants: bootstrap, verify and teardown, one workflow each per
 * registry entry (ids tenant-{bootstrap,verify,teardown}-<tenant uid>). Every step is an
 * idempotent activity, so a worker that dies half way is replaced and the run resumes at
 * the step it was in; a run that failed is started again from the top and skips what is
 * already done.
 */
// Activities heartbeat every few seconds: a dead worker is noticed after heartbeatTimeout.
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

export async function tenantBootstrap(input: TenantWorkflowInput): Promise<TenantWorkflowResult> {
  const id = input.tenantId;
  let step = 'registry';
  try {
    await steps.tenantRegister(id);
    step = 'database';
    await steps.tenantCreateDatabase(id);
    step = 'schema';
    await steps.tenantCreateSchema(id);
    step = 'users';
    await steps.tenantProvisionUsers(id);
    step = 'push';
    await steps.tenantPushData(id);
    step = 'files_and_routing';
    await steps.tenantCreateFilesAndRoute(id);
    step = 'verification';
    await steps.tenantChecksRunning(id);
    const verified = await steps.tenantVerify(id);
    return { state: verified.ready ? 'ready' : 'not_ready' };
  } catch (err) {
    const message = reason(err);
    await bookkeeping.tenantMarkFailed({ tenantId: id, operation: 'bootstrap', step, message });
    return { state: 'failed', step, error: message };
  }
}

export async function tenantVerifyWorkflow(input: TenantWorkflowInput): Promise<TenantWorkflowResult> {
  try {
    await steps.tenantChecksRunning(input.tenantId);
    const verified = await steps.tenantVerify(input.tenantId);
    return { state: verified.ready ? 'ready' : 'not_ready' };
  } catch (err) {
    const message = reason(err);
    await bookkeeping.tenantMarkFailed({ tenantId: input.tenantId, operation: 'verify', step: 'verification', message });
    return { state: 'not_ready', step: 'verification', error: message };
  }
}

export async function tenantTeardown(input: TenantWorkflowInput): Promise<TenantWorkflowResult> {
  const id = input.tenantId;
  let step = 'pull_back';
  try {
    await teardownSteps.tenantPullBack(id);
    step = 'drop_role';
    await teardownSteps.tenantDropRole(id);
    step = 'drop_database';
    await teardownSteps.tenantDropDatabase(id);
    step = 'remove_files_and_routing';
    await teardownSteps.tenantRemoveFilesAndRoute(id);
    step = 'registry';
    await teardownSteps.tenantMarkTornDown(id);
    return { state: 'torn_down' };
  } catch (err) {
    const message = reason(err);
    await bookkeeping.tenantMarkFailed({ tenantId: id, operation: 'teardown', step, message });
    return { state: 'tearing_down', step, error: message };
  }
}
