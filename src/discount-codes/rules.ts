import { Decimal } from '../db/money';
import type { DiscountType } from './schema';

type Row = Record<string, any>;

/** A discount code's row as the checkout reads it. */
export interface DiscountRow {
  id: number | string;
  code: string;
  value: string;
  type: DiscountType;
  setup_fee_value: string;
  setup_fee_type: DiscountType;
  apply_to_renewals: boolean;
  active: boolean;
  max_uses: number;
  uses: number;
  date_start: Date | null;
  date_expiration: Date | null;
  allowed_products: number[];
  limit_products: boolean;
}

/** Whether the code applies to a product: always, unless limit_products names others (an empty list means all). */
export function appliesToProduct(d: Pick<DiscountRow, 'limit_products' | 'allowed_products'>, productId: number): boolean {
  const allowed = (d.allowed_products ?? []).map(Number);
  return !d.limit_products || allowed.length === 0 || allowed.includes(Number(productId));
}

/**
 * Why a code cannot be used now for these products, as the 400's message for discount_code;
 * null when it can. `asked`: the code as the request spelled it.
 */
export function discountProblem(d: DiscountRow | Row | undefined, asked: string, productIds: number[], now = new Date()): string | null {
  if (!d) return `discount_code ${asked} does not match any discount code.`;
  const code = d.code as string;
  if (!d.active) return `discount_code ${code} is not active.`;
  if (d.date_start && new Date(d.date_start) > now) return `discount_code ${code} is not valid yet: it starts ${new Date(d.date_start).toISOString()}.`;
  if (d.date_expiration && new Date(d.date_expiration) <= now) return `discount_code ${code} has expired: it ended ${new Date(d.date_expiration).toISOString()}.`;
  if (Number(d.max_uses) > 0 && Number(d.uses) >= Number(d.max_uses)) return `discount_code ${code} is used up (${d.max_uses} of ${d.max_uses} uses).`;
  if (!productIds.some((id) => appliesToProduct(d as DiscountRow, id))) {
    return `discount_code ${code} does not apply to the products (it applies to products ${(d.allowed_products as number[]).join(', ')}).`;
  }
  return null;
}

/**
 * The discount on one line of `amount`: a percentage of it, or a fixed amount; rounded half up
 * to the currency's minor unit (`digits`), never more than the line (so never below zero).
 * Decimal arithmetic throughout.
 */
export function lineDiscount(amount: Decimal, value: string, type: DiscountType, digits: number): Decimal {
  if (amount.lte(0)) return new Decimal(0);
  const raw = type === 'percentage' ? amount.times(value).div(100) : new Decimal(value);
  return Decimal.min(amount, raw.toDecimalPlaces(digits, Decimal.ROUND_HALF_UP));
}
