import { z } from 'zod';
import { humanList } from '../infra/text';
import { ApiError, invalidParams } from './errors';
import { isFormBody } from './input';

const TYPE_NAMES: Record<string, string> = { int: 'integer', number: 'number', boolean: 'boolean', string: 'string', object: 'object', record: 'object', array: 'array' };

/** One readable message per issue, in WordPress' words where it has them. */
function issueMessage(name: string, issue: z.core.$ZodIssue, given: unknown): string {
  switch (issue.code) {
    case 'invalid_type': {
      if (given === undefined) return `${name} is required.`;
      if (issue.message?.startsWith('is not of type')) return `${name} ${issue.message}`;
      return `${name} is not of type ${TYPE_NAMES[issue.expected] ?? issue.expected}.`;
    }
    case 'invalid_value':
      return `${name} is not one of ${humanList(issue.values)}.`;
    case 'too_small': {
      const min = Number(issue.minimum);
      if (issue.origin === 'string') return `${name} must be at least ${min} character${min === 1 ? '' : 's'} long.`;
      if (issue.origin === 'array') return `${name} must contain at least ${min} item${min === 1 ? '' : 's'}.`;
      return `${name} must be greater than ${issue.inclusive ? 'or equal to ' : ''}${min}.`;
    }
    case 'too_big': {
      const max = Number(issue.maximum);
      if (issue.origin === 'string') return `${name} must be at most ${max} character${max === 1 ? '' : 's'} long.`;
      if (issue.origin === 'array') return `${name} must contain at most ${max} item${max === 1 ? '' : 's'}.`;
      return `${name} must be less than ${issue.inclusive ? 'or equal to ' : ''}${max}.`;
    }
    case 'invalid_format':
      if (issue.format === 'email') return `${name} is not a valid email address.`;
      return issue.message && !issue.message.startsWith('Invalid') ? `${name} ${issue.message}` : `${name} is not in the expected format.`;
    case 'not_multiple_of':
      return `${name} must be a multiple of ${issue.divisor}.`;
    default: {
      const m = issue.message ?? 'is invalid.';
      if (m.startsWith(name)) return m;
      return /^[a-z]/.test(m) ? `${name} ${m}` : `${name}: ${m}`;
    }
  }
}

function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let v: unknown = input;
  for (const k of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

export function zodParams(error: z.ZodError, input: unknown, prefix = ''): Record<string, string> {
  const params: Record<string, string> = {};
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const name = [prefix, ...issue.path.map(String), key].filter(Boolean).join('.');
        params[name] ??= `${name} is not a valid parameter.`;
      }
      continue;
    }
    const name = [prefix, ...issue.path.map(String)].filter(Boolean).join('.') || 'body';
    params[name] ??= issueMessage(name, issue, valueAt(input, issue.path));
  }
  return params;
}

const NUMBER = /^\s*-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/;
const BOOLEANS = new Map([['true', true], ['1', true], ['false', false], ['0', false]]);

/** Whether a schema takes a string as it is (then a form string is left alone). */
function takesString(schema: z.ZodType): boolean {
  const def = schema._zod.def as unknown as Record<string, any>;
  switch (def.type) {
    case 'string':
    case 'unknown':
    case 'any':
    case 'enum':
    case 'template_literal':
      return true;
    case 'literal':
      return (def.values as unknown[]).some((v) => typeof v === 'string');
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
    case 'catch':
    case 'nonoptional':
      return takesString(def.innerType);
    case 'pipe':
      return takesString(def.in._zod.def.type === 'transform' ? def.out : def.in);
    case 'union':
      return (def.options as z.ZodType[]).some(takesString);
    case 'lazy':
      return takesString(def.getter());
    default:
      return false;
  }
}

/**
 * An array as a form sends it: repeated names (qs makes an array of two or more, a string of
 * one), nothing for an empty one, or indices (line_items[0][name]=x; qs makes an object of
 * indices over its array limit). Null when the value is no array in any of these spellings.
 */
function formArray(value: unknown): unknown[] | null {
  if (Array.isArray(value)) return value;
  if (value === '') return [];
  if (typeof value === 'string') return [value];
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value);
    if (keys.length > 0 && keys.every((k) => /^(0|[1-9]\d{0,8})$/.test(k))) {
      return keys.sort((a, b) => Number(a) - Number(b)).map((k) => (value as Record<string, unknown>)[k]);
    }
  }
  return null;
}

/**
 * A form body's strings turned into what the schema expects where a form cannot say it:
 * integers and numbers, booleans (true/false/1/0), null (see nullable below), arrays (see
 * formArray). Driven by the schema, the same for every route; anything else is left for the
 * schema to judge.
 */
export function coerceFormValues(schema: z.ZodType, value: unknown): unknown {
  const def = schema._zod.def as unknown as Record<string, any>;
  switch (def.type) {
    case 'number':
      return typeof value === 'string' && NUMBER.test(value) ? Number(value) : value;
    case 'boolean':
      return typeof value === 'string' ? (BOOLEANS.get(value.trim().toLowerCase()) ?? value) : value;
    case 'literal': {
      const hit = (def.values as unknown[]).find((v) => typeof v !== 'string' && String(v) === value);
      return hit === undefined ? value : hit;
    }
    case 'nullable':
      // null has no form spelling: `null` (unless the field takes that string), or empty where no text is taken.
      if (value === 'null' && !def.innerType.safeParse('null').success) return null;
      return value === '' && !takesString(def.innerType) ? null : coerceFormValues(def.innerType, value);
    case 'optional':
    case 'default':
    case 'prefault':
    case 'readonly':
    case 'catch':
    case 'nonoptional':
      return coerceFormValues(def.innerType, value);
    case 'pipe':
      return coerceFormValues(def.in._zod.def.type === 'transform' ? def.out : def.in, value);
    case 'lazy':
      return coerceFormValues(def.getter(), value);
    case 'union': {
      if (typeof value === 'string' && takesString(schema)) return value;
      for (const option of def.options as z.ZodType[]) {
        const coerced = coerceFormValues(option, value);
        if (coerced !== value && option.safeParse(coerced).success) return coerced;
      }
      return value;
    }
    case 'array':
      return formArray(value)?.map((v) => coerceFormValues(def.element, v)) ?? value;
    case 'object': {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
      const shape = def.shape as Record<string, z.ZodType>;
      return Object.fromEntries(
        Object.entries(value).map(([k, v]) => {
          const field = Object.hasOwn(shape, k) ? shape[k] : def.catchall;
          return [k, field ? coerceFormValues(field, v) : v];
        }),
      );
    }
    case 'record': {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, coerceFormValues(def.valueType, v)]));
    }
    default:
      return value;
  }
}

/**
 * safeParse of a request's input: a form-encoded body (see http/input.ts) is first coerced
 * by the schema, so forms and JSON are validated alike.
 */
export function safeParseInput<S extends z.ZodType>(schema: S, input: unknown): { result: z.ZodSafeParseResult<z.output<S>>; input: unknown } {
  const value = isFormBody(input) ? coerceFormValues(schema, input) : input;
  return { result: schema.safeParse(value), input: value };
}

/** Parse or throw 400 wu_rest_invalid_parameter naming every offending parameter. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const { result, input: value } = safeParseInput(schema, input);
  if (!result.success) throw invalidParams(zodParams(result.error, value));
  return result.data;
}

/** A JSON body must be an object. */
export function bodyObject(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null || body === '') return {};
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError(400, 'rest_invalid_json', 'The request body must be a JSON object.');
  }
  return body as Record<string, unknown>;
}

/** Every field of a shape made optional (update bodies, optional create fields). */
export function allOptional<T extends Record<string, z.ZodType>>(shape: T): { [K in keyof T]: z.ZodOptional<T[K]> } {
  return Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, v.optional()])) as { [K in keyof T]: z.ZodOptional<T[K]> };
}

/**
 * Lengths as JSON Schema counts them: code points (an emoji is one character, where a string's
 * length counts two UTF-16 units).
 */
export function codePointLength(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/**
 * The characters String.prototype.trim removes (ECMAScript's WhiteSpace and LineTerminator),
 * spelled out: documented patterns use this class rather than \s, which other regex engines
 * (a client's, the fuzzer's) read differently.
 */
const WHITESPACE = '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';
/** Nothing but whitespace (or nothing at all). */
export const BLANK = new RegExp(`^[${WHITESPACE}]*$`, 'u');
/** At least `min` characters (code points) once trimmed: the first and last non-blank ones, and what lies between. */
export function trimmedAtLeast(min: number): RegExp {
  return new RegExp(min <= 1 ? `[^${WHITESPACE}]` : `[^${WHITESPACE}][\\s\\S]{${min - 2},}[^${WHITESPACE}]`, 'u');
}

const DATE = '[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29';
const TIME = '(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\\.[0-9]{1,6})?)?|24:00(?::00(?:\\.0{1,6})?)?';
/**
 * A date (a real one: 2026-02-30 is refused, not read as March 2), optionally with a time
 * (T or a space; 24:00 is the end of the day) and a zone (Z, +05:30 or +0530). The one rule
 * for dates in bodies and filters, and their documented pattern.
 */
export const DATETIME_PATTERN = new RegExp(`^(?:${DATE})(?:[T ](?:${TIME})(?:Z|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9])?)?$`);

/** The largest integer (15 digits) that query parameters and path ids take. */
export const MAX_QUERY_INTEGER = 999_999_999_999_999;

// Field building blocks shared by every resource schema. Each states its rule so that the
// OpenAPI document generated from it says the same (a pattern rather than a refine).
export const fields = {
  /** An integer; a non-number says "is not of type integer." (zod alone says "number"). */
  int: () => z.int({ error: (iss) => (iss.code === 'invalid_type' ? 'is not of type integer.' : undefined) }),
  id: () => fields.int().positive(),
  /**
   * A reference to another record that may be none: its id, or 0 or null for none. The original
   * (WordPress, whose ids start at 1) writes 0 for "none" and its integrations send it; 0 is never
   * stored: none is null.
   */
  ref: () =>
    fields
      .int()
      .min(0)
      .nullable()
      .transform((v) => (v === 0 ? null : v))
      .describe('An id; 0 or null means none.'),
  /**
   * An optional reference where 0 or null mean the same as leaving it out: `user_id: 0` with
   * username, email and password creates the user, as in the original.
   */
  optionalRef: (none: string) =>
    fields
      .int()
      .min(0)
      .nullable()
      .optional()
      .transform((v) => (v ? v : undefined))
      .describe(`An id; 0 or null means ${none}.`),
  flag: () =>
    z.preprocess((v) => {
      if (v === 1 || v === '1' || v === 'true') return true;
      if (v === 0 || v === '0' || v === 'false') return false;
      return v;
    }, z.boolean()),
  /** Text of at most `max` characters, counted in code points as the document's maxLength counts them. */
  text: (max = 65_535, min = 0) =>
    (min > 0 ? z.string().min(min) : z.string()).refine((v) => v.length <= max || codePointLength(v) <= max, { message: `must be at most ${max} characters long.` }).meta({ maxLength: max }),
  /** Text that is not blank (at least `min` characters once trimmed), stored trimmed; at most `max` characters. */
  label: (max: number, min = 1) =>
    fields
      .text(max)
      .regex(trimmedAtLeast(min), min <= 1 ? 'must not be blank.' : `must be at least ${min} characters long (surrounding spaces not counted).`)
      .trim(),
  datetime: () => z.string().regex(DATETIME_PATTERN, 'is not a valid date (use ISO 8601, e.g. 2026-01-31T12:00:00Z).'),
  jsonObject: () => z.record(z.string(), z.unknown()),
};

/** JSON Schema for "at least one of these fields" (rules across fields, stated in the document with `.meta`). */
export function anyOfRequired(keys: readonly string[]): { anyOf: { required: string[] }[] } {
  return { anyOf: keys.map((k) => ({ required: [k] })) };
}
