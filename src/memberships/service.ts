import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { moneyOut } from '../db/money';
import { NOW, TableService, type RecordChange, type Refs, type Row, type Trx, type WriteContext } from '../db/table-service';
import { recordEvents } from '../events/record';
import { invalidParams } from '../http/errors';
import { DURATION_UNITS } from '../shared-enums';
import { createSiteService, recordSiteEvents } from '../sites/service';
import type { MembershipLifecycles } from './lifecycle';
import { MEMBERSHIP_STATUSES, type MembershipStatus } from './schema';
import { checkTransition } from './status';

export const membershipListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.gateway_subscription_id', 't.gateway_customer_id', 't.gateway'],
  searchTable: 'memberships',
  table: 'memberships',
  idBounds: 'memberships',
  counted: { table: 'memberships', by: { 't.status': 'status' } },
  sortable: {
    id: 't.id',
    amount: 't.amount',
    status: 't.status',
    date_created: 't.date_created',
    date_modified: 't.date_modified',
    date_expiration: 't.date_expiration',
    customer_id: 't.customer_id',
    plan_id: 't.plan_id',
  },
  filters: {
    status: { column: 't.status', type: { enum: MEMBERSHIP_STATUSES } },
    customer_id: { column: 't.customer_id', type: 'int' },
    plan_id: { column: 't.plan_id', type: 'int' },
    gateway: { column: 't.gateway', type: 'string' },
    auto_renew: { column: 't.auto_renew', type: 'bool' },
    currency: { column: 't.currency', type: 'upper' },
    duration_unit: { column: 't.duration_unit', type: { enum: DURATION_UNITS } },
  },
  // What a renewal or trial-end job selects by (indexed: (column, id)).
  dateRanges: { date_expiration: 't.date_expiration', date_trial_end: 't.date_trial_end', date_renewed: 't.date_renewed' },
};

/** Statuses a membership is "live" in, and those it can be activated from. */
const ACTIVE = new Set(['active', 'trialing']);
const ACTIVATABLE_FROM = new Set(['pending', 'on-hold']);

/** plan_id must be a product of type `plan`; every add-on product must exist and be a package or a service. */
export async function checkProducts(trx: Db | Trx, cols: Row, refs: Refs): Promise<void> {
  const errors: Record<string, string> = {};
  if (cols.plan_id !== undefined) {
    // The reference check fetched it (an unknown plan_id is refused there).
    const plan = refs.plan_id;
    if (plan && plan.type !== 'plan') errors.plan_id = `plan_id ${cols.plan_id} is a product of type ${plan.type}, not a plan.`;
  }
  if (cols.addon_products !== undefined) {
    const addons = JSON.parse(cols.addon_products) as { product_id: number }[];
    const ids = addons.map((a) => a.product_id);
    if (ids.length > 0) {
      const types = new Map((await trx('products').whereIn('id', ids).select('id', 'type')).map((r: Row) => [Number(r.id), r.type as string]));
      const missing = ids.filter((id) => !types.has(id));
      // Only packages and services are add-ons: a second plan on a membership is no add-on.
      const plans = ids.filter((id) => types.get(id) === 'plan');
      if (missing.length > 0) errors.addon_products = `addon_products: product_id ${missing.join(', ')} does not match any product.`;
      else if (plans.length > 0) errors.addon_products = `addon_products: product_id ${plans.join(', ')} is a plan; add-ons are products of type package or service.`;
    }
  }
  if (Object.keys(errors).length) throw invalidParams(errors);
}

/**
 * A pending/on-hold membership that becomes active or trialing publishes its pending sites,
 * each with its site events (site_published) in the same transaction.
 */
async function publishPendingSites(trx: Trx, membershipId: number, sites: TableService): Promise<void> {
  const pending: Row[] = await trx('sites').where({ membership_id: membershipId, type: 'pending' }).forUpdate();
  for (const before of pending) {
    const [after] = await trx('sites').where({ id: before.id }).update({ type: 'customer_owned', active: true, date_modified: trx.fn.now() }).returning('*');
    await recordSiteEvents(trx, { before, after, record: sites.toRecord(after) });
  }
}

/**
 * A membership's events (the rule in one place, for the API, /register and refunds):
 * membership_activated when it becomes active; membership_renewed when, active before and
 * after, its date_expiration moves later; membership_cancelled and membership_expired when it
 * becomes so.
 */
export async function recordMembershipEvents(trx: Trx, change: RecordChange): Promise<void> {
  const { before, after, record } = change;
  const slugs: string[] = [];
  const became = (status: string) => after.status === status && before?.status !== status;
  if (became('active')) slugs.push('membership_activated');
  const time = (v: unknown) => (v == null ? null : new Date(v as string).getTime());
  const [until, untilBefore] = [time(after.date_expiration), time(before?.date_expiration)];
  if (before?.status === 'active' && after.status === 'active' && until !== null && untilBefore !== null && until > untilBefore) slugs.push('membership_renewed');
  if (became('on-hold')) slugs.push('membership_on_hold');
  if (became('cancelled')) slugs.push('membership_cancelled');
  if (became('expired')) slugs.push('membership_expired');
  await recordEvents(trx, slugs, Number(after.id), record, change.last);
}

/**
 * Memberships. `lifecycles`: the rule that gives a recurring membership its lifecycle workflow
 * (./lifecycle.ts), asked by every write in its transaction; its start and signal run after the
 * commit when the write has its own transaction (a caller's transaction runs them itself:
 * `lifecycles.effectOf`).
 */
export function createMembershipService(db: Db, lifecycles: MembershipLifecycles): TableService {
  const lifecycle = async (trx: Trx, before: Row | null, after: Row, write: WriteContext): Promise<Row> => {
    const row = await lifecycles.changed(trx, before, after);
    const effect = lifecycles.effectOf(before, row);
    if (write.ownTransaction && (effect.start || effect.signal)) write.afterCommit(() => lifecycles.afterCommit(effect));
    return row;
  };
  // The records of the sites an activation publishes (their events' payloads).
  const sites = createSiteService(db);
  return new TableService(db, {
    table: 'memberships',
    model: 'membership',
    columns: {
      customer_id: 'int',
      plan_id: 'int',
      addon_products: 'json',
      currency: 'text',
      initial_amount: 'money',
      recurring: 'bool',
      auto_renew: 'bool',
      duration: 'int',
      duration_unit: 'text',
      amount: 'money',
      discount_code: 'text',
      date_activated: 'timestamp',
      date_trial_end: 'timestamp',
      date_renewed: 'timestamp',
      date_cancellation: 'timestamp',
      date_expiration: 'timestamp',
      times_billed: 'int',
      billing_cycles: 'int',
      status: 'text',
      gateway: 'text',
      gateway_customer_id: 'text',
      gateway_subscription_id: 'text',
      migrated_from_id: 'int',
    },
    listSpec: membershipListSpec,
    currencyAmounts: ['initial_amount', 'amount'],
    references: {
      customer_id: { table: 'customers', label: 'customer' },
      plan_id: { table: 'products', label: 'product' },
    },
    hooks: {
      changed: recordMembershipEvents,
      async beforeCreate(trx, cols, refs) {
        await checkProducts(trx, cols, refs);
        const status = cols.status ?? 'pending';
        if (status === 'cancelled') {
          if (cols.date_cancellation == null) cols.date_cancellation = NOW;
          cols.auto_renew = false;
        }
        if (ACTIVE.has(status) && cols.date_activated == null) cols.date_activated = NOW;
      },
      async beforeUpdate(trx, current, cols, refs) {
        await checkProducts(trx, cols, refs);
        // A payment's membership belongs to the payment's customer: keep it that way.
        if (cols.customer_id !== undefined && Number(cols.customer_id) !== Number(current.customer_id)) {
          const payment = await trx('payments').where({ membership_id: current.id }).whereNot({ customer_id: cols.customer_id }).first('id');
          if (payment) {
            throw invalidParams({ customer_id: `customer_id cannot change: payment ${payment.id} of this membership belongs to customer ${current.customer_id}.` });
          }
        }
        const status: string = cols.status ?? current.status;
        checkTransition(Number(current.id), current.status as MembershipStatus, status as MembershipStatus);
        if ((current.status === 'cancelled' || current.status === 'expired') && ACTIVE.has(status)) {
          // A reactivation: the cancellation no longer holds, and a recurring membership renews
          // again unless the write says otherwise.
          if (!('date_cancellation' in cols)) cols.date_cancellation = null;
          if (cols.auto_renew === undefined) cols.auto_renew = cols.recurring ?? current.recurring;
        }
        if (status === 'cancelled') {
          // A (new) cancellation is dated now unless the caller dates it; a cancelled
          // membership never renews.
          if (current.status !== 'cancelled' && cols.date_cancellation == null) cols.date_cancellation = NOW;
          if (current.auto_renew || cols.auto_renew !== undefined) cols.auto_renew = false;
        }
        if (ACTIVE.has(status) && ACTIVATABLE_FROM.has(current.status)) {
          const activated = 'date_activated' in cols ? cols.date_activated : current.date_activated;
          if (activated == null) cols.date_activated = NOW;
        }
      },
      afterCreate: (trx, row, write) => lifecycle(trx, null, row, write),
      async afterUpdate(trx, before, after, write) {
        if (ACTIVATABLE_FROM.has(before.status) && ACTIVE.has(after.status)) await publishPendingSites(trx, Number(after.id), sites);
        return lifecycle(trx, before, after, write);
      },
    },
    // Written by plan changes only (POST /memberships/{id}/change), never by a create or update body.
    computedFrom: { scheduled_change: ['scheduled_change'], credit_balance: ['credit_balance'] },
    decorate(row, rec) {
      // The scheduled price is kept as exact decimal text; answered as a number like every amount.
      if ('scheduled_change' in row) rec.scheduled_change = row.scheduled_change ? { ...row.scheduled_change, amount: moneyOut(row.scheduled_change.amount) } : null;
      if ('credit_balance' in row) rec.credit_balance = moneyOut(row.credit_balance);
    },
  });
}
