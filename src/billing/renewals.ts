import type { Knex } from 'knex';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { Decimal, minorUnits } from '../db/money';
import type { Row, TableService } from '../db/table-service';
import { logger } from '../logger';
import { dueDateOf, type MembershipLifecycles } from '../memberships/lifecycle';
import { applyScheduledChange, takeCredit } from '../memberships/plan-change';
import { createMembershipService } from '../memberships/service';
import { createPaymentService, PAID_STATUSES } from '../payments/service';
import { GatewayRefused, HttpPaymentGateway, type ChargeAnswer } from './http-gateway';
import { renewalCharge } from './renewal-charge';

export type BillingConfig = Pick<Config, 'BILLING_DUNNING_DAYS' | 'BILLING_ON_HOLD_DAYS' | 'BILLING_HTTP_GATEWAY_URL' | 'BILLING_HTTP_GATEWAY_TIMEOUT_MS'>;

const DAY_MS = 86_400_000;
/** A charge activity's time beyond the gateway's timeout (reading and writing the payment). */
const CHARGE_MARGIN_MS = 5000;
/** The gateway that charges by itself (README "Billing: renewals"); any other gateway name is paid by hand (`manual`). */
export const HTTP_GATEWAY = 'http';

/** What the lifecycle workflow decides from (a JSON value: it is recorded in the workflow's history). */
export type BillingState =
  /** No (more) billing: cancelled, expired, pending, not recurring, no due date, deleted, or a renewal closed without being applied. */
  | { phase: 'done'; reason: string }
  /** Active or trialing, next billed at dueAt (ms since the epoch). */
  | { phase: 'scheduled'; dueAt: number }
  /** The renewal payment of the period due at dueAt is open (not paid). */
  | {
      phase: 'collecting';
      dueAt: number;
      status: string;
      paymentId: number;
      paymentStatus: string;
      gateway: 'manual' | 'http';
      /** When each charge attempt is due, after dueAt: 0, then BILLING_DUNNING_DAYS. */
      retryOffsetsMs: number[];
      onHoldMs: number;
      /** How long one charge activity may run before Temporal tries it again (the gateway's timeout and a margin): how soon a charge whose worker was killed is asked again. */
      chargeTimeoutMs: number;
    };

export type RenewOutcome = { outcome: 'payment'; paymentId: number } | { outcome: 'expired'; reason: string } | { outcome: 'moved' };

export type ChargeResult = { status: 'succeeded'; chargeId: string } | { status: 'failed'; reason: string };

const time = (v: unknown) => (v == null ? null : new Date(v as string).getTime());

/**
 * The steps of a membership's lifecycle (workflows/membershipLifecycle.ts), each one
 * transaction with the membership row locked (FOR UPDATE), so a step, its retry and an API
 * write to the same membership are serialised; every write goes through the memberships and
 * payments services (state machine, events, the payment-completion rule).
 */
export class RenewalService {
  private readonly memberships: TableService;
  private readonly payments: TableService;
  private readonly gateway: HttpPaymentGateway | null;

  constructor(
    private readonly db: Db,
    lifecycles: MembershipLifecycles,
    private readonly config: BillingConfig,
  ) {
    this.memberships = createMembershipService(db, lifecycles);
    this.payments = createPaymentService(db, lifecycles);
    this.gateway = config.BILLING_HTTP_GATEWAY_URL ? new HttpPaymentGateway(config.BILLING_HTTP_GATEWAY_URL, config.BILLING_HTTP_GATEWAY_TIMEOUT_MS) : null;
  }

  /** The renewal payment of the membership's period starting at `periodStart`. */
  private renewalOf(db: Knex | Knex.Transaction, membershipId: number, periodStart: Date): Promise<Row | undefined> {
    return db('payments').where({ membership_id: membershipId, renewal_period_start: periodStart }).first('id', 'status', 'renewal_period_start');
  }

  async readState(membershipId: number): Promise<BillingState> {
    const m: Row | undefined = await this.db('memberships').where({ id: membershipId }).first();
    if (!m) return { phase: 'done', reason: 'deleted' };
    if (!m.recurring) return { phase: 'done', reason: 'not recurring' };
    const collecting = (dueAt: number, p: Row): BillingState => ({
      phase: 'collecting',
      dueAt,
      status: m.status,
      paymentId: Number(p.id),
      paymentStatus: p.status,
      gateway: m.gateway === HTTP_GATEWAY ? 'http' : 'manual',
      retryOffsetsMs: [0, ...this.config.BILLING_DUNNING_DAYS.map((d) => Math.round(d * DAY_MS))],
      onHoldMs: Math.round(this.config.BILLING_ON_HOLD_DAYS * DAY_MS),
      chargeTimeoutMs: this.config.BILLING_HTTP_GATEWAY_TIMEOUT_MS + CHARGE_MARGIN_MS,
    });
    if (m.status === 'on-hold') {
      // Waiting for the payment of its last renewal, until it expires; on hold by hand without one: nothing to bill.
      const last: Row | undefined = await this.db('payments').where({ membership_id: membershipId }).whereNotNull('renewal_period_start').orderBy('renewal_period_start', 'desc').first('id', 'status', 'renewal_period_start');
      const start = time(last?.renewal_period_start);
      if (last && !PAID_STATUSES.has(last.status) && (start === time(m.date_expiration) || start === time(m.date_trial_end))) return collecting(start!, last);
      return { phase: 'done', reason: 'on-hold' };
    }
    if (m.status !== 'active' && m.status !== 'trialing') return { phase: 'done', reason: m.status };
    const due = dueDateOf(m);
    if (!due) return { phase: 'done', reason: 'no due date' };
    const p = await this.renewalOf(this.db, membershipId, due);
    if (!p) return { phase: 'scheduled', dueAt: due.getTime() };
    if (!PAID_STATUSES.has(p.status)) return collecting(due.getTime(), p);
    // Paid, yet the period did not move (completed while the membership could not be billed): left to a person.
    logger.warn({ membershipId, paymentId: p.id }, 'renewal payment is paid but the membership was not renewed by it; the lifecycle ends');
    return { phase: 'done', reason: `renewal payment ${p.id} is ${p.status} but was not applied` };
  }

  /**
   * At the due date, in one transaction with the membership locked: the membership expires at
   * the end of its period (auto_renew off, or billing_cycles reached), or its renewal payment is
   * created `pending` (once: an existing one for the period is answered; the unique index
   * (membership_id, renewal_period_start) backs this up). `moved`: it is no longer due at dueAt.
   */
  async renew(membershipId: number, dueAt: number, at: number): Promise<RenewOutcome> {
    return this.db.transaction(async (trx) => {
      const m: Row | undefined = await trx('memberships').where({ id: membershipId }).forUpdate().first();
      if (!m || (m.status !== 'active' && m.status !== 'trialing') || !m.recurring) return { outcome: 'moved' };
      const due = dueDateOf(m);
      if (!due || due.getTime() !== dueAt || dueAt > at) return { outcome: 'moved' };
      const cycles = Number(m.billing_cycles);
      const finished = !m.auto_renew ? 'auto_renew is off' : cycles > 0 && Number(m.times_billed) >= cycles ? `billing_cycles (${cycles}) reached` : null;
      if (finished) {
        await this.memberships.update(membershipId, { status: 'expired' }, trx);
        return { outcome: 'expired', reason: finished };
      }
      const existing = await this.renewalOf(trx, membershipId, due);
      if (existing) return { outcome: 'payment', paymentId: Number(existing.id) };
      // A plan change scheduled for the period's end (README "Plan changes") takes effect now,
      // before the new period is priced: its plan, amount, period and add-ons are what renews.
      const changed = await applyScheduledChange(trx, membershipId, this.memberships);
      const terms: Row = changed ? (await trx('memberships').where({ id: membershipId }).first())! : m;
      const charge = await renewalCharge(trx, terms);
      // Credit a downgrade left (credit_balance) is taken first, as a discount of the payment.
      const credit = await takeCredit(trx, membershipId, charge.total);
      const used = new Decimal(credit.credit_used);
      const total = new Decimal(credit.amount_due);
      const payment = await this.payments.create(
        {
          customer_id: Number(terms.customer_id),
          membership_id: membershipId,
          product_id: Number(terms.plan_id),
          currency: terms.currency,
          // Nothing left to pay (the credit covered it): paid at once, which moves the period on.
          status: total.isZero() ? 'completed' : 'pending',
          gateway: terms.gateway ?? 'manual',
          renewal_period_start: due.toISOString(),
          ...charge,
          // As a plan change's payment has it: subtotal the period's price, the credit in discount_total.
          ...(used.gt(0) ? { discount_total: new Decimal(charge.discount_total).plus(used).toFixed(), total: total.toFixed() } : {}),
        },
        trx,
      );
      return { outcome: 'payment', paymentId: Number(payment.id) };
    });
  }

  /**
   * Charges a renewal payment through the http gateway (attempt `attempt` of its dunning
   * schedule, the idempotency key `renewal-<payment>-<attempt>`: an activity retried, or a
   * worker killed after the gateway charged, asks again under the same key and gets the same
   * answer, so the customer is charged once), then completes the payment on success (the
   * payments rule moves the membership on). Not pending any more: nothing is charged.
   * GatewayUnavailable is thrown (the activity's retries); a decline is a result.
   */
  async charge(paymentId: number, attempt: number): Promise<ChargeResult> {
    const p: Row | undefined = await this.db('payments as p')
      .leftJoin('customers as c', 'c.id', 'p.customer_id')
      .leftJoin('users as u', 'u.id', 'c.user_id')
      .where('p.id', paymentId)
      .first('p.id', 'p.status', 'p.total', 'p.currency', 'p.customer_id', 'p.gateway_payment_id', 'u.email');
    if (!p) return { status: 'failed', reason: `payment ${paymentId} was deleted` };
    if (p.status === 'completed') return { status: 'succeeded', chargeId: p.gateway_payment_id ?? '' };
    if (p.status !== 'pending') return { status: 'failed', reason: `payment ${paymentId} is ${p.status}` };
    if (!this.gateway) throw new GatewayRefused('BILLING_HTTP_GATEWAY_URL is not set: memberships with gateway http cannot be charged');
    const answer: ChargeAnswer = await this.gateway.charge({
      paymentId,
      // In the currency's minor unit, as gateways take amounts (USD 2.50, JPY 500, KWD 1.250).
      amount: new Decimal(p.total).toFixed(minorUnits(String(p.currency).toUpperCase())),
      currency: String(p.currency).toUpperCase(),
      customer: { id: Number(p.customer_id), email: p.email ?? null },
      idempotencyKey: `renewal-${paymentId}-${attempt}`,
    });
    if (answer.status === 'failed') return { status: 'failed', reason: answer.reason };
    await this.complete(paymentId, answer.id);
    return { status: 'succeeded', chargeId: answer.id };
  }

  /** The payment completed with the gateway's charge id (once: a completed payment is left as it is). */
  private async complete(paymentId: number, chargeId: string): Promise<void> {
    await this.db.transaction(async (trx) => {
      const p = await trx('payments').where({ id: paymentId }).forUpdate().first('status');
      if (!p || p.status !== 'pending') return;
      await this.payments.update(paymentId, { status: 'completed', gateway_payment_id: chargeId }, trx);
    });
  }

  /**
   * The renewal was not paid through the dunning schedule (or its payment was failed or
   * cancelled by hand): the membership goes on-hold (its event), and a charged payment still
   * pending is marked failed. Only while the membership is still due at dueAt (an API write
   * racing this step wins or loses as a whole: the row is locked).
   */
  async hold(membershipId: number, dueAt: number, paymentId: number): Promise<void> {
    await this.db.transaction(async (trx) => {
      // The payment first, then the membership: the order of a payment's completion (no deadlock with one racing this step).
      const p = await trx('payments').where({ id: paymentId }).forUpdate().first('status');
      const m: Row | undefined = await trx('memberships').where({ id: membershipId }).forUpdate().first();
      if (!m || (m.status !== 'active' && m.status !== 'trialing') || dueDateOf(m)?.getTime() !== dueAt) return;
      if (p && PAID_STATUSES.has(p.status)) return;
      await this.memberships.update(membershipId, { status: 'on-hold' }, trx);
      if (p?.status === 'pending' && m.gateway === HTTP_GATEWAY) await this.payments.update(paymentId, { status: 'failed' }, trx);
    });
  }

  /** Still on-hold and unpaid BILLING_ON_HOLD_DAYS after the last attempt: the membership expires, its renewal payment still pending is cancelled. */
  async expireUnpaid(membershipId: number, dueAt: number, paymentId: number): Promise<void> {
    await this.db.transaction(async (trx) => {
      const p = await trx('payments').where({ id: paymentId }).forUpdate().first('status', 'renewal_period_start');
      const m: Row | undefined = await trx('memberships').where({ id: membershipId }).forUpdate().first();
      if (!m || m.status !== 'on-hold') return;
      if (!p || PAID_STATUSES.has(p.status) || time(p.renewal_period_start) !== dueAt) return;
      await this.memberships.update(membershipId, { status: 'expired' }, trx);
      if (p.status === 'pending') await this.payments.update(paymentId, { status: 'cancelled' }, trx);
    });
  }
}
