import { z } from 'zod';
import { currency, money } from '../http/money';
import { allOptional, fields } from '../http/validation';

export const PAYMENT_STATUSES = ['pending', 'completed', 'refunded', 'partially-refunded', 'partially-paid', 'failed', 'cancelled', 'draft'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

/** One line of a payment: what was bought, how many, at what unit price. */
export const lineItem = z.strictObject({
  name: fields.label(250),
  description: fields.text(1000).optional(),
  quantity: fields.int().min(1).max(1_000_000),
  unit_price: money(),
  product_id: fields.ref().optional(),
});
export type LineItem = z.output<typeof lineItem>;

/** A line as a payment answers it: the unit price as a JSON number. */
export const lineItemRecord = z.strictObject({
  name: z.string(),
  description: z.string().optional(),
  quantity: z.int(),
  unit_price: z.number(),
  product_id: z.int().nullable().optional(),
});

const paymentFields = {
  customer_id: fields.id(),
  membership_id: fields.ref(),
  product_id: fields.ref(),
  parent_id: fields.ref(),
  currency: currency(),
  subtotal: money(),
  refund_total: money(),
  discount_total: money(),
  discount_code: fields.text(100).nullable().describe('The discount code the payment was sold with (as /register records it); null for none.'),
  tax_total: money(),
  total: money(),
  status: z.enum(PAYMENT_STATUSES),
  gateway: fields.text(100),
  gateway_payment_id: fields.text(255),
  line_items: z.array(lineItem).max(1000),
};

// invoice_number is read-only: it is given by the service when a payment is completed; so is
// renewal_period_start: the start of the billing period a renewal payment pays for (set by the
// membership's lifecycle when it creates the renewal; null for any other payment).
export const createPaymentSchema = z.strictObject({
  ...allOptional(paymentFields),
  customer_id: paymentFields.customer_id,
});

export const updatePaymentSchema = z.strictObject(allOptional(paymentFields));
