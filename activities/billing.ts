import { ApplicationFailure } from '@temporalio/common';
import { GatewayRefused } from '../src/billing/http-gateway';
import { RenewalService, type BillingConfig, type BillingState, type ChargeResult, type RenewOutcome } from '../src/billing/renewals';
import type { Db } from '../src/db/knex';
import type { MembershipLifecycles } from '../src/memberships/lifecycle';

/** A charge attempt's outcome as the workflow sees it: a decline (or a gateway that never answered) is `failed`. */
export type ChargeOutcome = ChargeResult;

/**
 * The membership lifecycle's activities (workflows/membershipLifecycle.ts): ids and times in,
 * plain outcomes out; every rule is in src/billing/renewals.ts. `at`: the workflow's clock.
 */
export function createBillingActivities(deps: { db: Db; lifecycles: MembershipLifecycles; config: BillingConfig }) {
  const renewals = new RenewalService(deps.db, deps.lifecycles, deps.config);
  return {
    readBillingState(input: { membershipId: number }): Promise<BillingState> {
      return renewals.readState(input.membershipId);
    },
    renewMembership(input: { membershipId: number; dueAt: number; at: number }): Promise<RenewOutcome> {
      return renewals.renew(input.membershipId, input.dueAt, input.at);
    },
    async chargeRenewal(input: { paymentId: number; attempt: number }): Promise<ChargeOutcome> {
      try {
        return await renewals.charge(input.paymentId, input.attempt);
      } catch (err) {
        // A request the gateway refuses (or no gateway configured) is not asked again.
        if (err instanceof GatewayRefused) throw ApplicationFailure.nonRetryable(err.message, 'GatewayRefused');
        throw err;
      }
    },
    holdUnpaid(input: { membershipId: number; dueAt: number; paymentId: number }): Promise<void> {
      return renewals.hold(input.membershipId, input.dueAt, input.paymentId);
    },
    expireUnpaid(input: { membershipId: number; dueAt: number; paymentId: number }): Promise<void> {
      return renewals.expireUnpaid(input.membershipId, input.dueAt, input.paymentId);
    },
  };
}

export type BillingActivities = ReturnType<typeof createBillingActivities>;
