import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { Decimal } from '../db/money';
import { TableService, type Row, type Trx } from '../db/table-service';
import { invalidParams } from '../http/errors';
import { discountProblem, type DiscountRow } from './rules';
import { DISCOUNT_TYPES } from './schema';

export const discountCodeListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.name', 't.code', 't.description'],
  sortable: {
    id: 't.id',
    name: 't.name',
    code: 't.code',
    uses: 't.uses',
    date_expiration: 't.date_expiration',
    date_created: 't.date_created',
    date_modified: 't.date_modified',
  },
  filters: {
    code: { column: 't.code', type: 'ci' },
    type: { column: 't.type', type: { enum: DISCOUNT_TYPES } },
    active: { column: 't.active', type: 'bool' },
    apply_to_renewals: { column: 't.apply_to_renewals', type: 'bool' },
  },
};

/**
 * The rules across fields, against the row as it will be: a percentage is at most 100 (value,
 * setup_fee_value), date_expiration is after date_start, allowed_products are products.
 */
async function checkRules(trx: Trx, cols: Row, current?: Row): Promise<void> {
  const errors: Record<string, string> = {};
  const after = { ...(current ?? {}), ...cols };
  for (const [field, typeField] of [['value', 'type'], ['setup_fee_value', 'setup_fee_type']] as const) {
    const type = after[typeField] ?? 'percentage';
    if (type === 'percentage' && after[field] != null && new Decimal(after[field]).gt(100)) {
      errors[field] = field in cols ? `${field} is a percentage (${typeField} percentage): at most 100.` : `${field} (${new Decimal(after[field]).toFixed()}) is more than 100, which a percentage (${typeField}) cannot be: give ${field} too.`;
    }
  }
  if (after.date_start && after.date_expiration && new Date(after.date_expiration) <= new Date(after.date_start)) {
    const field = 'date_expiration' in cols || !('date_start' in cols) ? 'date_expiration' : 'date_start';
    errors[field] = 'date_expiration must be after date_start.';
  }
  if (cols.allowed_products !== undefined) {
    const ids = JSON.parse(cols.allowed_products) as number[];
    if (ids.length > 0) {
      const found = new Set((await trx('products').whereIn('id', ids).select('id')).map((r: Row) => Number(r.id)));
      const missing = ids.filter((id) => !found.has(id));
      if (missing.length) errors.allowed_products = `allowed_products ${missing.join(', ')} ${missing.length === 1 ? 'does' : 'do'} not match any product.`;
    }
  }
  if (Object.keys(errors).length) throw invalidParams(errors);
}

export function createDiscountCodeService(db: Db): TableService {
  return new TableService(db, {
    table: 'discount_codes',
    model: 'discount_code',
    columns: {
      name: 'text',
      code: 'text',
      description: 'text',
      value: 'money',
      type: 'text',
      setup_fee_value: 'money',
      setup_fee_type: 'text',
      apply_to_renewals: 'bool',
      active: 'bool',
      max_uses: 'int',
      uses: 'int',
      date_start: 'timestamp',
      date_expiration: 'timestamp',
      allowed_products: 'json',
      limit_products: 'bool',
    },
    listSpec: discountCodeListSpec,
    uniques: { discount_codes_code_unique: { field: 'code', message: 'code is already used by another discount code (codes are compared without regard to case).' } },
    hooks: {
      beforeCreate: (trx, cols) => checkRules(trx, cols),
      beforeUpdate: (trx, current, cols) => checkRules(trx, cols, current),
    },
  });
}

/** The code's row, found without regard to case. */
export async function findDiscountCode(db: Knex | Trx, code: string): Promise<DiscountRow | undefined> {
  return db('discount_codes').whereRaw('lower(code) = lower(?)', [code.trim()]).first();
}

/**
 * Takes one use of the code, inside the registration's records transaction: one guarded
 * UPDATE (active, within its dates, not used up) so concurrent registrations for the last
 * use queue on the row and exactly one gets it; the others, and a code that changed since
 * the request was checked, get the 400 naming discount_code. Rolled back with the
 * transaction, so a registration that is not written gives its use back.
 */
export async function takeDiscountUse(trx: Trx, id: number, asked: string, productIds: number[]): Promise<DiscountRow> {
  const r = await trx.raw(
    `UPDATE discount_codes SET uses = uses + 1, date_modified = now()
     WHERE id = ? AND active AND (date_start IS NULL OR date_start <= now()) AND (date_expiration IS NULL OR date_expiration > now())
       AND (max_uses = 0 OR uses < max_uses)
     RETURNING *`,
    [id],
  );
  const row = r.rows[0] as DiscountRow | undefined;
  // Taken: the products are asked as the row is before this use (throwing rolls it back).
  const problem = row ? discountProblem({ ...row, uses: Number(row.uses) - 1 }, asked, productIds) : discountProblem(await trx('discount_codes').where({ id }).first(), asked, productIds);
  if (row && !problem) return row;
  throw invalidParams({ discount_code: problem ?? `discount_code ${asked} cannot be used now.` });
}
