import { isPgError, PG_UNIQUE_VIOLATION } from '../db/errors';
import type { Db } from '../db/knex';
import { Decimal, minorUnits, moneyOut } from '../db/money';
import type { Row, TableService } from '../db/table-service';
import { isoDate } from '../db/timestamps';
import { ApiError, invalidParams, notFoundItem } from '../http/errors';
import type { LifecycleEffect, MembershipLifecycles } from '../memberships/lifecycle';
import { recordMembershipEvents } from '../memberships/service';
import { statusesThatMayBecome } from '../memberships/status';
import { recordPaymentEvents } from './service';

/** A payment takes at most this many refunds (its list is answered whole). */
export const MAX_REFUNDS_PER_PAYMENT = 100;
/** Payments that can be refunded: money was taken. */
const REFUNDABLE = new Set(['completed', 'partially-refunded']);

export interface RefundInput {
  amount: string;
  reason: string;
  gateway_refund_id?: string | null;
  /** The original's cancel_membership_on_refund: the payment's membership is cancelled with the refund. */
  cancel_membership_on_refund: boolean;
}

export interface RefundRecord {
  id: number;
  payment_id: number;
  amount: number;
  reason: string;
  gateway_refund_id: string | null;
  membership_cancelled: boolean;
  date_created: string | null;
}

const toRecord = (r: Row): RefundRecord => ({
  id: Number(r.id),
  payment_id: Number(r.payment_id),
  amount: moneyOut(r.amount)!,
  reason: r.reason,
  gateway_refund_id: r.gateway_refund_id,
  membership_cancelled: r.membership_cancelled,
  date_created: isoDate(r.date_created),
});

/**
 * Refunds of a payment, records of their own. A refund and the payment's new refund_total and
 * status are written in one transaction, with the payment row locked: concurrent refunds queue
 * up, and together they never refund more than the total.
 */
export class RefundService {
  constructor(
    private readonly db: Db,
    private readonly payments: TableService,
    private readonly memberships: TableService,
    private readonly lifecycles: MembershipLifecycles,
  ) {}

  async list(paymentId: number): Promise<RefundRecord[]> {
    const rows = await this.db('payment_refunds').where({ payment_id: paymentId }).orderBy('id').limit(MAX_REFUNDS_PER_PAYMENT);
    if (rows.length === 0 && !(await this.db('payments').where({ id: paymentId }).first('id'))) throw notFoundItem('payment');
    return rows.map(toRecord);
  }

  async refund(paymentId: number, input: RefundInput): Promise<{ refund: RefundRecord; payment: Row }> {
    let effect: LifecycleEffect | null = null;
    try {
      const out = await this.db.transaction(async (trx) => {
        const payment = await trx('payments').where({ id: paymentId }).forUpdate().first('id', 'status', 'total', 'refund_total', 'currency', 'membership_id');
        if (!payment) throw notFoundItem('payment');
        if (!REFUNDABLE.has(payment.status)) {
          throw new ApiError(409, 'wu_rest_payment_not_refundable', `Payment ${paymentId} is ${payment.status}: only completed and partially-refunded payments can be refunded.`, { payment_status: payment.status });
        }
        const amount = new Decimal(input.amount);
        const digits = minorUnits(payment.currency);
        if (amount.decimalPlaces() > digits) {
          throw invalidParams({ amount: `must have at most ${digits} decimal place${digits === 1 ? '' : 's'} in ${payment.currency}.` });
        }
        if (amount.lte(0)) throw invalidParams({ amount: 'must be more than 0.' });
        const left = new Decimal(payment.total).minus(payment.refund_total);
        if (amount.gt(left)) {
          throw invalidParams({ amount: `${amount.toFixed()} is more than what is left to refund: ${left.toFixed(digits)} of ${new Decimal(payment.total).toFixed(digits)} ${payment.currency}.` });
        }
        const { n } = (await trx('payment_refunds').where({ payment_id: paymentId }).count({ n: '*' }).first()) as { n: string };
        if (Number(n) >= MAX_REFUNDS_PER_PAYMENT) {
          throw invalidParams({ amount: `payment ${paymentId} has ${MAX_REFUNDS_PER_PAYMENT} refunds already, the most a payment takes.` });
        }
        let membershipCancelled = false;
        if (input.cancel_membership_on_refund && payment.membership_id !== null) {
          const before = await trx('memberships').where({ id: payment.membership_id }).whereIn('status', statusesThatMayBecome('cancelled')).forUpdate().first();
          if (before) {
            const [written] = await trx('memberships')
              .where({ id: before.id })
              .update({ status: 'cancelled', auto_renew: false, date_cancellation: trx.fn.now(), date_modified: trx.fn.now() })
              .returning('*');
            // The lifecycle rule (a waiting lifecycle is woken after the commit: it ends).
            const after = await this.lifecycles.changed(trx, before, written);
            effect = this.lifecycles.effectOf(before, after);
            await recordMembershipEvents(trx, { before, after, record: this.memberships.toRecord(after) });
            membershipCancelled = true;
          }
        }
        const [row] = await trx('payment_refunds')
          .insert({ payment_id: paymentId, amount: amount.toFixed(), reason: input.reason, gateway_refund_id: input.gateway_refund_id ?? null, membership_cancelled: membershipCancelled })
          .returning('*');
        const refundTotal = new Decimal(payment.refund_total).plus(amount);
        const [after] = await trx('payments')
          .where({ id: paymentId })
          .update({ refund_total: refundTotal.toFixed(), status: refundTotal.gte(payment.total) ? 'refunded' : 'partially-refunded', date_modified: trx.fn.now() })
          .returning('*');
        const record = (await this.payments.get(paymentId, { db: trx }))!;
        await recordPaymentEvents(trx, { before: payment, after, record });
        return { refund: toRecord(row), payment: record };
      });
      if (effect) await this.lifecycles.afterCommit(effect);
      return out;
    } catch (err) {
      if (isPgError(err, PG_UNIQUE_VIOLATION)) throw invalidParams({ gateway_refund_id: `gateway_refund_id ${input.gateway_refund_id} is already recorded for a refund of payment ${paymentId}.` });
      throw err;
    }
  }
}
