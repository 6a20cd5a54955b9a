import { z } from 'zod';
import { CURRENCIES, Decimal } from '../db/money';

/** Any case is accepted (stored upper-case); the document lists the codes upper-case. */
export const currency = () =>
  z
    .string()
    .meta({ enum: [...CURRENCIES].sort(), description: 'A three-letter ISO 4217 code (e.g. USD, EUR; lower case is accepted too).' })
    .transform((v) => v.toUpperCase())
    .refine((v) => /^[A-Z]{3}$/.test(v) && CURRENCIES.has(v), { message: 'is not a three-letter ISO 4217 currency code (e.g. USD, EUR).' });

const MAX = new Decimal('99999999999.9999');

/**
 * What money() takes, for the document: a number with at most 4 decimals, or the same as a
 * string of digits (leading zeros, and zeros after the 4th decimal, change nothing). The
 * transform below is the rule; test/document-rules.test.ts holds the two to each other.
 */
const AS_NUMBER = { minimum: 0, maximum: MAX.toNumber(), multipleOf: 0.0001 };
const AS_STRING = { pattern: '^0*[0-9]{1,11}(?:\\.[0-9]{1,4}0*)?$' };

/**
 * An amount of money from JSON: a number or a numeric string, at most 4 decimals, never
 * negative. Parsed with decimal.js from its text, so no binary float rounding creeps in;
 * the output is the exact decimal string that goes into a numeric column.
 */
export const money = () =>
  z
    .union([z.number().meta(AS_NUMBER), z.string().meta(AS_STRING)])
    .meta({ description: `A non-negative amount with at most 4 decimals, up to ${MAX.toFixed()} (a string such as "19.99" keeps it exact).` })
    .transform((v, ctx) => {
      const text = typeof v === 'number' ? String(v) : v.trim();
      if (!/^\d+(\.\d+)?$/.test(text) && !(typeof v === 'number' && /^\d+(\.\d+)?(e[+-]?\d+)?$/i.test(text))) {
        ctx.addIssue({ code: 'custom', message: 'must be a non-negative amount, e.g. 19.99.' });
        return z.NEVER;
      }
      const d = new Decimal(text);
      if (d.decimalPlaces() > 4) {
        ctx.addIssue({ code: 'custom', message: 'must have at most 4 decimal places.' });
        return z.NEVER;
      }
      if (d.gt(MAX)) {
        ctx.addIssue({ code: 'custom', message: `must not exceed ${MAX.toFixed()}.` });
        return z.NEVER;
      }
      return d.toFixed();
    });
