import { ApiError, invalidParams } from './errors';
import { printable } from './input';
import type { ParamDoc } from './route-registry';
import { codePointLength } from './validation';

/**
 * WordPress' global parameters `_fields` and `_embed`, read from a query string.
 *
 * `_fields` names the fields of the answer to keep: `_fields=id,email`, `_fields[]=id&_fields[]=email`
 * or `_fields[0]=id` (as @wordpress/url writes arrays), separated by commas or white space.
 * `a.b` keeps `b` inside the object `a` (and inside each object of a list `a`); a name that
 * matches nothing is simply absent. `_links` and `_embedded` are kept only when named. No name
 * at all (`_fields=` or only commas) keeps the whole answer, as in WordPress.
 *
 * `_embed` (empty, `1` or `true`) embeds every embeddable link; `_embed=customer,membership`
 * only those link relations (unknown ones are ignored).
 */

/** Field name -> true (the whole value) or the fields to keep inside it. */
export type FieldTree = Map<string, FieldTree | true>;

/** The top-level fields a read must produce: declared in db/resource.ts, where the services read them. */

export interface View {
  /** null: the whole answer */
  fields: FieldTree | null;
  /** null: nothing embedded; 'all': every embeddable link; else those link relations */
  embed: ReadonlySet<string> | 'all' | null;
}

/** Bounds on what a request may ask: beyond them a 400, so a hostile value costs nothing. */
export const FIELDS_MAX_NAMES = 100;
export const FIELDS_MAX_NAME_LENGTH = 200;
export const FIELDS_MAX_DEPTH = 6;

const FIELDS_KEY = /^_fields(\[\d{0,6}\])?$/;
const EMBED_KEY = /^_embed(\[\d{0,6}\])?$/;

/** Every value given under `_fields` (or `_embed`), in all the spellings WordPress clients use. */
function rawValues(query: Record<string, unknown>, key: RegExp): string[] | null {
  let out: string[] | null = null;
  for (const [k, v] of Object.entries(query)) {
    if (!key.test(k)) continue;
    out ??= [];
    for (const item of Array.isArray(v) ? v : [v]) if (typeof item === 'string') out.push(item);
  }
  return out;
}

/** wp_parse_list: commas and white space separate, empty items are dropped; duplicates count once. */
function names(values: string[]): string[] {
  const out = new Set<string>();
  for (const v of values) for (const n of v.split(/[\s,]+/)) if (n !== '') out.add(n);
  return [...out];
}

function fieldTree(list: string[], errors: Record<string, string>): FieldTree | null {
  if (list.length === 0) return null;
  if (list.length > FIELDS_MAX_NAMES) {
    errors._fields = `_fields must name at most ${FIELDS_MAX_NAMES} fields.`;
    return null;
  }
  const tree: FieldTree = new Map();
  for (const name of list) {
    if (codePointLength(name) > FIELDS_MAX_NAME_LENGTH) {
      errors._fields = `_fields names must be at most ${FIELDS_MAX_NAME_LENGTH} characters long (${printable(name)}).`;
      return null;
    }
    const parts = name.split('.');
    if (parts.length > FIELDS_MAX_DEPTH) {
      errors._fields = `_fields names must be at most ${FIELDS_MAX_DEPTH} levels deep (${printable(name)}).`;
      return null;
    }
    // As WordPress: a field kept whole stays whole; a deeper name under it adds nothing.
    let node = tree;
    let whole = false;
    for (const part of parts.slice(0, -1)) {
      const next = node.get(part);
      if (next === true) {
        whole = true;
        break;
      }
      if (next) node = next;
      else {
        const child: FieldTree = new Map();
        node.set(part, child);
        node = child;
      }
    }
    if (!whole) node.set(parts[parts.length - 1], true);
  }
  return tree;
}

function embedRels(values: string[] | null, errors: Record<string, string>): View['embed'] {
  if (values === null) return null;
  // rest_parse_embed_param: '', '0', '1' and 'true' mean every link.
  if (values.every((v) => v === '' || v === '0' || v === '1' || v === 'true')) return 'all';
  const rels = names(values);
  if (rels.length === 0) return 'all';
  if (rels.length > FIELDS_MAX_NAMES) {
    errors._embed = `_embed must name at most ${FIELDS_MAX_NAMES} link relations.`;
    return null;
  }
  return new Set(rels);
}

/** `_fields` and `_embed` of a query; a 400 naming them when they go beyond the bounds. */
export function parseView(query: Record<string, unknown>): View {
  const errors: Record<string, string> = {};
  const fieldValues = rawValues(query, FIELDS_KEY);
  const view: View = { fields: fieldValues ? fieldTree(names(fieldValues), errors) : null, embed: embedRels(rawValues(query, EMBED_KEY), errors) };
  if (Object.keys(errors).length) throw invalidParams(errors);
  return view;
}

/**
 * Parses a query with its own parser and the view parameters at once: a 400 lists every
 * bad parameter of both.
 */
export function parseWithView<Q>(query: Record<string, unknown>, parse: (query: Record<string, unknown>) => Q): { q: Q; view: View } {
  let q: Q | undefined;
  let view: View | undefined;
  const refusals: ApiError[] = [];
  for (const step of [() => (q = parse(query)), () => (view = parseView(query))]) {
    try {
      step();
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'wu_rest_invalid_parameter') throw err;
      refusals.push(err);
    }
  }
  if (refusals.length === 1) throw refusals[0];
  if (refusals.length > 1) throw invalidParams(Object.assign({}, ...refusals.map((e) => e.extra.params as Record<string, string>)));
  return { q: q as Q, view: view! };
}

/** Whether the answer keeps `name` (a top-level field). */
export function keeps(view: View, name: string): boolean {
  return view.fields === null || view.fields.has(name);
}

/** The sub-selection of a top-level field: null when it is kept whole, undefined when not kept. */
export function subTree(tree: FieldTree | null, name: string): FieldTree | null | undefined {
  if (tree === null) return null;
  const sub = tree.get(name);
  return sub === undefined ? undefined : sub === true ? null : sub;
}

function projectValue(value: unknown, tree: FieldTree): unknown {
  if (Array.isArray(value)) return value.map((item) => (item && typeof item === 'object' && !Array.isArray(item) ? projectObject(item as Record<string, unknown>, tree) : item));
  if (value && typeof value === 'object') return projectObject(value as Record<string, unknown>, tree);
  // As WordPress: a scalar asked for inside is kept whole.
  return value;
}

function projectObject(obj: Record<string, unknown>, tree: FieldTree): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, sub] of tree) {
    if (!Object.hasOwn(obj, key)) continue;
    out[key] = sub === true ? obj[key] : projectValue(obj[key], sub);
  }
  return out;
}

/** The record with only the fields of the tree (null: unchanged). */
export function applyFields<T>(rec: T, tree: FieldTree | null): T | Record<string, unknown> {
  if (tree === null || !rec || typeof rec !== 'object') return rec;
  return projectObject(rec as Record<string, unknown>, tree);
}

/** Top-level names of a tree, for the services (which fields to read). */
export function topLevel(tree: FieldTree | null): Set<string> | undefined {
  return tree === null ? undefined : new Set(tree.keys());
}

/** The OpenAPI parameters `_fields` (and `_embed` when the answer has embeddable links). */
export function viewQueryParams(fieldNames: readonly string[], embeddable: readonly string[] = []): ParamDoc[] {
  const params: ParamDoc[] = [
    {
      name: '_fields',
      description:
        `Only these fields in the answer (WordPress' _fields): a comma-separated list, or the parameter repeated (_fields[]=id&_fields[]=email). ` +
        `a.b keeps b inside the object a (and inside each object of a list a). Names that match nothing are absent; _links and _embedded are kept only when named. ` +
        `At most ${FIELDS_MAX_NAMES} names, each at most ${FIELDS_MAX_NAME_LENGTH} characters and ${FIELDS_MAX_DEPTH} levels deep (400 otherwise). Fields: ${fieldNames.join(', ')}.`,
      // Each item as one name would be (a comma-separated item may be longer: the document is stricter than the server).
      schema: { type: 'array', items: { type: 'string', maxLength: FIELDS_MAX_NAME_LENGTH, pattern: `^[^.]*(?:\\.[^.]*){0,${FIELDS_MAX_DEPTH - 1}}$` }, maxItems: FIELDS_MAX_NAMES },
      example: ['id', 'date_created'],
    },
  ];
  if (embeddable.length > 0) {
    params.push({
      name: '_embed',
      description:
        `Embed the linked records under _embedded (WordPress' _embed): empty, 1 or true for every embeddable link (${embeddable.join(', ')}), ` +
        `or a comma-separated list of link relations; unknown ones are ignored. One query per relation for the whole page. With _fields, name _embedded too.`,
      schema: { type: 'array', items: { type: 'string', maxLength: FIELDS_MAX_NAME_LENGTH }, maxItems: FIELDS_MAX_NAMES },
      example: [embeddable[0]],
    });
  }
  return params;
}
