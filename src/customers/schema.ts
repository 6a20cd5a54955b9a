import { z } from 'zod';
import { allOptional, anyOfRequired, fields } from '../http/validation';

export const EMAIL_VERIFICATION = ['none', 'pending', 'verified'] as const;
export const CUSTOMER_TYPES = ['customer'] as const;

const username = z
  .string()
  .min(4)
  .max(60)
  .regex(/^[A-Za-z0-9 _.@-]+$/, { message: 'may contain only letters, numbers, spaces and _ . @ -' });

/** Fields a customer has of its own (not the user account's). */
const customerFields = {
  type: z.enum(CUSTOMER_TYPES),
  email_verification: z.enum(EMAIL_VERIFICATION),
  has_trialed: fields.flag(),
  vip: fields.flag(),
  extra_information: fields.text(),
  signup_form: fields.text(100, 1),
  billing_address: fields.jsonObject(),
  notes: z.array(z.unknown()).max(1000),
  ips: z.array(z.union([z.ipv4(), z.ipv6()])).max(100),
  last_login: fields.datetime().nullable(),
  date_registered: fields.datetime(),
};

/** User account fields that can be set through the customer. */
const accountFields = {
  email: z.email().max(254),
  display_name: fields.text(250),
  password: fields.text(4096, 6),
};

/** `user_id` on create and update: 0 or null is "no user" (the original's integrations send `user_id: 0`). */
const userId = () => fields.optionalRef('no user yet: username, email and password create one (on update: the user stays)');
const NO_USER = { enum: [0, null] };

export const createCustomerSchema = z
  .strictObject({
    user_id: userId(),
    username: username.optional(),
    ...allOptional({ ...accountFields, ...customerFields }),
  })
  .superRefine((v, ctx) => {
    const account = ['username', 'email', 'password'] as const;
    if (v.user_id !== undefined) {
      for (const k of [...account, 'display_name'] as const) {
        if (v[k] !== undefined) ctx.addIssue({ code: 'custom', path: [k], message: `${k} cannot be combined with user_id: the customer uses that user's account.` });
      }
    } else {
      for (const k of account) {
        if (v[k] === undefined) ctx.addIssue({ code: 'custom', path: [k], message: `${k} is required when user_id is not given (or is 0 or null).` });
      }
    }
  })
  // The rule above, for the document.
  .meta({
    oneOf: [
      { required: ['user_id'], properties: { user_id: { type: 'integer', minimum: 1 } }, not: anyOfRequired(['username', 'email', 'password', 'display_name']) },
      { required: ['username', 'email', 'password'], properties: { user_id: NO_USER } },
    ],
  });

export const updateCustomerSchema = z.strictObject({
  user_id: userId(),
  ...allOptional({ ...accountFields, ...customerFields }),
});

export type CreateCustomerInput = {
  user_id?: number;
  username?: string;
  email?: string;
  password?: string;
  display_name?: string;
  type?: string;
  email_verification?: string;
  has_trialed?: boolean;
  vip?: boolean;
  extra_information?: string;
  signup_form?: string;
  billing_address?: Record<string, unknown>;
  notes?: unknown[];
  ips?: string[];
  last_login?: string | null;
  date_registered?: string;
};
export type UpdateCustomerInput = Omit<CreateCustomerInput, 'username'>;

const timestamp = () => z.iso.datetime({ offset: true });

/** A customer as the API answers it. */
export const customerRecordSchema = z.strictObject({
  id: z.int(),
  model: z.literal('customer'),
  user_id: z.int(),
  username: z.string(),
  email: z.string(),
  display_name: z.string(),
  type: z.enum(CUSTOMER_TYPES),
  email_verification: z.enum(EMAIL_VERIFICATION),
  date_registered: timestamp().nullable(),
  last_login: timestamp().nullable(),
  has_trialed: z.boolean(),
  vip: z.boolean(),
  ips: z.array(z.string()),
  signup_form: z.string(),
  extra_information: z.string(),
  billing_address: z.record(z.string(), z.unknown()),
  notes: z.array(z.unknown()),
  migrated_from_id: z.int().nullable(),
  date_created: timestamp(),
  date_modified: timestamp(),
});
