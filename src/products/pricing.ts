import { Decimal } from '../db/money';

/** A price for a billing period: the product's own, or one of its price variations. */
export interface PricePeriod {
  amount: string;
  duration: number;
  duration_unit: string;
}

/** What a product holds for pricing (a products row, or its API record). */
export interface PricedProduct {
  slug: string;
  amount: string | number;
  duration: number;
  duration_unit: string;
  recurring: boolean;
  price_variations?: { amount: string | number; duration: number; duration_unit: string }[] | null;
}

/** Units that convert exactly into one another: days and weeks, months and years. */
const IN_BASE: Record<string, { base: 'day' | 'month'; n: number }> = {
  day: { base: 'day', n: 1 },
  week: { base: 'day', n: 7 },
  month: { base: 'month', n: 1 },
  year: { base: 'month', n: 12 },
};

export const periodLabel = (duration: number, unit: string) => `${duration} ${unit}${duration === 1 ? '' : 's'}`;

/** The product's prices: its own period first, then its variations. */
export function pricePeriods(p: PricedProduct): PricePeriod[] {
  return [
    { amount: String(p.amount), duration: Number(p.duration), duration_unit: p.duration_unit },
    ...(p.price_variations ?? []).map((v) => ({ amount: String(v.amount), duration: Number(v.duration), duration_unit: v.duration_unit })),
  ];
}

/** The price the product states for exactly this period, or null. */
export function exactPrice(p: PricedProduct, duration: number, unit: string): Decimal | null {
  const found = pricePeriods(p).find((v) => v.duration === duration && v.duration_unit === unit);
  return found ? new Decimal(found.amount) : null;
}

/**
 * What a recurring add-on costs for the membership's period: the price it states for that
 * period, else its own price scaled when the periods convert exactly (a monthly add-on on a
 * yearly membership: 12× its price; a 2-week one on a 1-week membership: half), else null (a
 * weekly add-on on a monthly membership has no exact price).
 */
export function addonPrice(p: PricedProduct, duration: number, unit: string): Decimal | null {
  const exact = exactPrice(p, duration, unit);
  if (exact) return exact;
  const target = IN_BASE[unit];
  for (const v of pricePeriods(p)) {
    const own = IN_BASE[v.duration_unit];
    if (own && target && own.base === target.base) return new Decimal(v.amount).times(duration * target.n).dividedBy(v.duration * own.n);
  }
  return null;
}

/** "1 month, 1 year": the periods a product is priced for (for messages). */
export function pricedFor(p: PricedProduct): string {
  return pricePeriods(p)
    .map((v) => periodLabel(v.duration, v.duration_unit))
    .join(', ');
}

/** `date` plus a period, in UTC (a month from Jan 31 is the last day of February, as PostgreSQL adds it). */
export function addPeriod(date: Date, duration: number, unit: string): Date {
  const d = new Date(date.getTime());
  if (unit === 'day') d.setUTCDate(d.getUTCDate() + duration);
  else if (unit === 'week') d.setUTCDate(d.getUTCDate() + 7 * duration);
  else {
    const months = unit === 'year' ? 12 * duration : duration;
    const day = d.getUTCDate();
    d.setUTCDate(1);
    d.setUTCMonth(d.getUTCMonth() + months);
    const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
    d.setUTCDate(Math.min(day, last));
  }
  return d;
}
