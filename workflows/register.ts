import {
  ApplicationFailure,
  CancellationScope,
  proxyActivities,
  proxyLocalActivities,
  setWorkflowOptions,
} from '@temporalio/workflow';
import type { RegisterActivities } from '../activities/register';
import type { CommitOutcome, RegistrationIds } from '../src/register/types';

/** Failure types of the register workflow and its activities (their messages carry ids and codes only). */
export const REGISTER_FAILURES = {
  /** The workflow's end when nothing was written: the row holds the 503. */
  notCommitted: 'RegistrationNotCommitted',
  /** An activity step that cannot succeed for this registration (not retried). */
  refused: 'RegistrationStepRefused',
  /** Infrastructure trouble an activity step met (retried, within its policy). */
  unavailable: 'RegistrationStepUnavailable',
  /** Provisioning failed after the answer and was undone. */
  provisioningFailed: 'ProvisioningFailed',
  /** Provisioning failed and its compensation could not finish: an operator must look (registrations.provisioning). */
  compensationFailed: 'CompensationFailed',
} as const;

/** Only the registration's id: the request (personal data) stays in PostgreSQL. */
export interface RegisterWorkflowInput {
  registrationId: number;
}

export interface RegisterWorkflowResult {
  status: 'completed' | 'rejected';
  ids: RegistrationIds | null;
}

// The records transaction: one local activity inside the workflow task (no task-queue round
// trip). The API runs the same idempotent transaction right after starting this workflow and
// answers from it; whichever runs first writes, the other reads what it wrote. Short tries:
// its lock and statement timeouts (3 s, 10 s) bound each one; then the workflow gives up and
// the registration's row answers a 503 that the same Idempotency-Key may retry.
const transaction = proxyLocalActivities<RegisterActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '5 seconds', maximumAttempts: 6, nonRetryableErrorTypes: [REGISTER_FAILURES.refused] },
});

// After the answer: files and copies that may take long, on any worker.
const steps = proxyActivities<RegisterActivities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5, nonRetryableErrorTypes: [REGISTER_FAILURES.refused] },
});

// Compensations retry longer, but not forever: one that cannot finish ends in
// registrations.provisioning = 'compensation_failed' and a failed workflow (an operator looks).
const undo = proxyActivities<RegisterActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10, nonRetryableErrorTypes: [REGISTER_FAILURES.refused] },
});

// Recording an outcome in the row: a short write, retried for about a quarter of an hour.
const bookkeeping = proxyActivities<RegisterActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 20 },
});

const fail = (type: string, message: string) => ApplicationFailure.create({ type, message, nonRetryable: true });

/**
 * One registration: the records in one transaction (a local activity; usually the API has
 * committed them already and it reads them), then the work that
 * continues after the answer, each step with its compensation registered before it runs.
 */
export async function register({ registrationId }: RegisterWorkflowInput): Promise<RegisterWorkflowResult> {
  let outcome: CommitOutcome;
  try {
    outcome = await transaction.commitRegistration(registrationId);
  } catch {
    // Recorded in the row, unless the API's own commit got there first (then that outcome).
    outcome = await bookkeeping.giveUpRegistration(registrationId);
  }
  if (outcome.status === 'rejected') return { status: 'rejected', ids: null };
  // Failed, so the same Idempotency-Key may start it again (ALLOW_DUPLICATE_FAILED_ONLY).
  if (outcome.status !== 'committed') throw fail(REGISTER_FAILURES.notCommitted, `Registration ${registrationId} was not written (${outcome.status}).`);

  // The search attributes (customer, site, products) were set at the start: the ids are reserved before it.
  if (outcome.provision) await afterTheAnswer(registrationId);
  return { status: 'completed', ids: outcome.ids };
}

/**
 * Steps after the answer, as a saga: each compensation is pushed BEFORE its step runs (a step
 * whose work landed but whose reply was lost is undone too; undoing what never ran does
 * nothing). A failure runs them in reverse, not cancellable; the outcome is recorded in the
 * registration's row and the workflow fails, so operators see it.
 */
async function afterTheAnswer(registrationId: number): Promise<void> {
  const compensations: (() => Promise<void>)[] = [];
  try {
    compensations.push(() => undo.undoSiteProvisioning(registrationId));
    await steps.provisionSite(registrationId);
    await bookkeeping.recordProvisioning(registrationId, 'done');
  } catch {
    await CancellationScope.nonCancellable(async () => {
      try {
        for (const compensate of compensations.reverse()) await compensate();
      } catch {
        await bookkeeping.recordProvisioning(registrationId, 'compensation_failed');
        throw fail(REGISTER_FAILURES.compensationFailed, `Provisioning of registration ${registrationId} failed and could not be undone; see registrations.provisioning_error.`);
      }
      await bookkeeping.recordProvisioning(registrationId, 'compensated');
    });
    throw fail(REGISTER_FAILURES.provisioningFailed, `Provisioning of registration ${registrationId} failed and was undone; see registrations.provisioning_error.`);
  }
}

// Worker versioning (README "Shipping a workflow change"): a run lasts seconds to minutes, so it
// finishes on the worker version it started on (PINNED): it never meets code it did not start
// with, and the old version's workers stay until its runs are done.
setWorkflowOptions({ versioningBehavior: 'PINNED' }, register);
