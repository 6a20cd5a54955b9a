import { ApplicationFailure } from '@temporalio/common';
import type { Db } from '../src/db/knex';
import type { ObjectStorage } from '../src/infra/object-storage';
import { logger } from '../src/logger';
import type { MembershipLifecycles } from '../src/memberships/lifecycle';
import { SiteProvisioning, type ProvisioningState } from '../src/register/provisioning';
import { RegistrationRecords, requestError } from '../src/register/records';
import type { CommitOutcome, ErrorBody } from '../src/register/types';
import { REGISTER_FAILURES } from '../workflows/register';

/**
 * What leaves an activity goes into the workflow's history: only the error's kind and code.
 * The full error stays in the worker's log (and, for provisioning, in the registration's row).
 */
function sanitized(step: string, registrationId: number, err: unknown): ApplicationFailure {
  const body = requestError(err);
  const code = (err as { code?: unknown })?.code;
  const what = `${step} of registration ${registrationId} failed (${typeof code === 'string' ? `code ${code}` : (err as Error)?.name ?? 'error'})`;
  logger.warn({ err, registrationId, step }, 'registration step failed');
  return body ? ApplicationFailure.nonRetryable(what, REGISTER_FAILURES.refused) : ApplicationFailure.retryable(what, REGISTER_FAILURES.unavailable);
}

async function guarded<T>(step: string, registrationId: number, fn: () => Promise<T>, onRefused?: (body: ErrorBody) => Promise<void>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const body = requestError(err);
    if (body && onRefused) await onRefused(body).catch((e: unknown) => logger.error({ err: e, registrationId }, 'could not record the refusal'));
    throw sanitized(step, registrationId, err);
  }
}

/**
 * The activities of the register workflow: each one calls a service of src/register and
 * takes the registration id only (the request is read from its row).
 */
export function createRegisterActivities(deps: { db: Db; storage: ObjectStorage; lifecycles: MembershipLifecycles }) {
  const records = new RegistrationRecords(deps.db, deps.lifecycles);
  const provisioning = new SiteProvisioning(deps.db, deps.storage);
  return {
    /** Local activity: the records in one transaction (idempotent), or what the API's commit of them decided. */
    commitRegistration(registrationId: number): Promise<CommitOutcome> {
      return guarded('records transaction', registrationId, () => records.settle(registrationId));
    },
    /** The transaction could not run (database unreachable past the retries): a 503 the same key may retry, unless the row was decided meanwhile. */
    giveUpRegistration(registrationId: number): Promise<CommitOutcome> {
      return guarded('giving up', registrationId, () => records.giveUp(registrationId));
    },
    provisionSite(registrationId: number): Promise<void> {
      return guarded('site provisioning', registrationId, () => provisioning.provision(registrationId), (body) => provisioning.recordError(registrationId, 'provisionSite', body));
    },
    undoSiteProvisioning(registrationId: number): Promise<void> {
      return guarded('undoing site provisioning', registrationId, () => provisioning.undo(registrationId), (body) => provisioning.recordError(registrationId, 'undoSiteProvisioning', body));
    },
    recordProvisioning(registrationId: number, state: ProvisioningState): Promise<void> {
      return guarded('recording provisioning', registrationId, () => provisioning.record(registrationId, state));
    },
  };
}

export type RegisterActivities = ReturnType<typeof createRegisterActivities>;
