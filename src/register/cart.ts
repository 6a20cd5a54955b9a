import type { Knex } from 'knex';
import { Decimal, minorUnits } from '../db/money';
import { appliesToProduct, lineDiscount, type DiscountRow } from '../discount-codes/rules';
import { ApiError } from '../http/errors';
import { addonPrice, exactPrice, periodLabel, pricedFor, type PricedProduct } from '../products/pricing';
import type { LineItemOut, PricedCart, RegistrationRequest } from './types';

type Row = Record<string, any>;

export interface ResolvedProducts {
  /** The products found, in the request's order. */
  products: Row[];
  plan: Row | undefined;
  currency: string;
  /** Everything wrong with the list (`products: …`), or null. */
  problem: string | null;
}

/**
 * The cart's rules, in one place (the request's validation and the records transaction both
 * ask them): every product exists (by id or slug) and is active, no product twice, exactly
 * one plan, one currency.
 */
export async function resolveProducts(db: Knex | Knex.Transaction, refs: (number | string)[], currency?: string): Promise<ResolvedProducts> {
  const ids = refs.filter((r): r is number => typeof r === 'number');
  const slugs = refs.filter((r): r is string => typeof r === 'string');
  const rows: Row[] = await db('products')
    .where((w) => {
      if (ids.length) w.orWhereIn('id', ids);
      if (slugs.length) w.orWhereIn('slug', slugs);
    })
    .select('*');
  const byRef = (r: number | string) => rows.find((p) => (typeof r === 'number' ? Number(p.id) === r : p.slug === r));
  const products: Row[] = [];
  const unknown: string[] = [];
  const inactive: string[] = [];
  for (const r of refs) {
    const p = byRef(r);
    if (!p) unknown.push(String(r));
    else if (!p.active) inactive.push(String(r));
    else products.push(p);
  }
  const errors: string[] = [];
  if (unknown.length) errors.push(`${unknown.join(', ')} ${unknown.length === 1 ? 'does' : 'do'} not match any product`);
  if (inactive.length) errors.push(`${inactive.join(', ')} ${inactive.length === 1 ? 'is' : 'are'} not active`);
  if (new Set(products.map((p) => Number(p.id))).size !== products.length) errors.push('the same product is listed twice (by id and by slug)');
  const plans = products.filter((p) => p.type === 'plan');
  if (!unknown.length && !inactive.length) {
    if (plans.length === 0) errors.push('must include a plan');
    if (plans.length > 1) errors.push(`must include only one plan (got ${plans.map((p) => p.slug).join(', ')})`);
  }
  const chosen = currency ?? plans[0]?.currency ?? products[0]?.currency ?? 'USD';
  const other = products.filter((p) => p.currency.trim().toUpperCase() !== chosen);
  if (other.length) errors.push(`${other.map((p) => p.slug).join(', ')} ${other.length === 1 ? 'is' : 'are'} not priced in ${chosen}`);
  return { products, plan: plans[0], currency: chosen, problem: errors.length ? `products: ${errors.join('; ')}.` : null };
}

/** The period a registration bills: the one asked for, else the plan's own. */
export function cartPeriod(plan: Row, duration?: number, unit?: string): { duration: number; unit: string } {
  return { duration: duration ?? Number(plan.duration), unit: unit ?? plan.duration_unit };
}

/**
 * Each product's price for the cart's period, in the currency's minor unit: the plan's price
 * for exactly that period (its own or a price variation); a recurring add-on's price for it
 * (stated, or its own scaled when the periods convert exactly); a one-time product's price.
 * `problems`: field -> what is wrong (the plan has no price for the period: the period's field;
 * an add-on has none: products).
 */
export function priceProducts(
  products: Row[],
  plan: Row,
  period: { duration: number; unit: string },
  currency: string,
  asked: { duration?: number; duration_unit?: string } = {},
): { prices: Map<Row, Decimal>; problems: Record<string, string> } {
  const digits = minorUnits(currency);
  const label = periodLabel(period.duration, period.unit);
  const prices = new Map<Row, Decimal>();
  const problems: Record<string, string> = {};
  const addons: string[] = [];
  for (const p of products) {
    const product = p as unknown as PricedProduct;
    const price = p === plan ? exactPrice(product, period.duration, period.unit) : p.recurring ? addonPrice(product, period.duration, period.unit) : new Decimal(p.amount);
    if (price) prices.set(p, price.toDecimalPlaces(digits, Decimal.ROUND_HALF_UP));
    else if (p === plan) problems[asked.duration_unit !== undefined || asked.duration === undefined ? 'duration_unit' : 'duration'] = `plan ${p.slug} has no price for ${label}; it is priced for ${pricedFor(product)}.`;
    else addons.push(`${p.slug} (priced for ${pricedFor(product)})`);
  }
  if (addons.length) problems.products = `products: ${addons.join(', ')} ${addons.length === 1 ? 'has' : 'have'} no price for ${label}, the membership's period.`;
  return { prices, problems };
}

/**
 * Prices the cart from the products as they are now (inside the records transaction): plan +
 * add-ons, setup fees on the first payment; the membership's `amount` is the recurring part.
 * A discount code takes its value off each line of a product it applies to (`value`/`type` off
 * the product's line, `setup_fee_value`/`setup_fee_type` off its setup fee), rounded per line
 * to the currency's minor unit and never below zero; the renewal amount keeps the discount
 * when the code applies to renewals.
 */
export async function priceCart(
  db: Knex | Knex.Transaction,
  cart: RegistrationRequest['cart'],
  opts: { takeTrial?: () => Promise<boolean>; discount?: DiscountRow } = {},
): Promise<PricedCart> {
  const ids = [cart.plan_id, ...cart.addon_ids];
  const { products, plan, problem } = await resolveProducts(db, ids, cart.currency);
  if (problem || !plan) throw new ApiError(400, 'invalid_cart', 'The products changed since the request was checked.', { params: { products: problem ?? 'products: must include a plan.' } });
  const period = cartPeriod(plan, cart.duration, cart.duration_unit);
  const { prices, problems } = priceProducts(products, plan, period, cart.currency, cart);
  if (Object.keys(problems).length) throw new ApiError(400, 'invalid_cart', 'The products changed since the request was checked.', { params: problems });
  // A plan with a trial, for a customer who never had one (asked last: taking it marks the customer).
  const offered = Number(plan.trial_duration) > 0 ? { duration: Number(plan.trial_duration), unit: String(plan.trial_duration_unit) } : null;
  const trial = offered && opts.takeTrial && (await opts.takeTrial()) ? offered : null;
  const items: LineItemOut[] = [];
  const digits = minorUnits(cart.currency);
  const d = opts.discount;
  let amount = new Decimal(0);
  let initial = new Decimal(0);
  let discountTotal = new Decimal(0);
  /** The line's description with what the code takes off it. */
  const discounted = (description: string, off: Decimal) => (off.gt(0) ? `${description}; discount ${d!.code}: -${off.toFixed()}` : description);
  for (const p of products) {
    const price = prices.get(p)!;
    const fee = new Decimal(p.setup_fee);
    const id = Number(p.id);
    const applies = d !== undefined && appliesToProduct(d, id);
    // The line says what it charges: the membership's period, once, or nothing yet (a trial:
    // the recurring products are first charged when it ends; setup fees and one-time products now).
    const trialing = trial !== null && Boolean(p.recurring);
    const label = periodLabel(period.duration, period.unit);
    const charged = trialing ? new Decimal(0) : price;
    const off = applies ? lineDiscount(charged, d.value, d.type, digits) : new Decimal(0);
    items.push({
      name: p.name,
      quantity: 1,
      unit_price: charged.toFixed(),
      product_id: id,
      description: discounted(trialing ? `free trial of ${periodLabel(trial.duration, trial.unit)}, then ${price.toFixed()} ${cart.currency} per ${label}` : p.recurring ? label : 'one-time', off),
    });
    const feeOff = applies ? lineDiscount(fee, d.setup_fee_value, d.setup_fee_type, digits) : new Decimal(0);
    if (fee.gt(0)) items.push({ name: `${p.name} setup fee`, quantity: 1, unit_price: fee.toFixed(), product_id: id, description: discounted('one-time setup fee', feeOff) });
    initial = initial.plus(charged).plus(fee);
    discountTotal = discountTotal.plus(off).plus(feeOff);
    // A renewal charges the price, less the discount when the code applies to renewals.
    if (p.recurring) amount = amount.plus(applies && d.apply_to_renewals ? price.minus(lineDiscount(price, d.value, d.type, digits)) : price);
  }
  const total = initial.minus(discountTotal);
  return {
    currency: cart.currency,
    plan_id: cart.plan_id,
    addon_products: cart.addon_ids.map((product_id) => ({ product_id, quantity: 1 })),
    recurring: Boolean(plan.recurring),
    duration: period.duration,
    duration_unit: period.unit,
    trial,
    billing_cycles: Number(plan.billing_cycles),
    amount: amount.toFixed(),
    initial_amount: total.toFixed(),
    line_items: items,
    subtotal: initial.toFixed(),
    discount_total: discountTotal.toFixed(),
    total: total.toFixed(),
    discount_code: d ? d.code : null,
  };
}
