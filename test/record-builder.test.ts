import { Decimal, moneyOut } from '../src/db/money';
import { recordBuilder } from '../src/db/record-builder';
import type { ColumnKind, Row } from '../src/db/table-service';

/** The record a row gives, written as the plain loop over the columns (what the builder compiles). */
function reference(model: string, columns: [string, ColumnKind][], row: Row): Row {
  const rec: Row = { id: Number(row.id), model };
  for (const [name, kind] of columns) {
    if (!(name in row)) continue;
    const v = row[name];
    if (kind === 'int') rec[name] = v === null || v === undefined ? null : Number(v);
    else if (kind === 'bool') rec[name] = Boolean(v);
    else if (kind === 'money') rec[name] = v === null || v === undefined ? null : new Decimal(v).toNumber();
    else if (kind === 'timestamp') rec[name] = v === null || v === undefined ? null : new Date(v).toISOString();
    else rec[name] = v;
  }
  if ('date_created' in row) rec.date_created = row.date_created === null ? null : new Date(row.date_created).toISOString();
  if ('date_modified' in row) rec.date_modified = row.date_modified === null ? null : new Date(row.date_modified).toISOString();
  return rec;
}

describe('recordBuilder', () => {
  const columns: [string, ColumnKind][] = [
    ['slug', 'text'],
    ['amount', 'money'],
    ['active', 'bool'],
    ['duration', 'int'],
    ['price_variations', 'json'],
    ['date_last_failed', 'timestamp'],
    ['user_id', 'int'],
  ];
  const build = recordBuilder('product', columns);

  it('gives the record the loop over the columns gives: same fields, same order, same values', () => {
    let seed = 11;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)];
    for (let i = 0; i < 2000; i++) {
      const full: Row = {
        id: pick(['1', '42', '9007199254740991', 7]),
        slug: pick(['a-slug', '', null, 'ünïcødé ✓']),
        amount: pick(['29.99', '0.00', '-0.50', '1000000000000.000001', null, 'NaN', '12', 3.5]),
        active: pick([true, false, null, 0, 1]),
        duration: pick([1, 0, null, '12', undefined]),
        price_variations: pick([[], [{ amount: '9.99' }], null]),
        date_last_failed: pick([null, new Date(Date.UTC(2026, 10, 27, 1, 2, 3, 4)), '2026-01-02T03:04:05Z']),
        user_id: pick(['5', null, 17]),
        date_created: new Date(Math.floor(rand() * 2e12)),
        date_modified: new Date(Math.floor(rand() * 2e12)),
        unrelated: 'not a column',
      };
      // A read for some fields: a few of the columns missing.
      const row = Object.fromEntries(Object.entries(full).filter(([k]) => k === 'id' || rand() > 0.2));
      const got = build(row);
      const want = reference('product', columns, row);
      expect(Object.keys(got)).toEqual(Object.keys(want));
      expect(got).toEqual(want);
    }
  });

  it('a row of every column (one object literal) and a row missing one (built a field at a time) give the loop\'s record; a column named id or date_created keeps its place', () => {
    const row: Row = { id: '7', slug: 's', amount: '1.50', active: 1, duration: '3', price_variations: [], date_last_failed: null, user_id: '9', date_created: new Date(0), date_modified: new Date(1) };
    for (const cols of [columns, [['date_created', 'timestamp'], ...columns, ['id', 'int']] as [string, ColumnKind][]]) {
      const b = recordBuilder('product', cols);
      for (const r of [row, Object.fromEntries(Object.entries(row).filter(([k]) => k !== 'slug')), Object.fromEntries(Object.entries(row).filter(([k]) => k !== 'date_modified'))]) {
        const want = reference('product', cols, r);
        expect(Object.keys(b(r))).toEqual(Object.keys(want));
        expect(b(r)).toEqual(want);
      }
    }
  });

  it('refuses a name that is not a plain identifier (it would be written into code)', () => {
    expect(() => recordBuilder('product', [['a"); process.exit(1); ("', 'text']])).toThrow(/not a plain identifier/);
    expect(() => recordBuilder('x-y', [])).toThrow(/not a plain identifier/);
  });
});

describe('moneyOut', () => {
  it('gives the number Decimal gives, for plain decimals and for what only Decimal reads', () => {
    let seed = 3;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const values = ['0', '0.00', '-0', '-0.00', '29.99', '0.1', '0.30000000000000004', '123456789012345678901234567890.123456789', '1e3', '-1.5E-7', 'NaN', 'Infinity', '-Infinity', '+5', '.5', '5.'];
    for (let i = 0; i < 5000; i++) {
      const int = String(Math.floor(rand() * 10 ** Math.floor(rand() * 20)));
      const frac = String(Math.floor(rand() * 10 ** 12)).slice(0, Math.floor(rand() * 12));
      values.push(`${rand() < 0.3 ? '-' : ''}${int}${frac ? `.${frac}` : ''}`);
    }
    for (const v of values) expect(Object.is(moneyOut(v), new Decimal(v).toNumber())).toBe(true);
    expect(moneyOut(null)).toBeNull();
    expect(moneyOut(2.5)).toBe(2.5);
  });
});
