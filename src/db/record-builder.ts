import { moneyOut } from './money';
import type { ColumnKind, Row } from './table-service';
import { isoDate } from './timestamps';

/** What a column of each kind becomes in a record (text and json pass as they are). */
const CONVERT = {
  int: (v: unknown) => (v === null || v === undefined ? null : Number(v)),
  bool: (v: unknown) => Boolean(v),
  money: moneyOut,
  timestamp: isoDate,
} as const;

/** A column or model name the builder may write into its code: a plain identifier. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * A resource's row -> record function (before `decorate`), compiled once from its columns:
 * `{ id, model, ...the columns in their order, date_created, date_modified }`, each column
 * converted by its kind, a column missing from the row (a read for some fields) left out.
 *
 * Compiled rather than a loop over the columns: the loop's reads and writes under a different
 * name each turn are megamorphic in V8, and building the records of a 20-row page took 85 us;
 * the compiled function reads and writes each name at its own site (a quarter of that). The
 * code holds only names from the resource's configuration (never a request's), each checked to
 * be a plain identifier and written as a JSON string; the values it calls are passed in.
 */
export function recordBuilder(model: string, columns: [string, ColumnKind][]): (row: Row) => Row {
  for (const name of [model, ...columns.map(([n]) => n)]) {
    if (!IDENTIFIER.test(name)) throw new Error(`recordBuilder: ${JSON.stringify(name)} is not a plain identifier`);
  }
  const key = (name: string) => JSON.stringify(name);
  const value = (name: string, kind: ColumnKind) => (kind === 'text' || kind === 'json' ? `row[${key(name)}]` : `convert.${kind}(row[${key(name)}])`);
  // A row of every column (a read of the whole record, the common case) becomes one object
  // literal: V8 allocates it once with room for every property. Added one at a time, its
  // properties outgrew their backing store every few columns, and each growth copied it: 13%
  // of what a 100-row memberships page allocated (issue 14). Same keys, order and values.
  const every = [...columns.map(([name]) => name), 'date_created', 'date_modified'].map((name) => `${key(name)} in row`).join(' && ');
  const literal = [
    'id: Number(row.id)',
    `model: ${key(model)}`,
    ...columns.map(([name, kind]) => `${key(name)}: ${value(name, kind)}`),
    'date_created: convert.timestamp(row.date_created)',
    'date_modified: convert.timestamp(row.date_modified)',
  ].join(', ');
  const lines = [
    `if (${every}) return { ${literal} };`,
    `const rec = { id: Number(row.id), model: ${key(model)} };`,
    ...columns.map(([name, kind]) => `if (${key(name)} in row) rec[${key(name)}] = ${value(name, kind)};`),
    `if ("date_created" in row) rec.date_created = convert.timestamp(row.date_created);`,
    `if ("date_modified" in row) rec.date_modified = convert.timestamp(row.date_modified);`,
    'return rec;',
  ];
  // eslint-disable-next-line no-new-func -- compiled from configured identifiers only (see above)
  const make = new Function('convert', `"use strict"; return function toRecord(row) {\n${lines.join('\n')}\n};`) as (convert: typeof CONVERT) => (row: Row) => Row;
  return make(CONVERT);
}
