import { z } from 'zod';
import { currency } from '../http/money';
import { anyOfRequired, BLANK, fields } from '../http/validation';
import { MEMBERSHIP_STATUSES } from '../memberships/schema';
import { PAYMENT_STATUSES } from '../payments/schema';
import { DURATION_UNITS } from '../shared-enums';

const ACCOUNT = ['username', 'email', 'password'] as const;
/** In the document's rules across fields: an id given, or none (left out, 0 or null). */
const SOME = { type: 'integer', minimum: 1 };
const NONE = { enum: [0, null] };

/** The /register body: the contract's registration table plus the original's optional fields. */
const username = z
  .string()
  .min(4)
  .max(60)
  .regex(/^[A-Za-z0-9 _.@-]+$/, { message: 'may contain only letters, numbers, spaces and _ . @ -' });

const customer = z.strictObject({
  user_id: fields.optionalRef('no user yet: username, email and password create one'),
  username: username.optional(),
  password: fields.text(4096, 6).optional(),
  email: z.email().max(254).optional(),
  billing_address: fields.jsonObject().optional(),
});

const productRef = z.union([fields.id(), fields.label(200)], {
  error: () => 'must be a product id (integer) or slug (string).',
});

export const registerSchema = z
  .strictObject({
    customer_id: fields.optionalRef('a new customer, from customer'),
    customer: customer.optional(),
    // Required: none (or []) is 400 invalid_cart (validate.ts).
    products: z
      .array(productRef)
      .min(1)
      .max(50)
      .refine((items) => new Set(items.map((i) => String(i))).size === items.length, { message: 'must not list the same product twice.' })
      .meta({ uniqueItems: true }),
    duration: fields.int().min(1).max(1000).optional(),
    duration_unit: z.enum(DURATION_UNITS).optional(),
    discount_code: fields
      .text(100)
      .optional()
      .describe('A discount code (any case; empty means none). Unknown, inactive, not yet valid, expired, used up, or not for these products: 400 naming discount_code, and nothing is created.'),
    auto_renew: fields.flag().optional(),
    country: z
      .string()
      .regex(/^[A-Za-z]{2}$/, { message: 'must be a two-letter ISO 3166-1 country code.' })
      .transform((v) => v.toUpperCase())
      .optional(),
    currency: currency().optional(),
    membership: z
      .strictObject({
        status: z.enum(MEMBERSHIP_STATUSES).optional(),
        date_activated: fields.datetime().optional(),
        date_trial_end: fields.datetime().optional(),
        date_renewed: fields.datetime().optional(),
        date_expiration: fields.datetime().optional(),
      })
      .optional(),
    payment: z.strictObject({ status: z.enum(PAYMENT_STATUSES).optional() }).optional(),
    payment_method: z
      .strictObject({
        gateway: fields.text(100).optional(),
        gateway_customer_id: fields.text(255).optional(),
        gateway_subscription_id: fields.text(255).optional(),
        gateway_payment_id: fields.text(255).optional(),
      })
      .optional(),
    site: z
      .strictObject({
        site_url: z
          .string()
          .min(4)
          .max(63)
          .regex(/^[a-z0-9]+$/, { message: 'may contain only lower-case letters and digits.' }),
        site_title: fields.label(250, 4),
        publish: fields.flag().optional(),
        template_id: fields.optionalRef('no template'),
        site_meta: fields.jsonObject().optional(),
        site_option: fields.jsonObject().optional(),
      })
      .optional(),
  })
  .superRefine((v, ctx) => {
    if (v.customer_id !== undefined) {
      if (v.customer && (v.customer.user_id !== undefined || v.customer.username !== undefined || v.customer.email !== undefined || v.customer.password !== undefined)) {
        ctx.addIssue({ code: 'custom', path: ['customer'], message: 'customer cannot name an account (user_id, username, email, password) together with customer_id.' });
      }
      return;
    }
    const c = v.customer;
    if (!c) {
      ctx.addIssue({ code: 'custom', path: ['customer'], message: 'customer is required when customer_id is not given.' });
      return;
    }
    if (c.user_id !== undefined) {
      for (const k of ['username', 'email', 'password'] as const) {
        if (c[k] !== undefined) ctx.addIssue({ code: 'custom', path: ['customer', k], message: `customer.${k} cannot be combined with customer.user_id.` });
      }
    } else {
      for (const k of ['username', 'email', 'password'] as const) {
        if (c[k] === undefined) ctx.addIssue({ code: 'custom', path: ['customer', k], message: `customer.${k} is required when neither customer_id nor customer.user_id is given.` });
      }
    }
  })
  // The rules of the superRefine above, for the document (an id of 0 or null is none).
  .meta({
    oneOf: [
      { required: ['customer_id'], properties: { customer_id: SOME, customer: { properties: { user_id: NONE }, not: anyOfRequired(ACCOUNT) } } },
      {
        required: ['customer'],
        properties: {
          customer_id: NONE,
          customer: { oneOf: [{ required: ['user_id'], properties: { user_id: SOME }, not: anyOfRequired(ACCOUNT) }, { required: [...ACCOUNT], properties: { user_id: NONE } }] },
        },
      },
    ],
  });

export type RegisterBody = z.output<typeof registerSchema>;
