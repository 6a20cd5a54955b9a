import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { Decimal, moneyOut } from '../db/money';
import { TableService, type RecordChange, type Refs, type Row, type Trx, type WriteContext } from '../db/table-service';
import { recordEvents } from '../events/record';
import { invalidParams } from '../http/errors';
import { dueDateOf, type MembershipLifecycles } from '../memberships/lifecycle';
import { createMembershipService } from '../memberships/service';
import { addPeriod } from '../products/pricing';
import { PAYMENT_STATUSES, type LineItem } from './schema';

export const paymentListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.gateway_payment_id', 't.gateway'],
  searchTable: 'payments',
  table: 'payments',
  idBounds: 'payments',
  counted: { table: 'payments', by: { 't.status': 'status' } },
  sortable: {
    id: 't.id',
    total: 't.total',
    status: 't.status',
    invoice_number: 't.invoice_number',
    date_created: 't.date_created',
    date_modified: 't.date_modified',
    customer_id: 't.customer_id',
  },
  filters: {
    status: { column: 't.status', type: { enum: PAYMENT_STATUSES } },
    customer_id: { column: 't.customer_id', type: 'int' },
    membership_id: { column: 't.membership_id', type: 'int' },
    product_id: { column: 't.product_id', type: 'int' },
    gateway: { column: 't.gateway', type: 'string' },
    currency: { column: 't.currency', type: 'upper' },
    invoice_number: { column: 't.invoice_number', type: 'int' },
  },
};

/** Largest amount a numeric(15,4) column holds. */
const MAX_MONEY = new Decimal('99999999999.9999');

/**
 * The next invoice number. The counter row stays locked until the write's transaction ends,
 * so concurrent completions queue up: no duplicates, and a rolled-back write gives its
 * number back (no gaps).
 */
async function nextInvoiceNumber(trx: Trx): Promise<number> {
  const r = await trx.raw('UPDATE invoice_counter SET value = value + 1 WHERE id = 1 RETURNING value');
  if (r.rows.length !== 1) throw new Error('invoice_counter row 1 is missing');
  return Number(r.rows[0].value);
}

/** Line items with an unknown product_id, and the membership of another customer: 400. */
async function checkRelations(trx: Trx, cols: Row, refs: Refs, current?: Row): Promise<void> {
  const errors: Record<string, string> = {};
  if (cols.line_items !== undefined) {
    const items = JSON.parse(cols.line_items) as LineItem[];
    const ids = [...new Set(items.map((i) => i.product_id).filter((id): id is number => id !== undefined && id !== null))];
    if (ids.length > 0) {
      const found = new Set((await trx('products').whereIn('id', ids).select('id')).map((r: Row) => Number(r.id)));
      const bad = items.flatMap((item, i) => (item.product_id != null && !found.has(item.product_id) ? [`line_items[${i}].product_id ${item.product_id}`] : []));
      if (bad.length > 0) errors.line_items = `${bad.join(', ')} does not match any product.`;
    }
  }
  if ('membership_id' in cols || 'customer_id' in cols) {
    const membershipId = 'membership_id' in cols ? cols.membership_id : current?.membership_id;
    const customerId = Number(cols.customer_id ?? current?.customer_id);
    if (membershipId != null) {
      // Fetched by the reference check when the write sets it.
      const m = refs.membership_id ?? (await trx('memberships').where({ id: membershipId }).first('customer_id'));
      if (m && Number(m.customer_id) !== customerId) {
        errors.membership_id = `membership_id ${membershipId} belongs to customer ${m.customer_id}, not to customer ${customerId}.`;
      }
    }
  }
  if (current && cols.parent_id != null && Number(cols.parent_id) === Number(current.id)) {
    errors.parent_id = 'parent_id cannot be the payment itself.';
  }
  if (Object.keys(errors).length) throw invalidParams(errors);
}

/**
 * refund_total is the sum of the payment's refunds (payment_refunds): a write may repeat it
 * (clients that send back the whole record) but not change it.
 */
function keepRefundTotal(cols: Row, current?: Row): void {
  if (cols.refund_total === undefined) return;
  if (!new Decimal(cols.refund_total).eq(current?.refund_total ?? 0)) {
    throw invalidParams({ refund_total: 'is the sum of the payment\'s refunds and cannot be set: record a refund with POST /payments/{id}/refunds.' });
  }
  delete cols.refund_total;
}

/** Store unit prices as JSON numbers (the validated text is exact to 4 decimals). */
function normaliseLineItems(cols: Row): LineItem[] | undefined {
  if (cols.line_items === undefined) return undefined;
  const items = JSON.parse(cols.line_items) as LineItem[];
  cols.line_items = JSON.stringify(items.map((i) => ({ ...i, unit_price: Number(i.unit_price) })));
  return items;
}

const REFUNDED: ReadonlySet<string> = new Set(['refunded', 'partially-refunded']);

/**
 * A payment's events, for a change by the API, /register or a refund: payment_created; then
 * payment_completed when it becomes completed; payment_refunded when its refund_total grows or
 * it becomes (partially) refunded.
 */
export async function recordPaymentEvents(trx: Trx, change: RecordChange): Promise<void> {
  const { before, after, record } = change;
  const slugs: string[] = [];
  if (!before) slugs.push('payment_created');
  if (after.status === 'completed' && before?.status !== 'completed') slugs.push('payment_completed');
  const refunded = new Decimal(after.refund_total ?? 0).gt(before?.refund_total ?? 0) || (REFUNDED.has(after.status) && !REFUNDED.has(before?.status));
  if (refunded) slugs.push('payment_refunded');
  await recordEvents(trx, slugs, Number(after.id), record, change.last);
}

/** Statuses of a payment whose money was taken: a renewal payment in one of them is paid. */
export const PAID_STATUSES: ReadonlySet<string> = new Set(['completed', 'refunded', 'partially-refunded']);
/** Membership statuses a renewal payment's completion (re)activates from. */
const BILLABLE = new Set(['active', 'trialing', 'on-hold']);

/**
 * A membership's payment that becomes completed bills the membership (the rule in one place,
 * for the API, /register and the renewal gateways), in the payment's transaction, through the
 * memberships service (its state machine, events and lifecycle):
 * - a renewal payment (renewal_period_start set) of the period the membership is due at: the
 *   period moves on from that due date (not from now): date_expiration = due + one period,
 *   times_billed + 1, date_renewed = now, and a trialing or on-hold membership becomes active.
 *   A payment completed again (after a refund) or for a period that was moved by hand changes
 *   nothing: the due date no longer matches.
 * - the first payment of an active recurring membership with no date_expiration starts its
 *   first period: date_expiration = now + one period, times_billed 1.
 * Returns the membership before and after (null: unchanged).
 */
export async function billMembership(trx: Trx, memberships: TableService, payment: Row): Promise<{ before: Row; after: Row } | null> {
  if (payment.membership_id == null) return null;
  const before: Row | undefined = await trx('memberships').where({ id: payment.membership_id }).forUpdate().first();
  if (!before) return null;
  const period = (from: Date) => addPeriod(from, Number(before.duration), String(before.duration_unit)).toISOString();
  let input: Row;
  if (payment.renewal_period_start != null) {
    const start = new Date(payment.renewal_period_start);
    // On hold, the due date is the unpaid period's start whatever the status: it is the trial's end or the expiration.
    const due = before.status === 'on-hold' ? [before.date_trial_end, before.date_expiration].map((d) => (d == null ? null : new Date(d).getTime())) : [dueDateOf(before)?.getTime() ?? null];
    if (!BILLABLE.has(before.status) || !due.includes(start.getTime())) return null;
    input = { date_expiration: period(start), date_renewed: new Date().toISOString(), times_billed: Number(before.times_billed) + 1, ...(before.status === 'active' ? {} : { status: 'active' }) };
  } else if (before.recurring && before.status === 'active' && before.date_expiration == null && Number(before.times_billed) === 0) {
    input = { date_expiration: period(new Date()), times_billed: 1 };
  } else {
    return null;
  }
  const after = (await memberships.update(Number(before.id), input, trx))!;
  return { before, after: (await trx('memberships').where({ id: after.id }).first()) as Row };
}

/**
 * Payments. `lifecycles`: the memberships' lifecycle rule (src/memberships/lifecycle.ts), for
 * the membership a completed payment bills and the renewal payments whose status changes.
 */
export function createPaymentService(db: Db, lifecycles: MembershipLifecycles): TableService {
  const memberships = createMembershipService(db, lifecycles);
  /**
   * After a payment's write: a payment that became completed bills its membership; a renewal
   * payment whose status changed wakes the membership's lifecycle (after the commit).
   */
  const afterWrite = async (trx: Trx, before: Row | null, after: Row, write: WriteContext): Promise<void> => {
    if (before?.status === after.status) return;
    const billed = after.status === 'completed' ? await billMembership(trx, memberships, after) : null;
    if (!write.ownTransaction) return;
    if (billed) write.afterCommit(() => lifecycles.afterCommit(lifecycles.effectOf(billed.before, billed.after)));
    else if (after.renewal_period_start != null && after.membership_id != null) {
      const m = await trx('memberships').where({ id: after.membership_id }).first('workflow_id');
      if (m?.workflow_id) write.afterCommit(() => lifecycles.signal(m.workflow_id));
    }
  };
  return new TableService(db, {
    table: 'payments',
    model: 'payment',
    columns: {
      customer_id: 'int',
      membership_id: 'int',
      product_id: 'int',
      parent_id: 'int',
      currency: 'text',
      subtotal: 'money',
      refund_total: 'money',
      discount_total: 'money',
      discount_code: 'text',
      tax_total: 'money',
      total: 'money',
      status: 'text',
      gateway: 'text',
      gateway_payment_id: 'text',
      line_items: 'json',
      invoice_number: 'int',
      renewal_period_start: 'timestamp',
      migrated_from_id: 'int',
    },
    listSpec: paymentListSpec,
    currencyAmounts: ['subtotal', 'discount_total', 'tax_total', 'total'],
    references: {
      customer_id: { table: 'customers', label: 'customer' },
      membership_id: { table: 'memberships', label: 'membership' },
      product_id: { table: 'products', label: 'product' },
      parent_id: { table: 'payments', label: 'payment' },
    },
    uniques: {
      payments_invoice_number_unique: { field: 'invoice_number', message: 'invoice_number is already used by another payment.' },
      payments_gateway_payment_id_unique: { field: 'gateway_payment_id', message: 'gateway_payment_id is already recorded for another payment of this gateway.' },
    },
    hooks: {
      changed: recordPaymentEvents,
      async beforeCreate(trx, cols, refs) {
        keepRefundTotal(cols);
        await checkRelations(trx, cols, refs);
        const items = normaliseLineItems(cols);
        // Without a subtotal, the line items make it; without a total, the parts make it.
        if (cols.subtotal === undefined && items && items.length > 0) {
          const subtotal = items.reduce((sum, i) => sum.plus(new Decimal(i.unit_price).times(i.quantity)), new Decimal(0));
          if (subtotal.gt(MAX_MONEY)) throw invalidParams({ line_items: `line_items add up to more than ${MAX_MONEY.toFixed()}.` });
          cols.subtotal = subtotal.toFixed();
        }
        if (cols.total === undefined) {
          const total = Decimal.max(0, new Decimal(cols.subtotal ?? 0).minus(cols.discount_total ?? 0).plus(cols.tax_total ?? 0));
          if (total.gt(MAX_MONEY)) throw invalidParams({ total: `total (subtotal - discount_total + tax_total) must not exceed ${MAX_MONEY.toFixed()}.` });
          cols.total = total.toFixed();
        }
        if (cols.status === 'completed') cols.invoice_number = await nextInvoiceNumber(trx);
      },
      async afterCreate(trx, row, write) {
        await afterWrite(trx, null, row, write);
      },
      async afterUpdate(trx, before, after, write) {
        await afterWrite(trx, before, after, write);
      },
      async beforeUpdate(trx, current, cols, refs) {
        keepRefundTotal(cols, current);
        await checkRelations(trx, cols, refs, current);
        normaliseLineItems(cols);
        if (cols.status === 'completed' && current.invoice_number === null) cols.invoice_number = await nextInvoiceNumber(trx);
      },
    },
    decorate(_row, rec) {
      if (Array.isArray(rec.line_items)) {
        rec.line_items = rec.line_items.map((i: Row) => (typeof i?.unit_price === 'string' ? { ...i, unit_price: moneyOut(i.unit_price) } : i));
      }
    },
  });
}
