import { z } from 'zod';
import { currency, money } from '../http/money';
import { allOptional, fields } from '../http/validation';
import { lineItemRecord } from '../payments/schema';
import { DURATION_UNITS } from '../shared-enums';

export const MEMBERSHIP_STATUSES = ['pending', 'active', 'trialing', 'expired', 'on-hold', 'cancelled'] as const;
export type MembershipStatus = (typeof MEMBERSHIP_STATUSES)[number];

/** An add-on product of a membership: a product id and how many of it. */
export const addonProduct = z.strictObject({
  product_id: fields.id(),
  quantity: fields.int().min(1).max(10_000),
});

/** An add-on product as a membership answers it. */
export const addonProductRecord = z.strictObject({ product_id: z.int(), quantity: z.int() });

/** A membership's add-ons: at most 100, each product once. */
const addonProducts = () =>
  z
    .array(addonProduct)
    .max(100)
    .refine((items) => new Set(items.map((i) => i.product_id)).size === items.length, { message: 'must not list the same product_id twice.' });

const membershipFields = {
  customer_id: fields.id(),
  plan_id: fields.id(),
  addon_products: addonProducts(),
  currency: currency(),
  initial_amount: money(),
  recurring: fields.flag(),
  auto_renew: fields.flag(),
  duration: fields.int().min(1).max(1000),
  duration_unit: z.enum(DURATION_UNITS),
  amount: money(),
  discount_code: fields.text(100).nullable().describe('The discount code the membership was sold with; its renewals keep the discount (in amount) when the code applies to renewals. null for none.'),
  date_activated: fields.datetime().nullable(),
  date_trial_end: fields.datetime().nullable(),
  date_renewed: fields.datetime().nullable(),
  date_cancellation: fields.datetime().nullable(),
  date_expiration: fields.datetime().nullable(),
  times_billed: fields.int().min(0).max(1_000_000),
  billing_cycles: fields.int().min(0).max(10_000),
  status: z.enum(MEMBERSHIP_STATUSES),
  gateway: fields.text(100),
  gateway_customer_id: fields.text(255),
  gateway_subscription_id: fields.text(255),
};

export const createMembershipSchema = z.strictObject({
  ...allOptional(membershipFields),
  customer_id: membershipFields.customer_id,
  plan_id: membershipFields.plan_id,
});

export const updateMembershipSchema = z.strictObject(allOptional(membershipFields));

export const CHANGE_TIMES = ['now', 'period_end'] as const;

/** POST /memberships/{id}/change: the plan (and period, add-ons) to move to, when, or only a preview. */
export const changeMembershipSchema = z.strictObject({
  plan_id: fields.id().describe('The plan to move to: a product of type plan, recurring, active, priced in the membership\'s currency.'),
  duration: fields
    .int()
    .min(1)
    .max(1000)
    .optional()
    .describe("The new billing period's length. Without it: 1 when duration_unit is given, else the membership's own."),
  duration_unit: z.enum(DURATION_UNITS).optional().describe("The new billing period's unit; without it the membership's own. The plan must have a price for the period (its own or a price variation)."),
  addon_products: addonProducts().optional().describe('The add-ons after the change (packages or services), replacing the current ones; without it the current add-ons stay, priced for the new period.'),
  when: z.enum(CHANGE_TIMES).describe('now: prorated and applied at once; period_end: scheduled for date_expiration (scheduled_change on the membership).'),
  preview: fields.flag().default(false).describe('true: answer the proration and change nothing.'),
});
export type ChangeMembershipInput = z.output<typeof changeMembershipSchema>;

/** A change waiting for the period's end, as a membership answers it. */
export const scheduledChangeRecord = z
  .strictObject({
    plan_id: z.int(),
    duration: z.int(),
    duration_unit: z.enum(DURATION_UNITS),
    addon_products: z.array(addonProductRecord),
    amount: z.number().describe('The recurring price from effective_at on.'),
    effective_at: z.iso.datetime({ offset: true }).describe("When it applies: the membership's date_expiration when it was scheduled (the renewal at that time applies it)."),
    requested_at: z.iso.datetime({ offset: true }),
  })
  .nullable()
  .describe('A plan change waiting for the end of the period (POST /memberships/{id}/change with when: period_end); null when none. DELETE /memberships/{id}/change cancels it.');

/** A membership's terms before or after a change. */
const terms = z.strictObject({ plan_id: z.int(), duration: z.int(), duration_unit: z.enum(DURATION_UNITS), addon_products: z.array(addonProductRecord), amount: z.number() });
const isoTime = z.iso.datetime({ offset: true });

/** What a change answers (the preview whole; an applied change adds the membership and the payment). */
export const changeBreakdown = {
  membership_id: z.int(),
  when: z.enum(CHANGE_TIMES),
  preview: z.boolean(),
  currency: z.string(),
  from: terms.describe('The membership before the change.'),
  to: terms.describe('The membership after it: amount is the new recurring price (plan + recurring add-ons × quantity).'),
  period: z
    .strictObject({ start: isoTime, end: isoTime, seconds: z.int(), remaining_seconds: z.int() })
    .describe("The current period (start: date_renewed, else date_activated, when within one period before date_expiration; else date_expiration minus one period) and the seconds left of it."),
  credit: z.number().describe('The current amount × remaining_seconds / seconds: what the unused time is worth (0 in a trial or for a scheduled change).'),
  cost: z.number().describe('The new price for the rest of the period (each line × remaining_seconds / seconds), or for a whole new period when the period changes.'),
  amount_due: z.number().describe('max(0, cost − credit): charged now, as a pending payment.'),
  credit_left: z.number().describe('max(0, credit − cost): added to the membership\'s credit_balance.'),
  lines: z.array(lineItemRecord).describe("The payment's lines: each recurring product's part of cost."),
  effective_at: isoTime.describe('When the change takes effect: now, or date_expiration (when: period_end).'),
  next_renewal: z
    .strictObject({ date: isoTime, amount: z.number(), credit_applied: z.number(), amount_due: z.number() })
    .describe('The renewal after the change: its date (date_expiration), the new recurring amount, the credit_balance it takes, and what it charges.'),
};
