/**
 * Rows of a result as JS objects, one compiled builder per set of column names: for the named
 * statements (src/db/prepared.ts) and for pg's own results (src/db/knex.ts).
 */
/** A column's type parser (pg's, for its type). */
export type Parser = (v: string) => unknown;
/** A row from its raw text fields and each column's parser (null stays null). */
export type RowBuilder = (fields: (string | null)[], parsers: Parser[]) => Record<string, unknown>;

/** The loop over the columns, for names the builder does not compile: a column named `__proto__` is an own property, as in pg's rows. */
function loopBuilder(names: string[]): RowBuilder {
  return (fields, parsers) => {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++) {
      const raw = fields[i];
      const value = raw === null ? null : parsers[i](raw);
      if (names[i] === '__proto__') Object.defineProperty(row, '__proto__', { value, enumerable: true, writable: true, configurable: true });
      else row[names[i]] = value;
    }
    return row;
  };
}

/**
 * Compiled builders by their columns' names (statements of the same columns share one). Bounded:
 * past it (a request's `_fields` varies the columns read), the loop, never a compile per result.
 */
const builders = new Map<string, RowBuilder>();
const MAX_BUILDERS = 256;

/**
 * A row's builder for these result columns: one object literal of every column, compiled once.
 * V8 allocates such an object once, with room for every property, and it keeps fast properties
 * when runList deletes its last three columns (the count and sort keys), last first
 * (test/prepared.test.ts asks V8). Built from {} a column at a time, a 40-column row outgrew its
 * property store every few columns and each growth copied it: the rows were 22% of what a
 * 100-row memberships page allocated (issue 14), and a literal row is built in a fifteenth of the
 * time (110 against 1,620 ns for 43 columns, alone). Each name is written as a JSON string (a
 * valid JS string literal, whatever the server named the column); `__proto__`, which a literal
 * would take as the prototype, and duplicate names get the loop.
 */
export function rowBuilder(names: string[]): RowBuilder {
  if (names.includes('__proto__') || new Set(names).size !== names.length) return loopBuilder(names);
  const key = JSON.stringify(names);
  let build = builders.get(key);
  if (build) return build;
  if (builders.size >= MAX_BUILDERS) return loopBuilder(names);
  const props = names.map((name, i) => `${JSON.stringify(name)}: f[${i}] === null ? null : p[${i}](f[${i}])`);
  // eslint-disable-next-line no-new-func -- names only as JSON string literals (see above); values are passed in
  build = new Function('f', 'p', `"use strict"; return { ${props.join(', ')} };`) as RowBuilder;
  builders.set(key, build);
  return build;
}
