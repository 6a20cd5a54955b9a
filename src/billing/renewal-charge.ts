import type { Knex } from 'knex';
import { Decimal, minorUnits } from '../db/money';
import type { Row } from '../db/table-service';
import { appliesToProduct, lineDiscount, type DiscountRow } from '../discount-codes/rules';
import type { LineItem } from '../payments/schema';
import { periodLabel } from '../products/pricing';
import { priceProducts } from '../register/cart';

/** What a renewal payment charges. */
export interface RenewalCharge {
  line_items: (Omit<LineItem, 'unit_price'> & { unit_price: string })[];
  subtotal: string;
  discount_total: string;
  total: string;
  discount_code: string | null;
}

/**
 * What one period of the membership costs, itemised: the plan and its recurring add-ons priced
 * for the membership's period by the register's rules (products/pricing, register/cart's
 * priceProducts: a plan's price or price variation for exactly the period, an add-on scaled to
 * it), each add-on times its quantity, less the membership's discount code where the code
 * applies to renewals (discount-codes/rules). One-time add-ons and setup fees are not renewed.
 *
 * The membership's `amount` is what was agreed (its signup, or a plan change): the renewal
 * charges it. When the products' prices no longer add up to it (prices changed since, a product
 * was deleted), the renewal is one line of the membership's amount, saying so.
 */
export async function renewalCharge(trx: Knex.Transaction, m: Row): Promise<RenewalCharge> {
  const currency = String(m.currency ?? 'USD').toUpperCase();
  const digits = minorUnits(currency);
  const duration = Number(m.duration);
  const unit = String(m.duration_unit);
  const label = periodLabel(duration, unit);
  const amount = new Decimal(m.amount ?? 0);
  const addons = (Array.isArray(m.addon_products) ? m.addon_products : []) as { product_id: number; quantity: number }[];
  const quantities = new Map<number, number>(addons.map((a) => [Number(a.product_id), Number(a.quantity) || 1]));
  const ids = [Number(m.plan_id), ...quantities.keys()];
  const products: Row[] = await trx('products').whereIn('id', ids).select('*');
  const plan = products.find((p) => Number(p.id) === Number(m.plan_id));
  const discount: DiscountRow | undefined = m.discount_code ? await trx('discount_codes').whereRaw('lower(code) = lower(?)', [m.discount_code]).first() : undefined;
  const renews = discount?.apply_to_renewals === true;

  const itemised = (): RenewalCharge | null => {
    if (!plan || products.length !== ids.length) return null;
    const recurring = products.filter((p) => p === plan || p.recurring);
    const { prices, problems } = priceProducts(recurring, plan, { duration, unit }, currency);
    if (Object.keys(problems).length) return null;
    let subtotal = new Decimal(0);
    let off = new Decimal(0);
    const items: RenewalCharge['line_items'] = [];
    for (const p of recurring) {
      const id = Number(p.id);
      const quantity = p === plan ? 1 : quantities.get(id)!;
      const price = prices.get(p)!;
      const lineOff = renews && appliesToProduct(discount, id) ? lineDiscount(price.times(quantity), discount.value, discount.type, digits) : new Decimal(0);
      subtotal = subtotal.plus(price.times(quantity));
      off = off.plus(lineOff);
      items.push({ name: p.name, quantity, unit_price: price.toFixed(), product_id: id, description: lineOff.gt(0) ? `${label}; discount ${discount!.code}: -${lineOff.toFixed()}` : label });
    }
    const total = subtotal.minus(off);
    if (!total.eq(amount)) return null;
    return { line_items: items, subtotal: subtotal.toFixed(), discount_total: off.toFixed(), total: total.toFixed(), discount_code: off.gt(0) ? discount!.code : null };
  };

  return (
    itemised() ?? {
      line_items: [
        {
          name: `${plan?.name ?? `Membership ${m.id}`} renewal`,
          quantity: 1,
          unit_price: amount.toFixed(),
          ...(plan ? { product_id: Number(plan.id) } : {}),
          description: `${label}: the membership's amount (its products are priced differently now)`,
        },
      ],
      subtotal: amount.toFixed(),
      discount_total: '0',
      total: amount.toFixed(),
      discount_code: null,
    }
  );
}
