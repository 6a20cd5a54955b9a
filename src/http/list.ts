import type { Request, Response } from 'express';
import { COUNT_EXACT_UP_TO, CURSOR_INVALID, CURSOR_SHAPE, type FilterType, type ListPage, type ListQuery, type ListSpec } from '../db/list';
import { humanList } from '../infra/text';
import { invalidParams } from './errors';
import { printable } from './input';
import { publicBase } from './public-url';
import { codePointLength, DATETIME_PATTERN, MAX_QUERY_INTEGER } from './validation';

/**
 * The HTTP half of the list machinery every list endpoint shares: the request's paging,
 * search, ordering, exact filters, `{column}__in` / `{column}__not_in` and the `date_created`
 * range parsed into a ListQuery (src/db/list.ts runs it), the paging headers, the document's
 * parameters.
 */

/** Query keys no list validates: credentials, WordPress' own underscore parameters, `context`. */
function ignoredKey(key: string): boolean {
  return key.startsWith('_') || key === 'context' || /^api[_-](key|secret)$/.test(key);
}

/** At most 15 digits (MAX_QUERY_INTEGER), so that it is exact as a JavaScript number. */
function parseInteger(raw: string): number | null {
  return /^-?\d{1,15}$/.test(raw.trim()) ? Number.parseInt(raw, 10) : null;
}

function parseDate(raw: string): Date | null {
  const s = raw.trim();
  if (!DATETIME_PATTERN.test(s)) return null;
  // A date or time without a zone is taken as UTC.
  let iso = s.replace(' ', 'T');
  if (/^\d{4}-\d{2}-\d{2}$/.test(iso)) iso += 'T00:00:00Z';
  else if (!/(Z|[+-]\d{2}:?\d{2})$/.test(iso)) iso += 'Z';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? null : d;
}

function typeName(type: FilterType): string {
  if (typeof type === 'object') return `one of ${humanList(type.enum)}`;
  return { int: 'integer', string: 'string', upper: 'string', ci: 'string', bool: 'boolean' }[type];
}

function convert(raw: string, type: FilterType): string | number | boolean | null {
  if (type === 'int') return parseInteger(raw);
  if (type === 'bool') {
    const v = raw.trim().toLowerCase();
    if (v === 'true' || v === '1') return true;
    if (v === 'false' || v === '0') return false;
    return null;
  }
  if (typeof type === 'object') return type.enum.includes(raw) ? raw : null;
  if (type === 'upper') return raw.toUpperCase();
  return raw;
}

/** Values of a parameter given as `k=a`, `k[]=a&k[]=b`, or `k=a,b` (the last only for lists). */
function values(raw: unknown, splitCommas: boolean): string[] | null {
  const arr = Array.isArray(raw) ? raw : [raw];
  if (!arr.every((v) => typeof v === 'string')) return null;
  const strings = arr as string[];
  return splitCommas ? strings.flatMap((s) => s.split(',')).filter((s) => s !== '') : strings;
}

export function parseListQuery(query: Record<string, unknown>, spec: ListSpec): ListQuery {
  const errors: Record<string, string> = {};
  const out: ListQuery = { page: 1, perPage: 20, orderBy: 'id', orderColumn: spec.idColumn, order: 'desc', conditions: [] };
  let orderGiven = false;

  for (const [rawKey, rawValue] of Object.entries(query)) {
    if (ignoredKey(rawKey)) continue;
    const key = rawKey.endsWith('[]') ? rawKey.slice(0, -2) : rawKey;
    const single = (): string | null => {
      const v = values(rawValue, false);
      if (!v || v.length !== 1) {
        errors[key] = `${key} must be given once, as a single value.`;
        return null;
      }
      return v[0];
    };

    if (key === 'per_page' || key === 'page') {
      const v = single();
      if (v === null) continue;
      const n = parseInteger(v);
      if (key === 'per_page') {
        if (n === null || n < 1 || n > 100) errors.per_page = 'per_page must be between 1 (inclusive) and 100 (inclusive)';
        else out.perPage = n;
      } else if (n === null || n < 1) errors.page = 'page must be greater than or equal to 1';
      else out.page = n;
      continue;
    }
    if (key === 'search') {
      const v = single();
      if (v === null) continue;
      if (codePointLength(v) > 200) errors.search = 'search must be at most 200 characters long.';
      else if (v.trim() !== '') out.search = v.trim();
      continue;
    }
    if (key === 'orderby') {
      const v = single();
      if (v === null) continue;
      const column = Object.hasOwn(spec.sortable, v) ? spec.sortable[v] : undefined;
      if (!column) errors.orderby = `orderby is not one of ${humanList(Object.keys(spec.sortable))}.`;
      else {
        out.orderBy = v;
        out.orderColumn = column;
        orderGiven = true;
      }
      continue;
    }
    if (key === 'cursor') {
      const v = single();
      if (v === null) continue;
      if (!CURSOR_SHAPE.test(v)) errors.cursor = CURSOR_INVALID;
      else out.cursor = v;
      continue;
    }
    if (key === 'order') {
      const v = single();
      if (v === null) continue;
      const lower = v.toLowerCase();
      if (lower !== 'asc' && lower !== 'desc') errors.order = 'order is not one of asc and desc.';
      else out.order = lower;
      continue;
    }
    const range = /^(date_created|date_created_query)\[(after|before)\]$/.exec(key);
    if (range) {
      const v = single();
      if (v === null) continue;
      const d = parseDate(v);
      if (!d) errors[key] = `${key} is not a valid date (use ISO 8601, e.g. 2026-01-31 or 2026-01-31T12:00:00Z).`;
      else if (range[2] === 'after') out.dateAfter = d;
      else out.dateBefore = d;
      continue;
    }
    if (key === 'date_created' || key === 'date_created_query') {
      errors[key] = `${key} is a range: use ${key}[after] and/or ${key}[before].`;
      continue;
    }
    const other = /^([a-z_]+)(?:\[(after|before)\])?$/.exec(key);
    if (other && spec.dateRanges && Object.hasOwn(spec.dateRanges, other[1])) {
      const name = other[1];
      if (!other[2]) {
        errors[key] = `${key} is a range: use ${key}[after] and/or ${key}[before].`;
        continue;
      }
      const v = single();
      if (v === null) continue;
      const d = parseDate(v);
      if (!d) {
        errors[key] = `${key} is not a valid date (use ISO 8601, e.g. 2026-01-31 or 2026-01-31T12:00:00Z).`;
        continue;
      }
      out.ranges ??= [];
      let range = out.ranges.find((r) => r.name === name);
      if (!range) out.ranges.push((range = { name, column: spec.dateRanges[name] }));
      range[other[2] as 'after' | 'before'] = d;
      continue;
    }

    // Matches any key (an empty one, or one holding a line break, included).
    const m = /^([\s\S]*?)(__in|__not_in)?$/.exec(key)!;
    const filterName = m[1];
    const filter = filterName === 'id' ? { column: spec.idColumn, type: 'int' as const } : Object.hasOwn(spec.filters, filterName) ? spec.filters[filterName] : undefined;
    if (!filter) {
      const shown = printable(rawKey);
      errors[shown] = rawKey === '' ? 'A query parameter has an empty name (as in "?=x"): remove it.' : `${shown} is not a valid parameter.`;
      continue;
    }
    const op = m[2] === '__in' ? 'in' : m[2] === '__not_in' ? 'not_in' : 'eq';
    const raws = op === 'eq' ? (single() === null ? null : values(rawValue, false)) : values(rawValue, true);
    if (raws === null) {
      errors[key] ??= `${key} must be a list of values.`;
      continue;
    }
    if (op !== 'eq' && raws.length === 0) {
      errors[key] = `${key} must contain at least 1 value.`;
      continue;
    }
    if (raws.length > 100) {
      errors[key] = `${key} must contain at most 100 values.`;
      continue;
    }
    const converted = raws.map((r) => convert(r, filter.type));
    if (converted.some((c) => c === null)) {
      errors[key] = `${key} must be ${op === 'eq' ? '' : 'a list of values each '}${typeof filter.type === 'object' ? '' : 'of type '}${typeName(filter.type)}.`;
      continue;
    }
    const given = converted as (string | number | boolean)[];
    if (op === 'not_in' && typeof filter.type === 'object') {
      // An enum column holds only its values (NOT NULL, and a CHECK of the same list: a test
      // holds every such filter to it), so NOT IN is IN the others: what the (column, id) index
      // and the kept counts serve, where NOT IN reads every row.
      const others = filter.type.enum.filter((v) => !given.includes(v));
      out.conditions.push({ column: filter.column, op: 'in', values: others });
      continue;
    }
    out.conditions.push({ column: filter.column, op, values: given, ...(filter.type === 'ci' ? { caseInsensitive: true } : {}) });
  }

  if (out.dateAfter && out.dateBefore && out.dateAfter > out.dateBefore) {
    errors['date_created[after]'] = 'date_created[after] must not be later than date_created[before].';
  }
  for (const r of out.ranges ?? []) {
    if (r.after && r.before && r.after > r.before) errors[`${r.name}[after]`] = `${r.name}[after] must not be later than ${r.name}[before].`;
  }
  if (Object.keys(errors).length > 0) throw invalidParams(errors);
  if (!orderGiven) {
    out.orderBy = 'id';
    out.orderColumn = spec.idColumn;
  }
  return out;
}

/** WordPress' paging headers, `Link` rel="next"/"prev" included (keyset cursors, with the page number). */
export function setPagingHeaders(req: Request, res: Response, q: ListQuery, page: ListPage<unknown>): void {
  const totalPages = Math.ceil(page.total / q.perPage);
  res.setHeader('X-WP-Total', String(page.total));
  res.setHeader('X-WP-TotalPages', String(totalPages));
  res.setHeader('X-WP-Total-Exact', String(page.exact));
  const links: string[] = [];
  const base = `${publicBase(req)}${req.baseUrl}${req.path}`;
  const url = (pageNo: number, cursor: string | undefined) => {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(req.query)) {
      if (k === 'page' || k === 'cursor' || /^api[_-](key|secret)$/.test(k)) continue;
      for (const item of Array.isArray(v) ? v : [v]) if (typeof item === 'string') params.append(k, item);
    }
    params.set('page', String(pageNo));
    // Back on page 1 it is page 1 itself, with no cursor.
    if (cursor !== undefined && pageNo > 1) params.set('cursor', cursor);
    return `${base}?${params.toString()}`;
  };
  if (page.prev) links.push(`<${url(Math.max(1, q.page - 1), page.prev)}>; rel="prev"`);
  else if (q.page > 1 && q.cursor === undefined && q.page - 1 <= Math.max(totalPages, 1)) links.push(`<${url(q.page - 1, undefined)}>; rel="prev"`);
  if (page.next) links.push(`<${url(q.page + 1, page.next)}>; rel="next"`);
  if (links.length) res.setHeader('Link', links.join(', '));
}

const INTEGER = { type: 'integer', minimum: -MAX_QUERY_INTEGER, maximum: MAX_QUERY_INTEGER };

function filterSchema(type: FilterType, inList: boolean): Record<string, unknown> {
  if (typeof type === 'object') return { type: 'string', enum: [...type.enum] };
  if (type === 'int') return INTEGER;
  if (type === 'bool') return { type: 'boolean' };
  // In a list, commas separate values: an item holds none (and is not empty); nor NUL (input.ts).
  return inList ? { type: 'string', pattern: '^[^,\\u0000]+$' } : { type: 'string' };
}

/** The list parameters of a resource, for the OpenAPI document. */
export function listQueryParams(spec: ListSpec): import('./route-registry').ParamDoc[] {
  const params: import('./route-registry').ParamDoc[] = [
    { name: 'per_page', description: 'Items per page.', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
    { name: 'page', description: 'Page number; a page past the end is []. With `cursor`, only the number the Link URLs carry on (the cursor says where the page starts).', schema: { type: 'integer', minimum: 1, maximum: MAX_QUERY_INTEGER, default: 1 } },
    {
      name: 'cursor',
      description:
        'Opaque keyset cursor, as the `Link` rel="next"/"prev" URLs carry it: following them costs the same at any depth (no OFFSET). Bound to the orderby and order it was given with; any other or altered value is a 400.',
      schema: { type: 'string', pattern: CURSOR_SHAPE.source, maxLength: 1523 },
    },
    { name: 'search', description: `Substring match (case-insensitive) over ${spec.searchable.map((s) => s.replace(/^\w+\./, '')).join(', ')}.`, schema: { type: 'string', maxLength: 200 } },
    { name: 'orderby', description: 'Field to sort by (default id).', schema: { type: 'string', enum: Object.keys(spec.sortable) } },
    { name: 'order', description: 'Direction (default desc).', schema: { type: 'string', enum: ['asc', 'desc'] } },
  ];
  for (const form of ['date_created', 'date_created_query']) {
    for (const edge of ['after', 'before']) {
      params.push({
        name: `${form}[${edge}]`,
        description: `Created at or ${edge} this time (ISO 8601 date, or date and time; no zone means UTC). date_created[after] must not be later than date_created[before] (400).`,
        schema: { type: 'string', pattern: DATETIME_PATTERN.source },
      });
    }
  }
  for (const name of Object.keys(spec.dateRanges ?? {})) {
    for (const edge of ['after', 'before']) {
      params.push({
        name: `${name}[${edge}]`,
        description: `${name} at or ${edge} this time (ISO 8601 date, or date and time; no zone means UTC); a record without one does not match. ${name}[after] must not be later than ${name}[before] (400).`,
        schema: { type: 'string', pattern: DATETIME_PATTERN.source },
      });
    }
  }
  const filters: [string, FilterType][] = [['id', 'int'], ...Object.entries(spec.filters).map(([k, f]) => [k, f.known ? { enum: f.known } : f.type] as [string, FilterType])];
  for (const [name, type] of filters) {
    params.push({ name, description: `Exact filter on ${name}${type === 'ci' ? ' (case-insensitive)' : ''}.${type === 'int' ? ' At most 15 digits.' : ''}`, schema: filterSchema(type, false) });
    for (const suffix of ['__in', '__not_in']) {
      params.push({
        name: `${name}${suffix}`,
        description: `${suffix === '__in' ? 'Any' : 'None'} of these values (repeat \`${name}${suffix}[]=\` or give a comma-separated list), 1 to 100 of them.`,
        schema: { type: 'array', items: filterSchema(type, true), minItems: 1, maxItems: 100 },
      });
    }
  }
  return params;
}

/** Headers of a list response. */
export const LIST_HEADERS = {
  'X-WP-Total': {
    description: `Number of matching records: exact for the unfiltered list, for a counted filter alone, and whenever at most ${COUNT_EXACT_UP_TO} records match; past that, PostgreSQL's planner estimate (X-WP-Total-Exact: false), kept up to a minute per filter set.`,
    schema: { type: 'integer' },
  },
  'X-WP-TotalPages': { description: 'Number of pages at this per_page (from X-WP-Total).', schema: { type: 'integer' } },
  'X-WP-Total-Exact': { description: 'false when X-WP-Total is an estimate.', schema: { type: 'string', enum: ['true', 'false'] } },
  Link: { description: 'rel="next" / rel="prev" page links, when there are such pages; they carry a keyset `cursor` and the page number.', schema: { type: 'string' } },
};
