import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import { Decimal, minorUnits, moneyOut } from '../db/money';
import type { Row, TableService, Trx } from '../db/table-service';
import { isoDate } from '../db/timestamps';
import { ApiError, invalidParams, notFoundItem } from '../http/errors';
import { periodLabel } from '../products/pricing';
import { priceProducts } from '../register/cart';
import { chargeWithCredit, currentPeriodStart, prorate, type Proration } from './proration';
import type { ChangeMembershipInput } from './schema';
import { checkProducts, createMembershipService, recordMembershipEvents } from './service';

/** Statuses whose plan can change: a membership that is paid for (or in its trial). */
const CHANGEABLE = new Set(['active', 'trialing']);

type AddOn = { product_id: number; quantity: number };
/** A payment's line, its price as exact decimal text. */
type LineItem = { name: string; description: string; quantity: number; unit_price: string; product_id: number };

/** What a membership moves to: validated, priced for its period. */
interface Target {
  plan: Row;
  duration: number;
  duration_unit: string;
  addon_products: AddOn[];
  /** The new recurring price (plan + recurring add-ons × quantity), rounded to the minor unit. */
  amount: Decimal;
  /** One per recurring product: what it costs for a whole period. */
  lines: { name: string; product_id: number; price: Decimal }[];
}

/** A change waiting for the period's end (memberships.scheduled_change). */
export interface ScheduledChange {
  plan_id: number;
  duration: number;
  duration_unit: string;
  addon_products: AddOn[];
  /** Exact decimal text of the new recurring price. */
  amount: string;
  effective_at: string;
  requested_at: string;
}

/** What applyScheduledChange applied, and what the membership had before. */
export interface AppliedChange {
  membership_id: number;
  from: { plan_id: number; duration: number; duration_unit: string; addon_products: AddOn[]; amount: string };
  to: { plan_id: number; duration: number; duration_unit: string; addon_products: AddOn[]; amount: string };
}

const terms = (r: Row) => ({
  plan_id: Number(r.plan_id),
  duration: Number(r.duration),
  duration_unit: String(r.duration_unit),
  addon_products: (r.addon_products ?? []) as AddOn[],
});

/**
 * Applies the membership's scheduled change, if any, and clears it: plan, recurring amount,
 * period and add-ons, inside the caller's transaction (the renewal at period end, which holds
 * the row's lock and then charges the new amount for the new period). Its events go through
 * recordMembershipEvents, as every membership write's. Not re-validated: the change was checked
 * when it was scheduled, and a renewal must not fail on it. null when nothing was scheduled.
 */
export async function applyScheduledChange(trx: Trx, membershipId: number, memberships: TableService): Promise<AppliedChange | null> {
  const before: Row | undefined = await trx('memberships').where({ id: membershipId }).forUpdate().first();
  const change = before?.scheduled_change as ScheduledChange | null | undefined;
  if (!before || !change) return null;
  const [after] = await trx('memberships')
    .where({ id: membershipId })
    .update({
      plan_id: change.plan_id,
      amount: change.amount,
      duration: change.duration,
      duration_unit: change.duration_unit,
      addon_products: JSON.stringify(change.addon_products),
      scheduled_change: null,
      date_modified: trx.fn.now(),
    })
    .returning('*');
  // The service only shapes the record here (no read, no write of its own).
  await recordMembershipEvents(trx, { before, after, record: memberships.toRecord(after) });
  return {
    membership_id: membershipId,
    from: { ...terms(before), amount: new Decimal(before.amount).toFixed() },
    to: { ...terms(after), amount: new Decimal(after.amount).toFixed() },
  };
}

/** A change worked out: its answer, and what applying it writes. */
interface Planned {
  answer: ChangeAnswer;
  target: Target;
  proration: Proration;
  lines: LineItem[];
}

/**
 * A renewal's charge of `amount`, less the membership's credit_balance (what downgrades left):
 * the credit is taken first, never below zero, and the balance lowered in the caller's
 * transaction (the renewal's, which holds the row's lock). Answers the credit used and what is
 * left to charge, as exact decimal text.
 */
export async function takeCredit(trx: Trx, membershipId: number, amount: Decimal.Value): Promise<{ credit_used: string; amount_due: string }> {
  const row: Row | undefined = await trx('memberships').where({ id: membershipId }).forUpdate().first('credit_balance');
  if (!row) throw notFoundItem('membership');
  const charge = chargeWithCredit(amount, row.credit_balance);
  if (charge.credit_used.gt(0)) await trx('memberships').where({ id: membershipId }).update({ credit_balance: charge.balance_left.toFixed(), date_modified: trx.fn.now() });
  return { credit_used: charge.credit_used.toFixed(), amount_due: charge.amount_due.toFixed() };
}

/** The proration and the next renewal of a change, as the API answers it. */
export interface ChangeAnswer {
  membership_id: number;
  when: 'now' | 'period_end';
  preview: boolean;
  currency: string;
  from: Row;
  to: Row;
  period: { start: string; end: string; seconds: number; remaining_seconds: number };
  credit: number;
  cost: number;
  amount_due: number;
  credit_left: number;
  lines: Row[];
  effective_at: string;
  next_renewal: { date: string; amount: number; credit_applied: number; amount_due: number };
  membership?: Row;
  payment?: Row | null;
}

/**
 * Plan changes: POST /memberships/{id}/change previews, applies (prorated, now) or schedules
 * (at the period's end) a move to another plan, period or add-ons. An applied change is one
 * transaction with the membership row locked: the membership's new terms, its credit, the
 * payment for what is due, and their events; concurrent changes (and a renewal's write) queue
 * on the lock and each sees the other's result.
 */
export class PlanChangeService {
  constructor(
    private readonly db: Db,
    private readonly memberships: TableService,
    private readonly payments: TableService,
  ) {}

  async change(id: number, input: ChangeMembershipInput): Promise<ChangeAnswer> {
    if (input.preview) return (await this.plan(this.db, await this.db('memberships').where({ id }).first(), input, new Date())).answer;
    return this.db.transaction(async (trx) => {
      const current: Row | undefined = await trx('memberships').where({ id }).forUpdate().first();
      const planned = await this.plan(trx, current, input, new Date());
      if (input.when === 'period_end') return { ...planned.answer, membership: await this.schedule(trx, current!, planned), payment: null };
      return { ...planned.answer, ...(await this.applyNow(trx, current!, planned)) };
    });
  }

  /** Cancels the scheduled change (none: nothing to do); answers the membership. */
  async cancelScheduled(id: number): Promise<Row> {
    return this.db.transaction(async (trx) => {
      const current = await trx('memberships').where({ id }).forUpdate().first('id', 'scheduled_change');
      if (!current) throw notFoundItem('membership');
      if (current.scheduled_change !== null) await trx('memberships').where({ id }).update({ scheduled_change: null, date_modified: trx.fn.now() });
      return (await this.memberships.get(id, { db: trx }))!;
    });
  }

  /** The checks, the target and the proration of a change (reads only). */
  private async plan(db: Knex | Trx, current: Row | undefined, input: ChangeMembershipInput, now: Date): Promise<Planned> {
    if (!current) throw notFoundItem('membership');
    const id = Number(current.id);
    if (!CHANGEABLE.has(current.status)) {
      throw new ApiError(409, 'wu_rest_membership_not_changeable', `Membership ${id} is ${current.status}: only active and trialing memberships can change plan.`, { membership_status: current.status });
    }
    const trialing = current.status === 'trialing';
    const end: Date | null = current.date_expiration ?? (trialing ? current.date_trial_end : null);
    if (!end) {
      throw new ApiError(409, 'wu_rest_membership_no_period', `Membership ${id} has no date_expiration: there is no current period to prorate or to end.`, { membership_status: current.status });
    }
    const target = await this.target(db, current, input);
    const restart = target.duration !== Number(current.duration) || target.duration_unit !== current.duration_unit;
    const start = currentPeriodStart({ date_renewed: current.date_renewed, date_activated: current.date_activated, date_expiration: end, duration: Number(current.duration), duration_unit: current.duration_unit });
    const currency = String(current.currency).trim();
    const later = input.when === 'period_end';
    // A trial paid nothing, and a change at the period's end starts with the next period: neither is prorated.
    const unprorated = trialing || later;
    const proration = prorate({
      currency,
      now,
      current: { amount: current.amount, start, end },
      next: { amounts: target.lines.map((l) => l.price), duration: target.duration, duration_unit: target.duration_unit },
      restart,
      unprorated,
    });
    const balance = new Decimal(current.credit_balance).plus(proration.credit_left);
    const renewal = chargeWithCredit(target.amount, balance);
    // What is charged now, line by line (nothing when unprorated).
    const lines = unprorated ? [] : this.lineItems(target, proration, currency, restart);
    const answer: ChangeAnswer = {
      membership_id: id,
      when: input.when,
      preview: input.preview,
      currency,
      from: { ...terms(current), amount: moneyOut(current.amount)! },
      to: { plan_id: Number(target.plan.id), duration: target.duration, duration_unit: target.duration_unit, addon_products: target.addon_products, amount: target.amount.toNumber() },
      period: { start: isoDate(proration.period_start)!, end: isoDate(proration.period_end)!, seconds: proration.period_seconds, remaining_seconds: proration.remaining_seconds },
      credit: proration.credit.toNumber(),
      cost: proration.cost.toNumber(),
      amount_due: proration.amount_due.toNumber(),
      credit_left: proration.credit_left.toNumber(),
      lines: lines.map((l) => ({ ...l, unit_price: Number(l.unit_price) })),
      effective_at: isoDate(later ? end : now)!,
      next_renewal: { date: isoDate(proration.expiration)!, amount: target.amount.toNumber(), credit_applied: renewal.credit_used.toNumber(), amount_due: renewal.amount_due.toNumber() },
    };
    return { answer, target, proration, lines };
  }

  /**
   * The plan, period and add-ons asked for, checked and priced: plan_id a recurring, active plan
   * in the membership's currency (the add-on rule is the memberships service's); the plan priced
   * for the period (its own price or a variation) and each recurring add-on too (stated, or
   * scaled as /register prices it).
   */
  private async target(db: Knex | Trx, current: Row, input: ChangeMembershipInput): Promise<Target> {
    const currency = String(current.currency).trim();
    const addons: AddOn[] = input.addon_products ?? (current.addon_products as AddOn[]);
    const plan: Row | undefined = await db('products').where({ id: input.plan_id }).first();
    if (!plan) throw invalidParams({ plan_id: `plan_id ${input.plan_id} does not match any product.` });
    // Trusted: the membership's own add-ons were checked when written.
    const explicit = input.addon_products !== undefined;
    await checkProducts(db, { plan_id: input.plan_id, ...(explicit ? { addon_products: JSON.stringify(addons) } : {}) }, { plan_id: plan });
    const errors: Record<string, string> = {};
    if (!plan.active) errors.plan_id = `plan ${plan.slug} is not active.`;
    else if (!plan.recurring) errors.plan_id = `plan ${plan.slug} is not recurring: a membership changes to a recurring plan.`;
    else if (String(plan.currency).trim().toUpperCase() !== currency) errors.plan_id = `plan ${plan.slug} is priced in ${String(plan.currency).trim()}, not in ${currency}, the membership's currency.`;
    const addonRows: Row[] = addons.length ? await db('products').whereIn('id', addons.map((a) => a.product_id)) : [];
    const foreign = addonRows.filter((p) => String(p.currency).trim().toUpperCase() !== currency);
    if (foreign.length) errors.addon_products = `addon_products: ${foreign.map((p) => p.slug).join(', ')} ${foreign.length === 1 ? 'is' : 'are'} not priced in ${currency}, the membership's currency.`;
    if (Object.keys(errors).length) throw invalidParams(errors);

    // The period: the one asked for; a unit alone is 1 of it; neither: the membership's own.
    const duration = input.duration ?? (input.duration_unit !== undefined ? 1 : Number(current.duration));
    const unit = input.duration_unit ?? current.duration_unit;
    const recurring = addonRows.filter((p) => p.recurring);
    const { prices, problems } = priceProducts([plan, ...recurring], plan, { duration, unit }, currency, input);
    if (problems.products) {
      problems.addon_products = problems.products.replace(/^products:/, 'addon_products:');
      delete problems.products;
    }
    if (Object.keys(problems).length) throw invalidParams(problems);
    const quantity = new Map(addons.map((a) => [a.product_id, a.quantity]));
    const lines = [plan, ...recurring].map((p) => {
      const n = p === plan ? 1 : quantity.get(Number(p.id))!;
      return { name: n > 1 ? `${p.name} × ${n}` : String(p.name), product_id: Number(p.id), price: prices.get(p)!.times(n) };
    });
    const amount = lines.reduce((sum, l) => sum.plus(l.price), new Decimal(0));
    return { plan, duration, duration_unit: unit, addon_products: addons, amount, lines };
  }

  /** The payment's lines: each recurring product's prorated cost, saying for what part of which period; the credit on the first. */
  private lineItems(target: Target, p: Proration, currency: string, restart: boolean): LineItem[] {
    const day = (d: Date) => isoDate(d)!.slice(0, 10);
    const days = (s: number) => new Decimal(s).dividedBy(86_400).toDecimalPlaces(2).toFixed();
    const part = restart
      ? `${periodLabel(target.duration, target.duration_unit)} to ${day(p.expiration)}, a new period`
      : `${days(p.remaining_seconds)} of ${days(p.period_seconds)} days left of the period to ${day(p.period_end)}, prorated`;
    const credited = Decimal.min(p.credit, p.cost);
    return target.lines.map((l, i) => ({
      name: l.name,
      description: `${part}${i === 0 && credited.gt(0) ? `; less ${credited.toFixed(minorUnits(currency))} ${currency} credit for the unused time of the current plan` : ''}`,
      quantity: 1,
      unit_price: p.costs[i].toFixed(),
      product_id: l.product_id,
    }));
  }

  /** when: period_end — the change waits in scheduled_change (a second one replaces it) until the renewal applies it. */
  private async schedule(trx: Trx, current: Row, { target, answer }: Planned): Promise<Row> {
    const scheduled: ScheduledChange = {
      plan_id: Number(target.plan.id),
      duration: target.duration,
      duration_unit: target.duration_unit,
      addon_products: target.addon_products,
      amount: target.amount.toFixed(),
      effective_at: answer.effective_at,
      requested_at: new Date().toISOString(),
    };
    await trx('memberships').where({ id: current.id }).update({ scheduled_change: JSON.stringify(scheduled), date_modified: trx.fn.now() });
    return (await this.memberships.get(Number(current.id), { db: trx }))!;
  }

  /**
   * when: now — the new terms through the memberships service (its rules and events), the credit
   * left over added to credit_balance, a scheduled change dropped (this one replaces it), and a
   * pending payment for what is due (gateway: the membership's, else manual).
   */
  private async applyNow(trx: Trx, current: Row, { target, proration: p, answer, lines }: Planned): Promise<{ membership: Row; payment: Row | null }> {
    const id = Number(current.id);
    await trx('memberships')
      .where({ id })
      .update({ credit_balance: new Decimal(current.credit_balance).plus(p.credit_left).toFixed(), scheduled_change: null });
    const membership = (await this.memberships.update(
      id,
      {
        plan_id: Number(target.plan.id),
        amount: target.amount.toFixed(),
        duration: target.duration,
        duration_unit: target.duration_unit,
        addon_products: target.addon_products,
        ...(p.expiration.getTime() !== p.period_end.getTime() ? { date_expiration: p.expiration.toISOString() } : {}),
      },
      trx,
    ))!;
    if (p.amount_due.lte(0)) return { membership, payment: null };
    const payment = await this.payments.create(
      {
        customer_id: Number(current.customer_id),
        membership_id: id,
        product_id: Number(target.plan.id),
        currency: answer.currency,
        line_items: lines,
        discount_total: Decimal.min(p.credit, p.cost).toFixed(),
        total: p.amount_due.toFixed(),
        status: 'pending',
        gateway: current.gateway || 'manual',
      },
      trx,
    );
    return { membership, payment };
  }
}
