import { z } from 'zod';
import { currency, money } from '../http/money';
import { allOptional, fields } from '../http/validation';
import { DURATION_UNITS } from '../shared-enums';

export const MEMBERSHIP_STATUSES = ['pending', 'active', 'trialing', 'expired', 'on-hold', 'cancelled'] as const;
export type MembershipStatus = (typeof MEMBERSHIP_STATUSES)[number];

/** An add-on product of a membership: a product id and how many of it. */
const addonProduct = z.strictObject({
  product_id: fields.id(),
  quantity: fields.int().min(1).max(10_000),
});

/** An add-on product as a membership answers it. */
export const addonProductRecord = z.strictObject({ product_id: z.int(), quantity: z.int() });

const membershipFields = {
  customer_id: fields.id(),
  plan_id: fields.id(),
  addon_products: z
    .array(addonProduct)
    .max(100)
    .refine((items) => new Set(items.map((i) => i.product_id)).size === items.length, { message: 'must not list the same product_id twice.' }),
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
