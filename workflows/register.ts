import { ActivityFailure, ApplicationFailure, CancellationScope, proxyActivities, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { SA_CUSTOMER_ID, SA_SITE_ID } from './register-search-attributes';
import type { ErrorBody, RegisterActivities, RegisterInput, RegisterResult } from '../activities/register';

export type { RegisterInput, RegisterResult } from '../activities/register';

/** The workflow type name (the handler starts it by this name). */
export const REGISTER_WORKFLOW = 'register';


// Steps: infrastructure trouble (database briefly down) is retried; business failures are
// thrown non-retryable by the activities and end the saga at once.
// A step is a few short queries: a worker that died in one is noticed after 10 s.
const steps = proxyActivities<RegisterActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 8 },
});

// Compensations must finish: retried until they do.
const undo = proxyActivities<RegisterActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

const ERROR_TYPE = 'RegistrationFailed';

/** The caller's error body of a failed step. */
function errorBody(err: unknown): ErrorBody {
  let cause: unknown = err;
  if (cause instanceof ActivityFailure) cause = cause.cause;
  if (cause instanceof ApplicationFailure && cause.details?.length) {
    const d = cause.details[0] as ErrorBody;
    if (d && typeof d.code === 'string') return d;
  }
  const message = cause instanceof Error ? cause.message : String(cause);
  return { code: 'wu_rest_registration_failed', message: `The registration failed and was rolled back: ${message}`, data: { status: 400 } };
}

/**
 * /register as a saga: customer, cart, membership, payment, site, then the requested
 * statuses. Each step pushes its compensation as soon as it succeeded; a failure runs them in
 * reverse (not cancellable) and fails the workflow with a RegistrationFailed error whose
 * details[0] is the contract's error body.
 */
export async function register(input: RegisterInput): Promise<RegisterResult> {
  const { workflowId } = workflowInfo();
  const compensations: (() => Promise<void>)[] = [];
  try {
    const customer = await steps.registerCustomer(workflowId, input);
    compensations.push(() => undo.undoCustomer(workflowId));
    upsertSearchAttributes([{ key: SA_CUSTOMER_ID, value: customer.customer_id }]);
    upsertMemo({ customer_id: customer.customer_id });

    const cart = await steps.priceCart(input.cart);

    const membershipId = await steps.registerMembership(workflowId, input, customer.customer_id, cart);
    compensations.push(() => undo.undoMembership(workflowId));

    const paymentId = await steps.registerPayment(workflowId, input, customer.customer_id, membershipId, cart);
    compensations.push(() => undo.undoPayment(workflowId));

    let siteId: number | null = null;
    if (input.site) {
      siteId = await steps.registerSite(workflowId, input, customer.customer_id, membershipId);
      compensations.push(() => undo.undoSite(workflowId));
      upsertSearchAttributes([{ key: SA_SITE_ID, value: siteId }]);
      upsertMemo({ site_id: siteId });
    }

    // Status changes need no compensation of their own: undoing the records removes them.
    await steps.applyRegistrationStatuses(workflowId, membershipId, paymentId, input);
    return await steps.finishRegistration(workflowId, { customer_id: customer.customer_id, membership_id: membershipId, payment_id: paymentId, site_id: siteId });
  } catch (err) {
    const body = errorBody(err);
    await CancellationScope.nonCancellable(async () => {
      for (const compensate of compensations.reverse()) await compensate();
      await undo.failRegistration(workflowId, input, body);
    });
    throw ApplicationFailure.create({ message: body.message, type: ERROR_TYPE, nonRetryable: true, details: [body] });
  }
}
