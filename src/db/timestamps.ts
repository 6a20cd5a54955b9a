/**
 * timestamptz as PostgreSQL sends it in text ("2026-11-26 17:42:47.123456+00", the ISO DateStyle
 * with any session time zone) read into a Date without a regular expression: on a 100-row list
 * page postgres-date's parser and the Date objects it makes were 5% of the API's CPU. Anything
 * else (BC years, years past 9999, infinity, an unusual offset) goes to the parser pg ships, so
 * the result is always the one it gives.
 */
export function fastTimestamptzParser(fallback: (v: string) => unknown): (v: string) => unknown {
  return (v: string) => {
    const n = v.length;
    // YYYY-MM-DD HH:MM:SS is 19 characters; the offset needs at least 3 more (+HH).
    if (n < 22 || v.charCodeAt(4) !== 45 || v.charCodeAt(7) !== 45 || v.charCodeAt(10) !== 32 || v.charCodeAt(13) !== 58 || v.charCodeAt(16) !== 58) return fallback(v);
    const year = digits(v, 0, 4);
    const month = digits(v, 5, 2);
    const day = digits(v, 8, 2);
    const hour = digits(v, 11, 2);
    const minute = digits(v, 14, 2);
    const second = digits(v, 17, 2);
    if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return fallback(v);
    let i = 19;
    let ms = 0;
    if (v.charCodeAt(i) === 46) {
      // Fractional seconds: up to 6 digits; milliseconds are what a Date holds (truncated, as pg's own parser does).
      const start = ++i;
      while (i < n && v.charCodeAt(i) >= 48 && v.charCodeAt(i) <= 57) i++;
      const len = i - start;
      if (len === 0 || len > 6) return fallback(v);
      const frac = digits(v, start, Math.min(len, 3));
      ms = len >= 3 ? frac : len === 2 ? frac * 10 : frac * 100;
    }
    const sign = v.charCodeAt(i);
    if (sign !== 43 && sign !== 45) return fallback(v);
    // +HH, +HH:MM or +HH:MM:SS, and nothing after (" BC" goes to the fallback).
    const rest = n - i - 1;
    if (rest !== 2 && rest !== 5 && rest !== 8) return fallback(v);
    const oh = digits(v, i + 1, 2);
    const om = rest >= 5 && v.charCodeAt(i + 3) === 58 ? digits(v, i + 4, 2) : rest >= 5 ? -1 : 0;
    const os = rest === 8 && v.charCodeAt(i + 6) === 58 ? digits(v, i + 7, 2) : rest === 8 ? -1 : 0;
    if (oh < 0 || om < 0 || os < 0) return fallback(v);
    const offsetMs = (sign === 45 ? -1 : 1) * ((oh * 60 + om) * 60 + os) * 1000;
    // Date.UTC takes years 0-99 as 1900-1999; those go to the fallback (which knows).
    if (year < 100) return fallback(v);
    return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMs);
  };
}

/** The number written by `len` ASCII digits at `at`, or -1. */
function digits(v: string, at: number, len: number): number {
  let x = 0;
  for (let i = at; i < at + len; i++) {
    const c = v.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    x = x * 10 + c;
  }
  return x;
}

/** A timestamp from the API (no zone means UTC). */
export function toTimestamp(v: string | null | undefined): Date | null | undefined {
  if (v === undefined || v === null) return v;
  let iso = v.replace(' ', 'T');
  if (/^\d{4}-\d{2}-\d{2}$/.test(iso)) iso += 'T00:00:00Z';
  else if (!/(Z|[+-]\d{2}:?\d{2})$/.test(iso)) iso += 'Z';
  return new Date(iso);
}


/** Dates to the wire as ISO 8601 UTC; null stays null. */
export function isoDate(v: Date | string | null | undefined): string | null {
  if (v === null || v === undefined) return null;
  return isoString(v instanceof Date ? v : new Date(v));
}

/** The ASCII code of a number's digit: tens (t = 10), hundreds (t = 100)... */
const digit = (n: number, t = 1) => 48 + (Math.floor(n / t) % 10);

/**
 * `date.toISOString()`, built from its UTC fields as one string of its 24 character codes:
 * 124 ns where V8's toISOString took 425 and the template of padded parts it replaces 180-200
 * (alone; a list record has two to eight dates), and one allocation where that template made
 * a dozen (14% of what a 100-row memberships page allocated, issue 14). Years outside 1000-9999 (which
 * toISOString writes with a sign or six digits) and invalid dates (RangeError) take
 * toISOString itself.
 */
export function isoString(date: Date): string {
  const y = date.getUTCFullYear();
  if (!(y >= 1000 && y <= 9999)) return date.toISOString();
  const mo = date.getUTCMonth() + 1;
  const d = date.getUTCDate();
  const h = date.getUTCHours();
  const mi = date.getUTCMinutes();
  const s = date.getUTCSeconds();
  const ms = date.getUTCMilliseconds();
  // prettier-ignore
  return String.fromCharCode(
    digit(y, 1000), digit(y, 100), digit(y, 10), digit(y), 45, // YYYY-
    digit(mo, 10), digit(mo), 45, digit(d, 10), digit(d), 84, // MM-DDT
    digit(h, 10), digit(h), 58, digit(mi, 10), digit(mi), 58, digit(s, 10), digit(s), 46, // HH:MM:SS.
    digit(ms, 100), digit(ms, 10), digit(ms), 90, // mmmZ
  );
}
