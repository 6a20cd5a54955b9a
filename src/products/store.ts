import type { Db } from '../db/knex';
import { TableService, type Row } from '../db/table-service';
import type { ListSpec } from '../http/list';
import { DURATION_UNITS } from '../shared-enums';
import { PRICING_TYPES, PRODUCT_TYPES } from './schema';

export const productListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.name', 't.slug', 't.description'],
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
      },
      async beforeUpdate(_trx, current, cols) {
        forceFreeAmounts(cols, cols.pricing_type ?? current.pricing_type, ['pricing_type', 'amount', 'setup_fee'].some((k) => k in cols));
      },
    },
  });
}
