import { z } from 'zod';
import { ApiError, invalidParams } from './errors';
import { isFormBody } from './input';

/** Lists in the WordPress style: "a, b, and c". */
export function humanList(values: readonly unknown[]): string {
  const s = values.map(String);
  if (s.length <= 1) return s.join('');
  if (s.length === 2) return `${s[0]} and ${s[1]}`;
  return `${s.slice(0, -1).join(', ')}, and ${s[s.length - 1]}`;
}

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
 * A form body's strings turned into what the schema expects where a form cannot say it:
 * integers and numbers, booleans (true/false/1/0), null for an empty value of a nullable
 * field that takes no string. Driven by the schema, the same for every route; anything
 * else is left for the schema to judge.
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
      return Array.isArray(value) ? value.map((v) => coerceFormValues(def.element, v)) : value;
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

// Field building blocks shared by every resource schema.
export const fields = {
  /** An integer; a non-number says "is not of type integer." (zod alone says "number"). */
  int: () => z.int({ error: (iss) => (iss.code === 'invalid_type' ? 'is not of type integer.' : undefined) }),
  id: () => fields.int().positive(),
  flag: () =>
    z.preprocess((v) => {
      if (v === 1 || v === '1' || v === 'true') return true;
      if (v === 0 || v === '0' || v === 'false') return false;
      return v;
    }, z.boolean()),
  text: (max = 65_535) => z.string().max(max),
  datetime: () =>
    z
      .string()
      .refine((v) => /^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(v) && !Number.isNaN(Date.parse(v.replace(' ', 'T'))), {
        message: 'is not a valid date (use ISO 8601, e.g. 2026-01-31T12:00:00Z).',
      }),
  jsonObject: () => z.record(z.string(), z.unknown()),
};

/** Dates to the wire as ISO 8601 UTC; null stays null. */
export function isoDate(v: Date | string | null | undefined): string | null {
  if (v === null || v === undefined) return null;
  return (v instanceof Date ? v : new Date(v)).toISOString();
}
