import { ApiError } from '../http/errors';
import type { MembershipStatus } from './schema';

/**
 * The membership's state machine: the statuses each status may change to (staying the same is
 * always allowed). Creation may start in any status (records moved over from elsewhere). The
 * README's table is this one.
 */
export const MEMBERSHIP_TRANSITIONS: Record<MembershipStatus, readonly MembershipStatus[]> = {
  pending: ['active', 'trialing', 'on-hold', 'cancelled', 'expired'],
  trialing: ['active', 'on-hold', 'cancelled', 'expired'],
  active: ['on-hold', 'cancelled', 'expired'],
  'on-hold': ['active', 'trialing', 'cancelled', 'expired'],
  // Back to active is a reactivation: the cancellation is cleared (below).
  cancelled: ['active', 'expired'],
  expired: ['active'],
};

/** The statuses that may change to `to` (for a write that moves many rows at once). */
export function statusesThatMayBecome(to: MembershipStatus): MembershipStatus[] {
  return (Object.keys(MEMBERSHIP_TRANSITIONS) as MembershipStatus[]).filter((from) => from !== to && MEMBERSHIP_TRANSITIONS[from].includes(to));
}

/** 409 wu_rest_membership_invalid_status_transition naming both statuses, unless `from` may become `to`. */
export function checkTransition(id: number, from: MembershipStatus, to: MembershipStatus): void {
  if (from === to || MEMBERSHIP_TRANSITIONS[from].includes(to)) return;
  const allowed = MEMBERSHIP_TRANSITIONS[from];
  throw new ApiError(
    409,
    'wu_rest_membership_invalid_status_transition',
    `Membership ${id} cannot go from ${from} to ${to}; from ${from} it can become ${allowed.length ? allowed.join(', ') : 'nothing else'}.`,
    { from, to, allowed: [...allowed] },
  );
}
