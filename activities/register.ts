import { ApplicationFailure } from '@temporalio/common';
import type { Knex } from 'knex';
import { CustomerService } from '../src/customers/store';
import type { Db } from '../src/db/knex';
import { ApiError } from '../src/http/errors';
import { Decimal } from '../src/http/money';
import { createMembershipService } from '../src/memberships/store';
import { createPaymentService } from '../src/payments/store';
import { dropPasswords, HOLD_HOURS, takePassword } from '../src/register/passwords';
import { SiteService } from '../src/sites/store';

/**
 * The steps of the register saga (workflow `register`). Every step is idempotent: it locks the
 * workflow's row in `registrations`, returns the id recorded there when a previous attempt
 * got that far, and otherwise creates the record and records its id in the same
 * transaction. The compensations delete what the row records and clear it, so running one
 * twice (or for a step that never ran) changes nothing.
 */

/** Error type of a business failure (the caller's request cannot be carried out). */
export const REGISTER_REJECTED = 'RegisterRejected';
/** Error type the workflow fails with after compensating; details[0] is the error body. */
export const REGISTRATION_FAILED = 'RegistrationFailed';

export interface ErrorBody {
  code: string;
  message: string;
  data: { status: number; [k: string]: unknown };
}

export interface RegisterInput {
  /** HMAC of the request body with a server-side secret (an unkeyed digest would be a guessing oracle for the password). */
  requestHmac: string;
  idempotencyKeySha256: string | null;
  /** For the search attributes and memo only. */
  email: string | null;
  productSlugs: string[];
  customer: {
    existingCustomerId?: number;
    userId?: number;
    /** A new account. Its password hash is held in PostgreSQL under (workflow id, requestHmac), never in Temporal. */
    account?: { username: string; email: string };
    billing_address?: Record<string, unknown>;
  };
  cart: { plan_id: number; addon_ids: number[]; currency: string; duration?: number; duration_unit?: string };
  auto_renew: boolean;
  membership: { status: string; date_activated?: string; date_trial_end?: string; date_renewed?: string; date_expiration?: string };
  payment: { status: string };
  payment_method: { gateway?: string; gateway_customer_id?: string; gateway_subscription_id?: string; gateway_payment_id?: string };
  site: null | {
    title: string;
    domain: string;
    path: string;
    template_id?: number;
    publish: boolean;
    site_meta?: Record<string, unknown>;
    site_option?: Record<string, unknown>;
  };
}

export interface LineItemOut {
  name: string;
  description?: string;
  quantity: number;
  unit_price: string;
  product_id: number;
}

/** The priced cart: every amount an exact decimal string (decimal.js), never a float. */
export interface PricedCart {
  currency: string;
  plan_id: number;
  addon_products: { product_id: number; quantity: number }[];
  recurring: boolean;
  duration: number;
  duration_unit: string;
  billing_cycles: number;
  /** Recurring amount per period: plan + recurring add-ons. */
  amount: string;
  /** First payment: every product's amount plus every setup fee. */
  initial_amount: string;
  line_items: LineItemOut[];
  subtotal: string;
  total: string;
}

export interface RegisterResult {
  customer: Record<string, unknown>;
  membership: Record<string, unknown>;
  payment: Record<string, unknown>;
  site: Record<string, unknown>;
}

type Trx = Knex.Transaction;
type Reg = Record<string, any>;

const BUSINESS_SQLSTATE = /^(22|23|P0001)/;

/** ApiErrors and data/constraint errors are business failures: not retried, reported as 400. */
export function toFailure(err: unknown): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof ApiError) {
    return ApplicationFailure.create({ message: err.message, type: REGISTER_REJECTED, nonRetryable: true, details: [err.toBody()] });
  }
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string' && BUSINESS_SQLSTATE.test(code)) {
    const message = `The registration could not be stored: ${(err as Error).message.split(' - ').pop()}`;
    const body: ErrorBody = { code: 'wu_rest_registration_failed', message, data: { status: 400, sqlstate: code } };
    return ApplicationFailure.create({ message, type: REGISTER_REJECTED, nonRetryable: true, details: [body] });
  }
  return err;
}

async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toFailure(err);
  }
}

export function createRegisterActivities(deps: { db: Db }) {
  const { db } = deps;
  const customers = new CustomerService(db);
  const memberships = createMembershipService(db);
  const payments = createPaymentService(db);
  const sites = new SiteService(db);

  /** The workflow's registration row, created on first use and locked for the transaction. */
  async function lock(trx: Trx, workflowId: string, input?: RegisterInput): Promise<Reg> {
    if (input) {
      await trx('registrations')
        .insert({ workflow_id: workflowId, request_hmac: input.requestHmac, idempotency_key_sha256: input.idempotencyKeySha256 })
        .onConflict('workflow_id')
        .ignore();
    }
    const reg = await trx('registrations').where({ workflow_id: workflowId }).forUpdate().first();
    if (!reg) throw new Error(`registration ${workflowId} has no row yet`);
    return reg;
  }

  /** For the compensations: nothing recorded yet is nothing to undo. */
  const lockIfAny = (trx: Trx, workflowId: string): Promise<Reg | undefined> => trx('registrations').where({ workflow_id: workflowId }).forUpdate().first();

  const record = (trx: Trx, workflowId: string, patch: Reg) =>
    trx('registrations').where({ workflow_id: workflowId }).update({ ...patch, date_modified: trx.fn.now() });

  /** Services bound to the step's transaction (their writes nest as savepoints). */
  const bound = (trx: Trx) => ({
    memberships: createMembershipService(trx as unknown as Db),
    payments: createPaymentService(trx as unknown as Db),
    sites: new SiteService(trx as unknown as Db),
  });

  return {
    /** Step 1: the existing customer, a customer for an existing user, or a new user + customer. */
    async registerCustomer(workflowId: string, input: RegisterInput): Promise<{ customer_id: number; user_id: number; created: boolean }> {
      return guard(() =>
        db.transaction(async (trx) => {
          const reg = await lock(trx, workflowId, input);
          if (reg.customer_id !== null) return { customer_id: Number(reg.customer_id), user_id: Number(reg.user_id), created: Boolean(reg.created_customer) };
          const c = input.customer;
          if (c.existingCustomerId !== undefined) {
            const row = await trx('customers').where({ id: c.existingCustomerId }).first('id', 'user_id');
            if (!row) throw new ApiError(400, 'customer_not_found', `Customer ${c.existingCustomerId} was not found.`, { params: { customer_id: 'customer_id does not match any customer.' } });
            await record(trx, workflowId, { customer_id: row.id, user_id: row.user_id, created_customer: false, created_user: false });
            return { customer_id: Number(row.id), user_id: Number(row.user_id), created: false };
          }
          let userId = c.userId;
          let createdUser = false;
          if (userId === undefined) {
            const a = c.account!;
            const taken = await trx('users')
              .whereRaw('lower(username) = lower(?)', [a.username])
              .orWhereRaw('lower(email) = lower(?)', [a.email])
              .select('username', 'email');
            const params: Record<string, string> = {};
            if (taken.some((u: Reg) => u.username.toLowerCase() === a.username.toLowerCase())) params['customer.username'] = 'customer.username is already taken.';
            if (taken.some((u: Reg) => u.email.toLowerCase() === a.email.toLowerCase())) params['customer.email'] = 'customer.email is already used by another account.';
            if (Object.keys(params).length) throw new ApiError(400, 'wu_rest_invalid_parameter', `Invalid parameter(s): ${Object.keys(params).join(', ')}`, { params });
            const passwordHash = await takePassword(trx, workflowId, input.requestHmac);
            if (passwordHash === null) {
              throw new ApiError(400, 'wu_rest_registration_failed', `The account's password is no longer held (it is kept ${HOLD_HOURS} hours until the account is created); send the registration again.`);
            }
            const [u] = await trx('users').insert({ username: a.username, email: a.email, password_hash: passwordHash, display_name: a.username }).returning('id');
            userId = Number(u.id);
            createdUser = true;
          } else {
            const owner = await trx('customers').where({ user_id: userId }).first('id');
            if (owner) throw new ApiError(400, 'wu_rest_invalid_parameter', 'Invalid parameter(s): customer.user_id', { params: { 'customer.user_id': `customer.user_id ${userId} already belongs to customer ${owner.id}.` } });
          }
          const [cust] = await trx('customers')
            .insert({ user_id: userId, signup_form: 'by-register', billing_address: JSON.stringify(c.billing_address ?? {}) })
            .returning('id');
          await record(trx, workflowId, { customer_id: cust.id, user_id: userId, created_customer: true, created_user: createdUser });
          return { customer_id: Number(cust.id), user_id: userId, created: true };
        }),
      );
    },

    /** Step 2: prices from the products (read-only, so naturally idempotent). */
    async priceCart(cart: RegisterInput['cart']): Promise<PricedCart> {
      return guard(async () => {
        const ids = [cart.plan_id, ...cart.addon_ids];
        const rows: Reg[] = await db('products').whereIn('id', ids).select('*');
        const byId = new Map(rows.map((r) => [Number(r.id), r]));
        const missing = ids.filter((id) => !byId.get(id)?.active);
        if (missing.length) throw new ApiError(400, 'invalid_cart', `Product(s) ${missing.join(', ')} are no longer available.`, { params: { products: `products ${missing.join(', ')} are unknown or inactive.` } });
        const plan = byId.get(cart.plan_id)!;
        const items: LineItemOut[] = [];
        let amount = new Decimal(0);
        let initial = new Decimal(0);
        for (const id of ids) {
          const p = byId.get(id)!;
          const price = new Decimal(p.amount);
          const fee = new Decimal(p.setup_fee);
          items.push({ name: p.name, quantity: 1, unit_price: price.toFixed(), product_id: id, description: `${p.duration} ${p.duration_unit}${p.duration === 1 ? '' : 's'}` });
          if (fee.gt(0)) items.push({ name: `${p.name} setup fee`, quantity: 1, unit_price: fee.toFixed(), product_id: id, description: 'one-time setup fee' });
          initial = initial.plus(price).plus(fee);
          if (p.recurring) amount = amount.plus(price);
        }
        return {
          currency: cart.currency,
          plan_id: cart.plan_id,
          addon_products: cart.addon_ids.map((product_id) => ({ product_id, quantity: 1 })),
          recurring: Boolean(plan.recurring),
          duration: cart.duration ?? Number(plan.duration),
          duration_unit: cart.duration_unit ?? plan.duration_unit,
          billing_cycles: Number(plan.billing_cycles),
          amount: amount.toFixed(),
          initial_amount: initial.toFixed(),
          line_items: items,
          subtotal: initial.toFixed(),
          total: initial.toFixed(),
        };
      });
    },

    /** Step 3: the membership, created pending (moved to the requested status at the end). */
    async registerMembership(workflowId: string, input: RegisterInput, customerId: number, cart: PricedCart): Promise<number> {
      return guard(() =>
        db.transaction(async (trx) => {
          const reg = await lock(trx, workflowId);
          if (reg.membership_id !== null) return Number(reg.membership_id);
          const m = input.membership;
          const pm = input.payment_method;
          const rec = await bound(trx).memberships.create({
            customer_id: customerId,
            plan_id: cart.plan_id,
            addon_products: cart.addon_products,
            currency: cart.currency,
            initial_amount: cart.initial_amount,
            amount: cart.amount,
            recurring: cart.recurring,
            auto_renew: input.auto_renew,
            duration: cart.duration,
            duration_unit: cart.duration_unit,
            billing_cycles: cart.billing_cycles,
            status: 'pending',
            gateway: pm.gateway,
            gateway_customer_id: pm.gateway_customer_id,
            gateway_subscription_id: pm.gateway_subscription_id,
            date_activated: m.date_activated,
            date_trial_end: m.date_trial_end,
            date_renewed: m.date_renewed,
            date_expiration: m.date_expiration,
          });
          await record(trx, workflowId, { membership_id: rec.id });
          return Number(rec.id);
        }),
      );
    },

    /** Step 4: the payment, created pending with the cart's line items and totals. */
    async registerPayment(workflowId: string, input: RegisterInput, customerId: number, membershipId: number, cart: PricedCart): Promise<number> {
      return guard(() =>
        db.transaction(async (trx) => {
          const reg = await lock(trx, workflowId);
          if (reg.payment_id !== null) return Number(reg.payment_id);
          const rec = await bound(trx).payments.create({
            customer_id: customerId,
            membership_id: membershipId,
            product_id: cart.plan_id,
            currency: cart.currency,
            line_items: cart.line_items,
            subtotal: cart.subtotal,
            total: cart.total,
            status: 'pending',
            gateway: input.payment_method.gateway,
            gateway_payment_id: input.payment_method.gateway_payment_id,
          });
          await record(trx, workflowId, { payment_id: rec.id });
          return Number(rec.id);
        }),
      );
    },

    /**
     * Step 5: the site. Type `pending` (inactive) until the membership becomes active or
     * trialing (the membership rule publishes it), or `customer_owned` at once with
     * site.publish. With a template: its description and site_meta are copied (the request's
     * site_meta wins per key), the title is the customer's.
     */
    async registerSite(workflowId: string, input: RegisterInput, customerId: number, membershipId: number): Promise<number> {
      return guard(() =>
        db.transaction(async (trx) => {
          const reg = await lock(trx, workflowId);
          if (reg.site_id !== null) return Number(reg.site_id);
          const s = input.site!;
          let description = '';
          let meta: Record<string, unknown> = {};
          if (s.template_id !== undefined) {
            const t = await trx('sites').where({ id: s.template_id }).first('description', 'site_meta', 'type');
            if (!t || t.type !== 'site_template') {
              throw new ApiError(400, 'wu_rest_invalid_parameter', 'Invalid parameter(s): site.template_id', { params: { 'site.template_id': `site.template_id ${s.template_id} is not a site template.` } });
            }
            description = t.description;
            meta = { ...(t.site_meta ?? {}) };
          }
          meta = { ...meta, ...(s.site_meta ?? {}) };
          if (s.site_option) meta.site_option = s.site_option;
          const taken = await trx('sites').whereRaw('lower(domain) = ?', [s.domain.toLowerCase()]).andWhere({ path: s.path }).first('id');
          if (taken) {
            throw new ApiError(400, 'wu_rest_invalid_parameter', 'Invalid parameter(s): site.site_url', { params: { 'site.site_url': 'site.site_url is already taken.' } });
          }
          const rec = await bound(trx).sites.create({
            title: s.title,
            description,
            domain: s.domain,
            path: s.path,
            customer_id: customerId,
            membership_id: membershipId,
            template_id: s.template_id ?? null,
            type: s.publish ? 'customer_owned' : 'pending',
            active: s.publish,
            site_meta: meta,
          });
          await record(trx, workflowId, { site_id: rec.id });
          return Number(rec.id);
        }),
      );
    },

    /**
     * Step 6: the requested statuses, through the resources' own rules (activation publishes
     * the pending site; completion takes the next invoice number). Idempotent: the rules only
     * act on a change (a completed payment keeps its invoice number).
     */
    async applyRegistrationStatuses(workflowId: string, membershipId: number, paymentId: number, input: RegisterInput): Promise<void> {
      return guard(() =>
        db.transaction(async (trx) => {
          await lock(trx, workflowId);
          const b = bound(trx);
          if (input.membership.status !== 'pending') await b.memberships.update(membershipId, { status: input.membership.status });
          if (input.payment.status !== 'pending') await b.payments.update(paymentId, { status: input.payment.status });
        }),
      );
    },

    /** Last step: the full records, stored as the registration's result. */
    async finishRegistration(workflowId: string, ids: { customer_id: number; membership_id: number; payment_id: number; site_id: number | null }): Promise<RegisterResult> {
      return guard(async () => {
        const existing = await db('registrations').where({ workflow_id: workflowId }).first('result', 'status');
        if (existing?.status === 'completed' && existing.result) return existing.result as RegisterResult;
        const [customer, membership, payment, site] = await Promise.all([
          customers.get(ids.customer_id),
          memberships.get(ids.membership_id),
          payments.get(ids.payment_id),
          ids.site_id ? sites.get(ids.site_id) : Promise.resolve({ id: 0 }),
        ]);
        const result = { customer, membership, payment, site } as unknown as RegisterResult;
        await db('registrations')
          .where({ workflow_id: workflowId })
          .update({ status: 'completed', result: JSON.stringify(result), error: null, date_modified: db.fn.now() });
        return result;
      });
    },

    // ---- compensations: delete what the row records, clear it; safe to repeat ----------
    async undoSite(workflowId: string): Promise<void> {
      await db.transaction(async (trx) => {
        const reg = await lockIfAny(trx, workflowId);
        if (!reg || reg.site_id === null) return;
        await trx('domains').where({ blog_id: reg.site_id }).delete();
        await trx('sites').where({ id: reg.site_id }).delete();
        await record(trx, workflowId, { site_id: null });
      });
    },
    async undoPayment(workflowId: string): Promise<void> {
      await db.transaction(async (trx) => {
        const reg = await lockIfAny(trx, workflowId);
        if (!reg || reg.payment_id === null) return;
        await trx('payments').where({ id: reg.payment_id }).delete();
        await record(trx, workflowId, { payment_id: null });
      });
    },
    async undoMembership(workflowId: string): Promise<void> {
      await db.transaction(async (trx) => {
        const reg = await lockIfAny(trx, workflowId);
        if (!reg || reg.membership_id === null) return;
        // A site left behind by a step that ran outside the saga's knowledge cannot exist:
        // the site step records its id in the same transaction as the insert.
        await trx('memberships').where({ id: reg.membership_id }).delete();
        await record(trx, workflowId, { membership_id: null });
      });
    },
    async undoCustomer(workflowId: string): Promise<void> {
      await db.transaction(async (trx) => {
        const reg = await lockIfAny(trx, workflowId);
        if (!reg || reg.customer_id === null) return;
        if (reg.created_customer) await trx('customers').where({ id: reg.customer_id }).delete();
        if (reg.created_user && reg.user_id !== null) await trx('users').where({ id: reg.user_id }).delete();
        await record(trx, workflowId, { customer_id: null, user_id: null, created_customer: false, created_user: false });
      });
    },
    /** After the compensations: the attempt is marked failed with the caller's error body. */
    async failRegistration(workflowId: string, input: RegisterInput, error: ErrorBody): Promise<void> {
      await dropPasswords(db, workflowId);
      await db('registrations')
        .insert({
          workflow_id: workflowId,
          request_hmac: input.requestHmac,
          idempotency_key_sha256: input.idempotencyKeySha256,
          status: 'failed',
          error: JSON.stringify(error),
        })
        .onConflict('workflow_id')
        .merge({ status: 'failed', error: JSON.stringify(error), date_modified: db.fn.now() });
    },
  };
}

export type RegisterActivities = ReturnType<typeof createRegisterActivities>;
