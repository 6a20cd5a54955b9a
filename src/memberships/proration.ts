import { Decimal, minorUnits } from '../db/money';
import { addPeriod } from '../products/pricing';

/**
 * Proration of a plan change: pure arithmetic (decimal.js, each amount rounded half up to the
 * currency's minor unit), no clock and no database. plan-change.ts feeds it a locked row.
 */

/** When the current period began: date_renewed, else date_activated, when it lies within one period before date_expiration; else date_expiration minus one period. */
export function currentPeriodStart(m: { date_renewed: Date | null; date_activated: Date | null; date_expiration: Date; duration: number; duration_unit: string }): Date {
  const onePeriodBefore = addPeriod(m.date_expiration, -m.duration, m.duration_unit);
  const began = m.date_renewed ?? m.date_activated;
  return began && began < m.date_expiration && began >= onePeriodBefore ? began : onePeriodBefore;
}

export interface ProrationInput {
  currency: string;
  now: Date;
  /** The membership as it is: its recurring amount and its current period. */
  current: { amount: Decimal.Value; start: Date; end: Date };
  /** The new recurring price, one amount per line (plan, add-ons), and the period it is for. */
  next: { amounts: Decimal.Value[]; duration: number; duration_unit: string };
  /** The new period differs from the current one: it starts now. */
  restart: boolean;
  /**
   * Nothing to prorate: a trial (nothing was paid for the current period) or a change at the
   * period's end. No credit, no cost, the period kept.
   */
  unprorated: boolean;
}

export interface Proration {
  period_start: Date;
  period_end: Date;
  /** Seconds in the current period, and those left of it now. */
  period_seconds: number;
  remaining_seconds: number;
  /** The current amount for the unused time. */
  credit: Decimal;
  /** The new price for the rest of the period (the whole new period when it restarts): the sum of `costs`. */
  cost: Decimal;
  /** Each line's part of `cost`, rounded on its own. */
  costs: Decimal[];
  /** max(0, cost − credit): charged now. */
  amount_due: Decimal;
  /** max(0, credit − cost): kept for the renewals. */
  credit_left: Decimal;
  /** The membership's date_expiration after the change: unchanged, or now + the new period. */
  expiration: Date;
}

const SECOND = 1000;

/** `amount` × part / whole, rounded to the currency's minor unit (0 when the whole is empty). */
export function share(amount: Decimal.Value, part: number, whole: number, currency: string): Decimal {
  if (whole <= 0 || part <= 0) return new Decimal(0);
  return new Decimal(amount).times(part).dividedBy(whole).toDecimalPlaces(minorUnits(currency), Decimal.ROUND_HALF_UP);
}

/** A change applied now: the credit for the unused time, the new plan's cost, what is due and what credit is left. */
export function prorate(input: ProrationInput): Proration {
  const { current, next, now, currency } = input;
  const periodSeconds = Math.max(0, Math.floor((current.end.getTime() - current.start.getTime()) / SECOND));
  const remaining = Math.min(periodSeconds, Math.max(0, Math.floor((current.end.getTime() - now.getTime()) / SECOND)));
  const digits = minorUnits(currency);
  const credit = input.unprorated ? new Decimal(0) : share(current.amount, remaining, periodSeconds, currency);
  let costs: Decimal[];
  let expiration = current.end;
  if (input.unprorated) costs = next.amounts.map(() => new Decimal(0));
  else if (input.restart) {
    costs = next.amounts.map((a) => new Decimal(a).toDecimalPlaces(digits, Decimal.ROUND_HALF_UP));
    expiration = addPeriod(now, next.duration, next.duration_unit);
  } else costs = next.amounts.map((a) => share(a, remaining, periodSeconds, currency));
  const cost = costs.reduce((sum, c) => sum.plus(c), new Decimal(0));
  return {
    period_start: current.start,
    period_end: current.end,
    period_seconds: periodSeconds,
    remaining_seconds: remaining,
    credit,
    cost,
    costs,
    amount_due: Decimal.max(0, cost.minus(credit)),
    credit_left: Decimal.max(0, credit.minus(cost)),
    expiration,
  };
}

/** What a renewal of `amount` charges with `balance` of credit: the credit taken first, never below zero. */
export function chargeWithCredit(amount: Decimal.Value, balance: Decimal.Value): { credit_used: Decimal; amount_due: Decimal; balance_left: Decimal } {
  const used = Decimal.min(amount, balance);
  return { credit_used: used, amount_due: new Decimal(amount).minus(used), balance_left: new Decimal(balance).minus(used) };
}
