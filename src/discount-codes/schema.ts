import { z } from 'zod';
import { money } from '../http/money';
import { allOptional, fields } from '../http/validation';

export const DISCOUNT_TYPES = ['percentage', 'absolute'] as const;
export type DiscountType = (typeof DISCOUNT_TYPES)[number];

/** The original's code rule: 2 to 20 letters, digits, - and _ (unique without regard to case). */
export const DISCOUNT_CODE_PATTERN = /^[A-Za-z0-9_-]{2,20}$/;

const discountCodeFields = {
  name: fields.label(250),
  code: z.string().regex(DISCOUNT_CODE_PATTERN, { message: 'must be 2 to 20 characters: letters, digits, - and _.' }),
  description: fields.text(1000),
  value: money().describe('The discount on each line item: a percentage (at most 100) or an amount in the cart\'s currency, as `type` says.'),
  type: z.enum(DISCOUNT_TYPES),
  setup_fee_value: money().describe('The discount on each setup fee: a percentage (at most 100) or an amount, as `setup_fee_type` says.'),
  setup_fee_type: z.enum(DISCOUNT_TYPES),
  apply_to_renewals: fields.flag(),
  active: fields.flag(),
  max_uses: fields.int().min(0).max(1_000_000_000).describe('How many registrations may use the code; 0 for no limit.'),
  uses: fields.int().min(0).max(1_000_000_000).describe('How many registrations used the code (counted by /register).'),
  date_start: fields.datetime().nullable().describe('Valid from (none: at once).'),
  date_expiration: fields.datetime().nullable().describe('Valid until (none: never expires); after date_start.'),
  allowed_products: z
    .array(fields.id())
    .max(1000)
    .refine((ids) => new Set(ids).size === ids.length, { message: 'must not list the same product twice.' })
    .meta({ uniqueItems: true })
    .describe('With limit_products, the products (ids) the code applies to; empty means all.'),
  limit_products: fields.flag(),
};

export const createDiscountCodeSchema = z.strictObject({
  ...allOptional(discountCodeFields),
  name: discountCodeFields.name,
  code: discountCodeFields.code,
});

export const updateDiscountCodeSchema = z.strictObject(allOptional(discountCodeFields));
