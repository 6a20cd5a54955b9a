import Decimal from 'decimal.js';

/** ISO 4217 codes known to the runtime's ICU data. */
export const CURRENCIES: ReadonlySet<string> = new Set(Intl.supportedValuesOf('currency'));

/** A plain decimal, as PostgreSQL writes a numeric: what Number() reads exactly as Decimal does. */
const PLAIN_DECIMAL = /^-?\d+(\.\d+)?$/;

/**
 * A numeric column (string from pg) to a JSON number: the nearest double, as
 * `new Decimal(v).toNumber()` gives it. A plain decimal string is read by Number() straight
 * away (both are the correctly rounded double of the same exact value; Decimal took about
 * 0.5 us a value, on every amount of every list row); anything else goes through Decimal.
 */
export function moneyOut(v: string | number | null): number | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string' && PLAIN_DECIMAL.test(v)) return Number(v);
  return new Decimal(v).toNumber();
}

export { Decimal };

const MINOR_UNITS = new Map<string, number>();

/** Decimal places of a currency's minor unit (USD 2, JPY 0, KWD 3), from the runtime's ISO 4217 data. */
export function minorUnits(currency: string): number {
  const code = currency.trim().toUpperCase();
  let digits = MINOR_UNITS.get(code);
  if (digits === undefined) {
    digits = CURRENCIES.has(code) ? new Intl.NumberFormat('en', { style: 'currency', currency: code }).resolvedOptions().maximumFractionDigits ?? 2 : 2;
    MINOR_UNITS.set(code, digits);
  }
  return digits;
}
