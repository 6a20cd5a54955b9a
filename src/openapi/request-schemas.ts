import { NUL_FREE_PATTERN } from '../http/input';

/**
 * What the document says of request inputs beyond their zod schemas: the rules every route
 * applies (src/http/input.ts: no NUL in any string or key, at any depth), and how a form body
 * carries what JSON carries (src/http/validation.ts, coerceFormValues).
 */
type Json = Record<string, unknown>;

export const JSON_VALUE_REF = { $ref: '#/components/schemas/JsonValue' };

/** Any JSON value, without NUL in its strings and keys: what a free-form field (z.unknown()) takes. */
export const JSON_VALUE_SCHEMA = {
  description: 'Any JSON value; no string or key in it may hold NUL (U+0000).',
  type: ['null', 'boolean', 'number', 'string', 'array', 'object'],
  pattern: NUL_FREE_PATTERN,
  items: JSON_VALUE_REF,
  propertyNames: { pattern: NUL_FREE_PATTERN },
  additionalProperties: JSON_VALUE_REF,
};

/** Keywords that validate nothing: a schema of these alone takes any value. */
const ANNOTATIONS = new Set(['description', 'title', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly', '$comment']);
// Not `not` nor `if`: the rule would change what they rule out or test.
const SUBSCHEMAS = ['additionalProperties', 'items', 'propertyNames', 'then', 'else', 'contains'];
const SUBSCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];

const isJsonValue = (node: unknown) => (node as Json | undefined)?.$ref === JSON_VALUE_REF.$ref;
const hasType = (s: Json, type: string) => s.type === type || (Array.isArray(s.type) && s.type.includes(type));
const isObjectSchema = (s: Json) => hasType(s, 'object');

/**
 * Whether a pattern already rules NUL out: anchored, each class either positive without NUL or
 * negated with it, and outside classes no `.` nor escape (\S, \W, \D, \u…) that could match it.
 * A heuristic that errs towards adding the rule.
 */
function excludesNul(pattern: string): boolean {
  if (!pattern.startsWith('^') || !pattern.endsWith('$')) return false;
  let safe = true;
  const outside = pattern.replace(/\[(\^?)((?:\\.|[^\]\\])*)\]/g, (_m, negated: string, body: string) => {
    if (negated !== (/\\u0000|\\x00/.test(body) ? '^' : '')) safe = false;
    return 'C';
  });
  return safe && !/\\[SWDux0]/.test(outside) && !/(^|[^\\])\./.test(outside);
}

/**
 * A request schema with the NUL rule on every string (a pattern, or an allOf beside a pattern
 * that allows NUL), on every key of an open object, and free-form values as JsonValue.
 */
export function withInputRules(node: unknown): unknown {
  if (!node || typeof node !== 'object' || Array.isArray(node)) return node;
  const s: Json = { ...(node as Json) };
  if (Object.keys(s).every((k) => ANNOTATIONS.has(k))) return { ...s, ...JSON_VALUE_REF };
  if (hasType(s, 'string') && s.enum === undefined && s.const === undefined) {
    if (typeof s.pattern !== 'string') s.pattern = NUL_FREE_PATTERN;
    else if (!excludesNul(s.pattern)) s.allOf = [...((s.allOf as unknown[]) ?? []), { pattern: NUL_FREE_PATTERN }];
  }
  if (isObjectSchema(s) && s.additionalProperties !== false) {
    s.propertyNames = s.propertyNames ?? { pattern: NUL_FREE_PATTERN };
    s.additionalProperties = s.additionalProperties ?? {};
  }
  if (s.properties) s.properties = Object.fromEntries(Object.entries(s.properties as Json).map(([k, v]) => [k, withInputRules(v)]));
  for (const k of SUBSCHEMAS) if (k in s) s[k] = k === 'propertyNames' ? withStringRule(s[k]) : withInputRules(s[k]);
  for (const k of SUBSCHEMA_LISTS) if (Array.isArray(s[k])) s[k] = (s[k] as unknown[]).map(withInputRules);
  return s;
}

/** propertyNames are strings whatever they say of their type. */
function withStringRule(node: unknown): unknown {
  const s = (node && typeof node === 'object' ? node : {}) as Json;
  return withInputRules({ type: 'string', ...s });
}

// ---- form bodies ---------------------------------------------------------------------------------

/** A key a form cannot carry in brackets: empty, or an array index (qs would make an array of the object). */
const FORM_UNSAFE_KEY = '^(?:0|[1-9][0-9]*)?$';
const INDEX_KEY = '^(?:0|[1-9][0-9]{0,3})$';
const DEEP_OBJECT = { style: 'deepObject', explode: true };

const resolve = (node: unknown): Json => (isJsonValue(node) ? JSON_VALUE_SCHEMA : ((node ?? {}) as Json));

/** A free-form value a form must carry: an empty object or array has no form spelling. */
const FORM_VALUE = { ...JSON_VALUE_SCHEMA, minProperties: 1, minItems: 1, propertyNames: { pattern: NUL_FREE_PATTERN, not: { pattern: FORM_UNSAFE_KEY } } };

/** Open objects (records) in a form: keys that qs reads as array indices are refused. */
function formKeys(node: unknown): unknown {
  if (!node || typeof node !== 'object' || Array.isArray(node)) return node;
  const s: Json = { ...(node as Json) };
  if (isObjectSchema(s) && s.additionalProperties !== false && s.propertyNames) {
    s.propertyNames = { ...(s.propertyNames as Json), not: { pattern: FORM_UNSAFE_KEY } };
  }
  if (s.properties) s.properties = Object.fromEntries(Object.entries(s.properties as Json).map(([k, v]) => [k, formKeys(v)]));
  for (const k of ['additionalProperties', 'items']) if (k in s && !isJsonValue(s[k])) s[k] = formKeys(s[k]);
  for (const k of SUBSCHEMA_LISTS) if (Array.isArray(s[k])) s[k] = (s[k] as unknown[]).map(formKeys);
  return s;
}

/**
 * The same body as application/x-www-form-urlencoded, as the server reads it (qs brackets,
 * then coerceFormValues): objects as deepObject (billing_address[city]=x), arrays of values
 * by repeating the name (ips=a&ips=b), arrays of objects by index (line_items[0][name]=x, an
 * object keyed by index here), null spelled `null`. A required free-form field cannot be
 * empty (an empty object or array has no form spelling).
 */
export function formMediaType(schema: Json): { schema: Json; encoding?: Json } {
  const encoding: Json = {};
  const convert = (object: Json): Json => {
    const out: Json = { ...object };
    if (isJsonValue(object.additionalProperties)) out.additionalProperties = FORM_VALUE;
    if (!object.properties) return out;
    const required = new Set((object.required as string[] | undefined) ?? []);
    const properties: Json = {};
    for (const [name, raw] of Object.entries(object.properties as Json)) {
      let prop = formKeys(raw) as Json;
      const resolved = resolve(prop);
      const items = resolve(resolved.items);
      if (hasType(resolved, 'array') && isObjectSchema(items) && !hasType(items, 'string')) {
        const { items: item, maxItems, minItems, type: _array, ...rest } = resolved;
        prop = { ...rest, type: 'object', propertyNames: { pattern: INDEX_KEY }, additionalProperties: item };
        if (maxItems !== undefined) prop.maxProperties = maxItems;
        if (minItems !== undefined) prop.minProperties = minItems;
        encoding[name] = DEEP_OBJECT;
      } else if (isObjectSchema(resolved)) {
        encoding[name] = DEEP_OBJECT;
        if (required.has(name) && isJsonValue(prop)) prop = FORM_VALUE;
      }
      properties[name] = prop;
    }
    return { ...out, properties };
  };
  const out = convert(schema);
  for (const k of SUBSCHEMA_LISTS) if (Array.isArray(out[k])) out[k] = (out[k] as Json[]).map(convert);
  return { schema: out, ...(Object.keys(encoding).length ? { encoding } : {}) };
}
