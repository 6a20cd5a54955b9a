import Decimal from 'decimal.js';

/** ISO 4217 codes known to the runtime's ICU data. */
export const CURRENCIES: ReadonlySet<string> = new Set(Intl.supportedValuesOf('currency'));

/** A numeric column (string from pg) to a JSON number. */
export function moneyOut(v: string | number | null): number | null {
  if (v === null || v === undefined) return null;
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
