import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { Decimal, minorUnits, moneyOut } from '../db/money';
import { TableService, type Row } from '../db/table-service';
import { invalidParams } from '../http/errors';
import { DURATION_UNITS } from '../shared-enums';
import { periodLabel } from './pricing';
import { PRICING_TYPES, PRODUCT_TYPES } from './schema';

export const productListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.name', 't.slug', 't.description'],
  searchTable: 'products',
  sortable: {
    id: 't.id',
    name: 't.name',
    slug: 't.slug',
    amount: 't.amount',
    list_order: 't.list_order',
    type: 't.type',
    date_created: 't.date_created',
    date_modified: 't.date_modified',
  },
  filters: {
    slug: { column: 't.slug', type: 'string' },
    type: { column: 't.type', type: { enum: PRODUCT_TYPES } },
    pricing_type: { column: 't.pricing_type', type: { enum: PRICING_TYPES } },
    duration_unit: { column: 't.duration_unit', type: { enum: DURATION_UNITS } },
    currency: { column: 't.currency', type: 'upper' },
    active: { column: 't.active', type: 'bool' },
    recurring: { column: 't.recurring', type: 'bool' },
  },
};

/** `free` and `contact_us` products cost nothing: amount and setup fee are forced to 0. */
function forceFreeAmounts(cols: Row, pricingType: string, changing: boolean): void {
  if (changing && (pricingType === 'free' || pricingType === 'contact_us')) {
    cols.amount = '0';
    cols.setup_fee = '0';
  }
}

/**
 * Price variations: amounts in the product's currency's minor unit (as its own amount), none
 * for the product's own period (that price is `amount`), and none on a product that costs
 * nothing. Stored with exact amounts (strings).
 */
function checkVariations(cols: Row, current?: Row): void {
  const given = cols.price_variations !== undefined;
  const pricingType = cols.pricing_type ?? current?.pricing_type ?? 'paid';
  const free = pricingType === 'free' || pricingType === 'contact_us';
  if (!given && !(current && ('duration' in cols || 'duration_unit' in cols || 'currency' in cols || free))) return;
  const variations = (given ? JSON.parse(cols.price_variations) : (current?.price_variations ?? [])) as { amount: string; duration: number; duration_unit: string }[];
  if (variations.length === 0) return;
  const field = given ? 'price_variations' : 'price_variations (kept)';
  const currency = String(cols.currency ?? current?.currency ?? 'USD').trim();
  const digits = minorUnits(currency);
  const duration = Number(cols.duration ?? current?.duration ?? 1);
  const unit = cols.duration_unit ?? current?.duration_unit ?? 'month';
  const problems: string[] = [];
  if (free) problems.push(`a ${pricingType} product has no prices`);
  variations.forEach((v, i) => {
    if (new Decimal(v.amount).decimalPlaces() > digits) problems.push(`[${i}].amount must have at most ${digits} decimal places in ${currency}`);
    if (Number(v.duration) === duration && v.duration_unit === unit) problems.push(`[${i}] is the product's own period (${periodLabel(duration, unit)}): its price is amount`);
  });
  if (problems.length) throw invalidParams({ price_variations: `${field}: ${problems.join('; ')}.` });
  if (given) cols.price_variations = JSON.stringify(variations.map((v) => ({ amount: new Decimal(v.amount).toFixed(), duration: Number(v.duration), duration_unit: v.duration_unit })));
}

export function createProductService(db: Db): TableService {
  return new TableService(db, {
    table: 'products',
    model: 'product',
    columns: {
      slug: 'text',
      name: 'text',
      description: 'text',
      currency: 'text',
      pricing_type: 'text',
      amount: 'money',
      setup_fee: 'money',
      recurring: 'bool',
      duration: 'int',
      duration_unit: 'text',
      trial_duration: 'int',
      trial_duration_unit: 'text',
      billing_cycles: 'int',
      active: 'bool',
      type: 'text',
      list_order: 'int',
      price_variations: 'json',
      migrated_from_id: 'int',
    },
    listSpec: productListSpec,
    currencyAmounts: ['amount', 'setup_fee'],
    uniques: { products_slug_unique: { field: 'slug', message: 'slug is already used by another product.' } },
    hooks: {
      // A taken slug is refused by the unique constraint (`uniques` above: the same 400), with
      // no query of its own first.
      async beforeCreate(_trx, cols) {
        forceFreeAmounts(cols, cols.pricing_type ?? 'paid', true);
        checkVariations(cols);
      },
      async beforeUpdate(_trx, current, cols) {
        forceFreeAmounts(cols, cols.pricing_type ?? current.pricing_type, ['pricing_type', 'amount', 'setup_fee'].some((k) => k in cols));
        checkVariations(cols, current);
      },
    },
    decorate(_row, rec) {
      if (Array.isArray(rec.price_variations)) rec.price_variations = rec.price_variations.map((v: Row) => ({ ...v, amount: moneyOut(v.amount) }));
    },
  });
}
