import pg from 'pg';
import { fastTimestamptzParser, isoDate, isoString } from '../src/db/timestamps';
import { createTestContext, type TestContext } from './helpers';

// pg's own parser (postgres-date), as pg-types registers it for timestamptz before src/db/knex.ts replaces it.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const original = require('postgres-date') as (s: string) => unknown;

describe('isoString', () => {
  it('writes what toISOString writes, over random instants, every millisecond and the edge years', () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const dates = [
      ...Array.from({ length: 20_000 }, () => new Date(Math.floor((rand() - 0.3) * 4e14))),
      ...Array.from({ length: 1000 }, (_, ms) => new Date(Date.UTC(2026, 0, 9, 8, 7, 6, ms))),
      new Date(Date.UTC(999, 11, 31, 23, 59, 59, 999)),
      new Date(Date.UTC(1000, 0, 1)),
      new Date(Date.UTC(9999, 11, 31, 23, 59, 59, 999)),
      new Date(Date.UTC(10000, 0, 1)),
      new Date(-62198755200000),
      new Date(8.64e15),
      new Date(-8.64e15),
    ];
    for (const d of dates) expect(isoString(d)).toBe(d.toISOString());
    expect(isoDate('2026-11-26T17:42:47.5+01:00')).toBe('2026-11-26T16:42:47.500Z');
    expect(isoDate(null)).toBeNull();
  });

  it('refuses an invalid date as toISOString does', () => {
    expect(() => isoString(new Date(Number.NaN))).toThrow(RangeError);
  });
});

describe('timestamptz parser', () => {
  const fallbacks: string[] = [];
  const parse = fastTimestamptzParser((v) => {
    fallbacks.push(v);
    return original(v);
  });
  const same = (v: string) => {
    const got = parse(v);
    const want = original(v);
    if (want instanceof Date) {
      expect(got).toBeInstanceOf(Date);
      expect((got as Date).getTime()).toBe(want.getTime());
    } else expect(got).toEqual(want);
  };

  it('reads what PostgreSQL sends exactly as pg does, without the fallback', () => {
    fallbacks.length = 0;
    const cases = [
      '2026-11-26 17:42:47+00',
      '2026-11-26 17:42:47.1+00',
      '2026-11-26 17:42:47.12+00',
      '2026-11-26 17:42:47.123+00',
      '2026-11-26 17:42:47.123456+00',
      '2026-11-26 17:42:47.000001+00',
      '2000-02-29 23:59:59.999999+00',
      '1970-01-01 00:00:00+00',
      '2026-11-26 17:42:47.5-08',
      '2026-11-26 17:42:47+05:30',
      '2026-11-26 17:42:47.25+05:45',
      '1901-12-13 20:45:52+00:09:21',
      '9999-12-31 23:59:59.999999+14',
    ];
    for (const c of cases) same(c);
    expect(fallbacks).toEqual([]);
  });

  it('agrees with pg over every millisecond fraction and random instants', () => {
    for (let ms = 0; ms < 1000; ms++) same(`2025-03-04 05:06:07.${String(ms).padStart(3, '0')}${ms % 2 ? '417' : ''}+00`);
    let seed = 42;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 2000; i++) {
      const d = new Date(Date.UTC(1900, 0, 1) + Math.floor(rand() * 250 * 365.25 * 86_400_000));
      const off = Math.floor(rand() * 27) - 12;
      const local = new Date(d.getTime() + off * 3_600_000).toISOString().replace('T', ' ').replace('Z', '');
      same(`${local}${off < 0 ? '-' : '+'}${String(Math.abs(off)).padStart(2, '0')}`);
    }
  });

  it('hands anything unusual to pg: BC, infinity, short years, garbage', () => {
    for (const v of ['0044-03-15 12:00:00+00 BC', 'infinity', '-infinity', '0099-01-01 00:00:00+00', '12345-01-01 00:00:00+00', '2026-11-26', 'not a date at all!!', '2026-11-26 17:42:47.1234567+00']) {
      fallbacks.length = 0;
      same(v);
      expect(fallbacks).toEqual([v]);
    }
  });

  describe('through the database', () => {
    let t: TestContext;
    beforeAll(async () => {
      t = await createTestContext();
    });
    afterAll(async () => {
      await t.close();
    });

    it('is the parser pg uses for timestamptz, in every session time zone', async () => {
      expect(pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ)).not.toBe(original);
      for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns', 'Pacific/Chatham']) {
        const rows = await t.db.transaction(async (trx) => {
          await trx.raw(`SET LOCAL TIME ZONE '${zone}'`);
          return (await trx.raw(`SELECT timestamptz '2026-11-26 17:42:47.123456+00' AS a, timestamptz '1969-07-20 20:17:40Z' AS b, 'infinity'::timestamptz AS c, a::text AS at FROM (SELECT timestamptz '2026-11-26 17:42:47.123456+00' AS a) x`)).rows;
        });
        expect((rows[0].a as Date).toISOString()).toBe('2026-11-26T17:42:47.123Z');
        expect((rows[0].b as Date).toISOString()).toBe('1969-07-20T20:17:40.000Z');
        expect(rows[0].c).toBe(Infinity);
        expect((original(rows[0].at) as Date).getTime()).toBe((rows[0].a as Date).getTime());
      }
    });
  });
});
