import { z } from 'zod';
import { currency, money } from '../http/money';
import { allOptional, fields } from '../http/validation';
import { DURATION_UNITS } from '../shared-enums';

export const PRICING_TYPES = ['free', 'paid', 'contact_us', 'pay_what_you_want'] as const;
export const PRODUCT_TYPES = ['plan', 'package', 'service'] as const;

/** A price for another billing period than the product's own (the original's price_variations). */
export const priceVariation = z.strictObject({
  amount: money(),
  duration: fields.int().min(1).max(1000),
  duration_unit: z.enum(DURATION_UNITS),
});

/** A price variation as a product answers it. */
export const priceVariationRecord = z.strictObject({ amount: z.number(), duration: z.int(), duration_unit: z.enum(DURATION_UNITS) });

const productFields = {
  slug: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[a-z0-9]+(?:[-_][a-z0-9]+)*$/, { message: 'must be lower-case letters, digits and single - or _ between them.' }),
  name: fields.label(250),
  description: fields.text(),
  currency: currency(),
  pricing_type: z.enum(PRICING_TYPES),
  amount: money(),
  setup_fee: money(),
  recurring: fields.flag(),
  duration: fields.int().min(1).max(1000),
  duration_unit: z.enum(DURATION_UNITS),
  trial_duration: fields.int().min(0).max(1000),
  trial_duration_unit: z.enum(DURATION_UNITS),
  billing_cycles: fields.int().min(0).max(10_000),
  active: fields.flag(),
  type: z.enum(PRODUCT_TYPES),
  list_order: fields.int().min(-100_000).max(100_000),
  price_variations: z
    .array(priceVariation)
    .max(20)
    .refine((items) => new Set(items.map((v) => `${v.duration} ${v.duration_unit}`)).size === items.length, { message: 'must not list the same duration and duration_unit twice.' }),
};

export const createProductSchema = z.strictObject({
  ...allOptional(productFields),
  slug: productFields.slug,
  name: productFields.name,
});

export const updateProductSchema = z.strictObject(allOptional(productFields));
