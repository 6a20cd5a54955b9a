import { condition, continueAsNew, defineSignal, log, patched, proxyActivities, proxyLocalActivities, setHandler, setWorkflowOptions, workflowInfo } from '@temporalio/workflow';
import type { BillingActivities, ChargeOutcome } from '../activities/billing';

/**
 * The membership changed (status, dates, plan, amount, auto_renew, gateway) or its renewal
 * payment did: the workflow reads the row again. Sent after commit, fire and forget; a lost
 * one is harmless (the workflow reads again at the due date it knew).
 */
export const membershipChangedSignal = defineSignal('membershipChanged');

export interface MembershipLifecycleInput {
  membershipId: number;
}

export interface MembershipLifecycleResult {
  membershipId: number;
  /** Why the lifecycle ended: expired (auto_renew off, billing_cycles reached, or unpaid past the on-hold days), cancelled, or the state it found (pending, not recurring, no due date, deleted). */
  outcome: string;
}

/** The changes made to the lifecycle since runs were first recorded, each behind patched() (README "Shipping a workflow change"). */
export const LIFECYCLE_PATCHES = {
  /** The row's reads are local activities (runs from before it read through regular ones). */
  localReads: 'lifecycle-local-reads',
} as const;

// The database steps: short, and retried until they run (a renewal must not be skipped because
// the database was away for a while).
const STEP_RETRY = { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '5 minutes' } as const;
const steps = proxyActivities<BillingActivities>({ startToCloseTimeout: '1 minute', retry: STEP_RETRY });
// The read of the row (half of a renewal's activities) as a local activity: run by the worker
// within the workflow task and recorded as one marker, instead of three events and two trips
// through the server's task queue. It only reads, so running it again (a lost task) is harmless.
const reads = proxyLocalActivities<BillingActivities>({ startToCloseTimeout: '1 minute', retry: STEP_RETRY });
// A charge: a gateway that does not answer (5xx, timeout, connection refused) is tried again
// with a backoff; after the attempts the charge counts as failed (dunning goes on). A decline is
// the gateway's answer, a result: never retried here. Its timeout is the gateway's and a margin
// (from the configuration, through the billing state): a charge whose worker was killed is
// asked again that soon, under the same idempotency key.
const charges = (timeoutMs: number) =>
  proxyActivities<BillingActivities>({
    startToCloseTimeout: timeoutMs,
    retry: { initialInterval: '5s', backoffCoefficient: 2, maximumInterval: '10 minutes', maximumAttempts: 8 },
  });

/** Reads of the row per run before it continues as new (bounds the history when signals keep coming). */
const MAX_STEPS_PER_RUN = 200;

/**
 * One recurring membership's billing, for as long as it lives (README "Billing: renewals"): each
 * cycle it sleeps until the due date (the trial's end while trialing, else date_expiration),
 * woken early by membershipChanged; at the due date a renewal payment is created (or the
 * membership expires: auto_renew off, billing_cycles reached) and collected through the
 * membership's gateway, with dunning retries, then on-hold, then expired. A completed renewal
 * ends the run: it continues as new for the next cycle (history bounded per cycle).
 *
 * The workflow keeps no billing state of its own: every decision starts from the row read
 * again (readBillingState), and the time comes from the workflow's clock (given to the steps
 * as `at`), so a restarted or replayed run decides the same.
 */
export async function membershipLifecycle(input: MembershipLifecycleInput): Promise<MembershipLifecycleResult> {
  const { membershipId } = input;
  let woken = false;
  setHandler(membershipChangedSignal, () => {
    woken = true;
  });
  /** Sleeps until `at` (workflow time) or a signal, whichever is first. */
  const waitUntil = async (at: number) => {
    const ms = at - Date.now();
    if (ms > 0) await condition(() => woken, ms);
  };
  // Set once this run reached a due date: when the membership is next scheduled, the cycle is over.
  let cycled = false;
  // The charge attempts this run made (`payment:attempt`); a new run tries the current attempt
  // again under the same idempotency key, which the gateway answers as before.
  const tried = new Set<string>();
  for (let step = 0; ; step++) {
    if (step >= MAX_STEPS_PER_RUN || workflowInfo().continueAsNewSuggested) return continueAsNew<typeof membershipLifecycle>(input);
    // Reset before the read: a signal that arrives after it wakes the next wait at once.
    woken = false;
    const s = await (patched(LIFECYCLE_PATCHES.localReads) ? reads : steps).readBillingState({ membershipId });
    const now = Date.now();
    if (s.phase === 'done') return { membershipId, outcome: s.reason };
    if (s.phase === 'scheduled') {
      if (cycled) return continueAsNew<typeof membershipLifecycle>(input);
      if (s.dueAt > now) {
        await waitUntil(s.dueAt);
        continue;
      }
      cycled = true;
      const r = await steps.renewMembership({ membershipId, dueAt: s.dueAt, at: now });
      if (r.outcome === 'expired') return { membershipId, outcome: 'expired' };
      continue;
    }
    // collecting: the renewal payment of the period due at s.dueAt is open.
    cycled = true;
    const lastAttemptAt = s.dueAt + s.retryOffsetsMs[s.retryOffsetsMs.length - 1];
    if (s.status === 'on-hold') {
      const expireAt = lastAttemptAt + s.onHoldMs;
      if (now < expireAt) {
        await waitUntil(expireAt);
        continue;
      }
      await steps.expireUnpaid({ membershipId, dueAt: s.dueAt, paymentId: s.paymentId });
      continue;
    }
    if (s.paymentStatus !== 'pending') {
      // Marked failed or cancelled by hand: no more attempts.
      await steps.holdUnpaid({ membershipId, dueAt: s.dueAt, paymentId: s.paymentId });
      continue;
    }
    if (s.gateway === 'manual') {
      // Paid by hand through the API (the payment's completion signals): wait, up to the dunning schedule's end.
      if (now < lastAttemptAt) {
        await waitUntil(lastAttemptAt);
        continue;
      }
      await steps.holdUnpaid({ membershipId, dueAt: s.dueAt, paymentId: s.paymentId });
      continue;
    }
    // A charging gateway: attempt i is due at dueAt + retryOffsetsMs[i].
    let attempt = s.retryOffsetsMs.length - 1;
    while (attempt > 0 && s.dueAt + s.retryOffsetsMs[attempt] > now) attempt--;
    const key = `${s.paymentId}:${attempt}`;
    if (!tried.has(key)) {
      tried.add(key);
      let outcome: ChargeOutcome;
      try {
        outcome = await charges(s.chargeTimeoutMs).chargeRenewal({ paymentId: s.paymentId, attempt });
      } catch (err) {
        // The gateway did not answer through every retry: this attempt failed.
        outcome = { status: 'failed', reason: `no answer from the gateway: ${(err as Error).message}` };
      }
      if (outcome.status === 'failed') log.info('renewal charge failed', { membershipId, paymentId: s.paymentId, attempt, reason: outcome.reason });
      continue;
    }
    if (attempt + 1 < s.retryOffsetsMs.length) {
      await waitUntil(s.dueAt + s.retryOffsetsMs[attempt + 1]);
      continue;
    }
    await steps.holdUnpaid({ membershipId, dueAt: s.dueAt, paymentId: s.paymentId });
  }
}

// A lifecycle waits for months: it moves to the current worker version at its next workflow
// task, so every change to what it does goes behind patched() (README "Shipping a workflow change").
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, membershipLifecycle);
