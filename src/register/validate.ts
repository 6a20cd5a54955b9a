import crypto from 'node:crypto';
import { accountProblems } from '../customers/service';
import type { Db } from '../db/knex';
import { discountProblem } from '../discount-codes/rules';
import { findDiscountCode } from '../discount-codes/service';
import { ApiError, invalidParams } from '../http/errors';
import { safeParseInput, zodParams } from '../http/validation';
import type { SettingsStore } from '../settings/store';
import { siteAtAddress, templateProblem } from '../sites/service';
import { cartPeriod, priceProducts, resolveProducts } from './cart';
import { registerSchema, type RegisterBody } from './schema';
import type { RegistrationRequest } from './types';

/** Where a new site lives, from the network settings `site_mode` and `network_domain`. */
export async function siteAddress(settings: SettingsStore, siteUrl: string): Promise<{ domain: string; path: string }> {
  const mode = await settings.get<string>('site_mode');
  const network = String((await settings.get<string>('network_domain')) ?? 'localhost').toLowerCase();
  if (mode === 'subdomain') return { domain: `${siteUrl}.${network}`, path: '/' };
  return { domain: network, path: `/${siteUrl}/` };
}

export const SITE_URL_TAKEN = 'site.site_url is already taken.';

export function invalidCart(params?: Record<string, string>): ApiError {
  return new ApiError(400, 'invalid_cart', 'Products are required.', params && Object.keys(params).length ? { params } : {});
}

/**
 * What the request fingerprint covers: the body without the password, so the fingerprint
 * (an HMAC with a server secret) says nothing about it.
 */
export function fingerprintBody(raw: Record<string, unknown>): Record<string, unknown> {
  const customer = raw.customer;
  if (!customer || typeof customer !== 'object' || Array.isArray(customer) || !('password' in customer)) return raw;
  const { password: _password, ...rest } = customer as Record<string, unknown>;
  return { ...raw, customer: rest };
}

/** Canonical JSON (sorted keys) of the body, for comparing a reused Idempotency-Key. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v as object)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

export const sha256Hex = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');

/** Step 1, no database: every shape violation at once; no products is invalid_cart. */
export function parseRegisterBody(raw: Record<string, unknown>): RegisterBody {
  const { result, input } = safeParseInput(registerSchema, raw);
  const params = result.success ? {} : zodParams(result.error, input);
  const products = raw.products;
  if (products === undefined || products === null || (Array.isArray(products) && products.length === 0)) {
    delete params.products;
    throw invalidCart(params);
  }
  if (!result.success) throw invalidParams(params);
  return result.data;
}

/** Problems of a service rule, under /register's field names (`customer.username`…). */
function prefixed(prefix: string, params: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(params).map(([k, v]) => [`${prefix}.${k}`, `${prefix}.${v}`]));
}

/**
 * Step 2, against the database (read-only), with the same rules the records transaction
 * applies (src/register/cart.ts, accountProblems, siteAtAddress,
 * templateProblem): the products, the account, the customer and the site address. Every
 * problem at once; an unknown customer_id alone is customer_not_found. Returns the request
 * as stored in `registrations.request` (without the password).
 */
export async function resolveRegistration(db: Db, settings: SettingsStore, body: RegisterBody): Promise<RegistrationRequest> {
  const params: Record<string, string> = {};
  const cart = await resolveProducts(db, body.products!, body.currency);
  if (cart.problem) params.products = cart.problem;
  else if (cart.plan) {
    // The plan priced for the period asked (a price variation), the add-ons on it.
    const { problems } = priceProducts(cart.products, cart.plan, cartPeriod(cart.plan, body.duration, body.duration_unit), cart.currency, body);
    Object.assign(params, problems);
  }

  // A discount code (blank: none), with the rules the records transaction applies again when it takes the use.
  const asked = body.discount_code?.trim() ? body.discount_code.trim() : undefined;
  let discount: RegistrationRequest['discount'];
  if (asked !== undefined) {
    const row = await findDiscountCode(db, asked);
    const problem = discountProblem(row, asked, cart.products.map((p) => Number(p.id)));
    if (problem) params.discount_code = problem;
    else discount = { id: Number(row!.id), code: row!.code };
  }

  if (body.customer_id !== undefined) {
    const c = await db('customers').where('id', body.customer_id).first('id');
    if (!c) {
      throw new ApiError(400, 'customer_not_found', `Customer ${body.customer_id} was not found.`, {
        params: { ...params, customer_id: `customer_id ${body.customer_id} does not match any customer.` },
      });
    }
  } else {
    const { user_id, username, email } = body.customer!;
    Object.assign(params, prefixed('customer', await accountProblems(db, user_id !== undefined ? { user_id } : { username, email })));
  }

  let site: RegistrationRequest['site'] = null;
  if (body.site) {
    const addr = await siteAddress(settings, body.site.site_url);
    if (await siteAtAddress(db, addr.domain, addr.path)) params['site.site_url'] = SITE_URL_TAKEN;
    if (body.site.template_id !== undefined) {
      const problem = await templateProblem(db, body.site.template_id);
      if (problem) params['site.template_id'] = `site.${problem}`;
    }
    site = {
      title: body.site.site_title,
      domain: addr.domain,
      path: addr.path,
      template_id: body.site.template_id,
      publish: body.site.publish ?? false,
      site_meta: body.site.site_meta,
      site_option: body.site.site_option,
    };
  }

  if (Object.keys(params).length) throw invalidParams(params);

  const plan = cart.plan!;
  const c = body.customer;
  let billing = c?.billing_address;
  if (body.country) billing = { country: body.country, ...(billing ?? {}) };
  return {
    products: cart.products.map((p) => p.slug),
    plan: plan.slug,
    customer: {
      existingCustomerId: body.customer_id,
      userId: c?.user_id,
      account: body.customer_id === undefined && c?.user_id === undefined ? { username: c!.username!, email: c!.email! } : undefined,
      billing_address: billing,
    },
    cart: {
      plan_id: Number(plan.id),
      addon_ids: cart.products.filter((p) => p !== plan).map((p) => Number(p.id)),
      currency: cart.currency,
      duration: body.duration,
      duration_unit: body.duration_unit,
    },
    ...(discount ? { discount } : {}),
    auto_renew: body.auto_renew ?? false,
    membership: { status: 'pending', ...(body.membership ?? {}) } as RegistrationRequest['membership'],
    payment: { status: body.payment?.status ?? 'pending' },
    payment_method: body.payment_method ?? {},
    site,
  };
}
