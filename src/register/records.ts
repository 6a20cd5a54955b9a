import type { Knex } from 'knex';
import { createCustomerService, takeTrial } from '../customers/service';
import type { Db } from '../db/knex';
import { Decimal } from '../db/money';
import type { TableService } from '../db/table-service';
import { takeDiscountUse } from '../discount-codes/service';
import { recordEvent } from '../events/record';
import { ApiError, asApiError, invalidParams } from '../http/errors';
import type { MembershipLifecycles } from '../memberships/lifecycle';
import { createMembershipService } from '../memberships/service';
import { createPaymentService } from '../payments/service';
import { addPeriod } from '../products/pricing';
import { createSiteService } from '../sites/service';
import { priceCart } from './cart';
import { HOLD_HOURS, markRegistrationFailed } from './store';
import type { CommitOutcome, ErrorBody, RegisterResult, RegistrationIds, RegistrationRequest } from './types';
import { SITE_URL_TAKEN } from './validate';

type Trx = Knex.Transaction;
type Row = Record<string, any>;

// The transaction runs inside a workflow task (a local activity): it must not wait long for a
// lock or a statement. Past these it fails and the local activity tries again.
const LOCK_TIMEOUT = '3s';
const STATEMENT_TIMEOUT = '10s';
/** FOR UPDATE NOWAIT on a row another transaction holds. */
const PG_LOCK_NOT_AVAILABLE = '55P03';
/** The workflow's step looks again at a row the API is committing after these pauses (doubling). */
const SETTLE_POLL_MS = 20;
const SETTLE_POLL_MAX_MS = 500;

/** SQLSTATE classes that mean "this request cannot be stored" (data, integrity, RAISE), not "try again". */
const BUSINESS_SQLSTATE = /^(22|23|P0001)/;

/** The caller's 4xx for an error of the request; null for infrastructure trouble (retried). */
export function requestError(err: unknown): ErrorBody | null {
  const answer = asApiError(err);
  if (answer) return answer.toBody();
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string' && BUSINESS_SQLSTATE.test(code)) {
    const message = `The registration could not be stored: ${(err as Error).message.split(' - ').pop()}`;
    return { code: 'wu_rest_registration_failed', message, data: { status: 400, sqlstate: code } };
  }
  return null;
}

/** A service's 400 under /register's field names (`customer.username`…). */
function underField(err: unknown, prefix: string, rename: Record<string, [string, string]> = {}): unknown {
  const answer = asApiError(err);
  if (!answer || answer.code !== 'wu_rest_invalid_parameter') return err;
  const params = (answer.extra.params ?? {}) as Record<string, string>;
  return invalidParams(Object.fromEntries(Object.entries(params).map(([k, v]) => rename[k] ?? [`${prefix}.${k}`, `${prefix}.${v}`])));
}

const idsOf = (row: Row): RegistrationIds => ({
  customer_id: Number(row.customer_id),
  membership_id: Number(row.membership_id),
  payment_id: Number(row.payment_id),
  site_id: row.site_id === null ? null : Number(row.site_id),
});

/**
 * The records of a registration (user, customer, membership, payment, site and their
 * statuses) written in ONE transaction, through the resources' own services and rules, so
 * they are all there or none is: nothing to compensate. Idempotent: it locks the
 * registration's row and, when a previous attempt committed, answers what that one stored.
 */
export class RegistrationRecords {
  private readonly customers: TableService;
  private readonly memberships: TableService;
  private readonly payments: TableService;
  private readonly sites: TableService;

  /** `lifecycles`: the memberships' lifecycle rule (a recurring membership's renewals start with its registration). */
  constructor(
    private readonly db: Db,
    lifecycles: MembershipLifecycles,
  ) {
    this.customers = createCustomerService(db);
    this.memberships = createMembershipService(db, lifecycles);
    this.payments = createPaymentService(db, lifecycles);
    this.sites = createSiteService(db);
  }

  /**
   * The workflow's step. The API commits right after starting the workflow, so the row is
   * usually being decided, or decided already. One statement asks both (FOR UPDATE NOWAIT on
   * its own, outside any transaction: the lock is let go at once): held by another
   * transaction (the API's commit), look again later, holding no connection meanwhile;
   * decided, that outcome; free and still running (the API went away), commit here.
   */
  async settle(registrationId: number): Promise<CommitOutcome> {
    const id = Number(registrationId);
    for (let pause = SETTLE_POLL_MS; ; pause = Math.min(pause * 2, SETTLE_POLL_MAX_MS)) {
      const row = await this.db.raw('SELECT * FROM registrations WHERE id = ? FOR UPDATE NOWAIT', [id]).then(
        (r: { rows: Row[] }) => r.rows[0] ?? null,
        (err: unknown) => {
          if ((err as { code?: unknown })?.code === PG_LOCK_NOT_AVAILABLE) return 'busy' as const;
          throw err;
        },
      );
      if (row === null) throw new Error(`registration ${id} does not exist`);
      if (row !== 'busy') {
        if (row.status !== 'running') return this.outcomeOf(row);
        const out = await this.commit(id, { nowait: true });
        if (out) return out;
      }
      await new Promise((r) => setTimeout(r, pause));
    }
  }

  /** Writes the records (idempotent). With `nowait`, null when another transaction holds the row. */
  async commit(registrationId: number): Promise<CommitOutcome>;
  async commit(registrationId: number, opts: { nowait: true }): Promise<CommitOutcome | null>;
  async commit(registrationId: number, opts: { nowait?: boolean } = {}): Promise<CommitOutcome | null> {
    try {
      return await this.db.transaction(async (trx) => {
        const row = await this.lock(trx, registrationId, opts.nowait === true);
        if (!row) throw new Error(`registration ${registrationId} does not exist`);
        if (row.status !== 'running') return this.outcomeOf(row);
        const request = row.request as RegistrationRequest;
        const { result, ...created } = await this.write(trx, request, row.password_hash);
        const provision = request.site?.template_id !== undefined && created.ids.site_id !== null;
        await trx('registrations')
          .where({ id: registrationId })
          .update({
            status: 'completed',
            ...created.ids,
            user_id: created.userId,
            created_user: created.createdUser,
            created_customer: created.createdCustomer,
            result: JSON.stringify(result),
            error: null,
            password_hash: null,
            provisioning: provision ? 'running' : null,
            date_modified: trx.fn.now(),
          });
        await recordEvent(trx, { slug: 'registration_completed', objectId: registrationId, payload: { workflow_id: row.workflow_id, ...result } });
        return { status: 'committed', ids: created.ids, provision };
      });
    } catch (err) {
      if (opts.nowait && (err as { code?: unknown })?.code === PG_LOCK_NOT_AVAILABLE) return null;
      const body = requestError(err);
      if (!body) throw err;
      // Refused: the answer is recorded (the transaction above rolled back everything else).
      if (await markRegistrationFailed(this.db, registrationId, body)) return { status: 'rejected' };
      return this.outcomeOf(await this.db('registrations').where({ id: registrationId }).first());
    }
  }

  /**
   * After the local activity gave up (database unreachable): a 503 the same Idempotency-Key may
   * retry, unless the row was decided meanwhile (the API's commit); returns the row's outcome.
   */
  async giveUp(registrationId: number): Promise<CommitOutcome> {
    const body: ErrorBody = {
      code: 'wu_rest_registration_unavailable',
      message: 'The registration could not be written (the database did not answer); nothing was kept. Send it again; with the same Idempotency-Key it is never registered twice.',
      data: { status: 503 },
    };
    await markRegistrationFailed(this.db, registrationId, body);
    return this.outcomeOf(await this.db('registrations').where({ id: registrationId }).first());
  }

  /**
   * The registration's row, locked, with the transaction's timeouts set in the same round trip
   * (the id is a number: nothing to escape).
   */
  private async lock(trx: Trx, registrationId: number, nowait: boolean): Promise<Row | undefined> {
    const id = Number(registrationId);
    if (!Number.isSafeInteger(id)) throw new Error(`not a registration id: ${registrationId}`);
    const res = await trx.raw(
      `SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'; SET LOCAL statement_timeout = '${STATEMENT_TIMEOUT}'; SELECT * FROM registrations WHERE id = ${id} FOR UPDATE${nowait ? ' NOWAIT' : ''}`,
    );
    return (res as { rows: Row[] }[])[2].rows[0];
  }

  private outcomeOf(row: Row): CommitOutcome {
    if (row.status === 'completed') return { status: 'committed', ids: idsOf(row), provision: row.provisioning !== null };
    const status = Number((row.error as ErrorBody | null)?.data?.status ?? 500);
    return status >= 500 ? { status: 'abandoned' } : { status: 'rejected' };
  }

  private async write(trx: Trx, req: RegistrationRequest, passwordHash: string | null) {
    const c = req.customer;
    let customer: Row;
    let createdUser = false;
    let createdCustomer = true;
    if (c.existingCustomerId !== undefined) {
      const existing = await this.customers.get(c.existingCustomerId, { db: trx });
      if (!existing) throw new ApiError(400, 'customer_not_found', `Customer ${c.existingCustomerId} was not found.`, { params: { customer_id: 'customer_id does not match any customer.' } });
      customer = existing;
      createdCustomer = false;
    } else {
      if (c.account && passwordHash === null) {
        throw new ApiError(400, 'wu_rest_registration_failed', `The account's password is no longer held (it is kept ${HOLD_HOURS} hours until the account is created); send the registration again.`);
      }
      // The password was hashed out of the transaction (see the customers service's password_hash).
      const input = c.account
        ? { username: c.account.username, email: c.account.email, password_hash: passwordHash ?? undefined, billing_address: c.billing_address ?? {}, signup_form: 'by-register' }
        : { user_id: c.userId, billing_address: c.billing_address ?? {}, signup_form: 'by-register' };
      customer = await this.customers
        .create(input, trx, { id: c.newCustomerId })
        .catch((err: unknown) => Promise.reject(underField(err, 'customer')));
      createdUser = c.account !== undefined;
    }
    const customerId = Number(customer.id);

    // The discount code's use, taken here and nowhere else: a guarded UPDATE (not used up), so
    // of registrations racing for the last use exactly one gets it; it is part of this
    // transaction, so a registration that is not written (refused, failed, retried) does not
    // keep it, and one written once counts once.
    const discount = req.discount ? await takeDiscountUse(trx, req.discount.id, req.discount.code, [req.cart.plan_id, ...req.cart.addon_ids]) : undefined;
    // A trial is the customer's once: taking it marks them, under their row's lock.
    const cart = await priceCart(trx, req.cart, { takeTrial: () => takeTrial(trx, customerId), discount });
    const pm = req.payment_method;
    const m = req.membership;
    // With a trial, the membership is trialing until the trial's end: when it would be active,
    // or pending with nothing due now (nothing to wait for).
    const status = cart.trial && (m.status === 'active' || (m.status === 'pending' && new Decimal(cart.initial_amount).isZero())) ? 'trialing' : m.status;
    const trialEnd = cart.trial ? (m.date_trial_end ?? addPeriod(new Date(), cart.trial.duration, cart.trial.unit).toISOString()) : m.date_trial_end;
    if (cart.trial) customer = (await this.customers.get(customerId, { db: trx }))!;
    const membership = await this.memberships.create(
      {
        customer_id: customerId,
        plan_id: cart.plan_id,
        addon_products: cart.addon_products,
        currency: cart.currency,
        initial_amount: cart.initial_amount,
        amount: cart.amount,
        discount_code: cart.discount_code,
        recurring: cart.recurring,
        auto_renew: req.auto_renew,
        duration: cart.duration,
        duration_unit: cart.duration_unit,
        billing_cycles: cart.billing_cycles,
        status: 'pending',
        gateway: pm.gateway,
        gateway_customer_id: pm.gateway_customer_id,
        gateway_subscription_id: pm.gateway_subscription_id,
        date_activated: m.date_activated,
        date_trial_end: trialEnd,
        date_renewed: m.date_renewed,
        date_expiration: m.date_expiration,
      },
      trx,
    );
    let site: Row = req.site ? await this.writeSite(trx, req.site, customerId, Number(membership.id)) : { id: 0 };

    // The membership moves to its status after the site exists: activation publishes the
    // membership's pending sites (a rule of the memberships service).
    let membershipRecord: Row = membership;
    if (status !== 'pending') {
      membershipRecord = (await this.memberships.update(Number(membership.id), { status }, trx))!;
      if (site.id) site = (await this.sites.get(Number(site.id), { db: trx }))!;
    }

    // Last, and created with its status: the payment rules apply on create, and completion
    // takes the next invoice number, a row lock every registration waits for until its
    // commit. Taken here, it is held for the payment and the registration's row only.
    const payment = await this.payments.create(
      {
        customer_id: customerId,
        membership_id: membership.id,
        product_id: cart.plan_id,
        currency: cart.currency,
        line_items: cart.line_items,
        subtotal: cart.subtotal,
        discount_code: cart.discount_code,
        discount_total: cart.discount_total,
        total: cart.total,
        status: req.payment.status,
        gateway: pm.gateway,
        gateway_payment_id: pm.gateway_payment_id,
      },
      trx,
    );
    // A completed payment bills the membership (its first period: the payments rule): answer it as it is now.
    if (payment.status === 'completed') membershipRecord = (await this.memberships.get(Number(membership.id), { db: trx }))!;
    const ids: RegistrationIds = { customer_id: customerId, membership_id: Number(membership.id), payment_id: Number(payment.id), site_id: site.id ? Number(site.id) : null };
    const result = { customer, membership: membershipRecord, payment, site } as unknown as RegisterResult;
    return { ids, result, userId: Number(customer.user_id), createdUser, createdCustomer };
  }

  /**
   * The site: `pending` (inactive) until the membership is active or trialing, or
   * `customer_owned` at once with site.publish. With a template, its description and
   * site_meta are copied here (the request's site_meta wins per key); its content follows
   * after the answer (./provisioning.ts).
   */
  private async writeSite(trx: Trx, s: NonNullable<RegistrationRequest['site']>, customerId: number, membershipId: number): Promise<Row> {
    let description = '';
    let meta: Record<string, unknown> = {};
    // The site rules (a free address, a template that is a site_template) are the sites
    // service's, checked by its create below.
    const template = s.template_id === undefined ? undefined : await trx('sites').where({ id: s.template_id }).first('description', 'site_meta');
    if (template) {
      description = template.description;
      meta = { ...(template.site_meta ?? {}) };
    }
    meta = { ...meta, ...(s.site_meta ?? {}) };
    if (s.site_option) meta.site_option = s.site_option;
    return this.sites
      .create(
        {
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
        },
        trx,
        { id: s.newSiteId },
      )
      .catch((err: unknown) => Promise.reject(underField(err, 'site', { domain: ['site.site_url', SITE_URL_TAKEN] })));
  }
}
