import crypto from 'node:crypto';
import type { Db } from '../db/knex';
import { ApiError, invalidParams } from '../http/errors';
import { safeParseInput, zodParams } from '../http/validation';
import type { SettingsStore } from '../settings/store';
import type { RegisterInput } from '../../activities/register';
import { registerSchema, type RegisterBody } from './schema';

/** Where a new site lives, from the network settings `site_mode` and `network_domain`. */
export async function siteAddress(settings: SettingsStore, siteUrl: string): Promise<{ domain: string; path: string }> {
  const mode = await settings.get<string>('site_mode');
  const network = String((await settings.get<string>('network_domain')) ?? 'localhost').toLowerCase();
  if (mode === 'subdomain') return { domain: `${siteUrl}.${network}`, path: '/' };
  return { domain: network, path: `/${siteUrl}/` };
}

export function invalidCart(params?: Record<string, string>): ApiError {
  return new ApiError(400, 'invalid_cart', 'Products are required.', params && Object.keys(params).length ? { params } : {});
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

/**
 * Step 2, against the database (read-only): products exist (id or slug), are active, one plan
 * among them, one currency; the account, the customer and the site address are free or
 * found. Every problem at once; an unknown customer_id alone is customer_not_found.
 * Returns the workflow's input, without the password (see ./passwords.ts).
 */
export async function resolveRegistration(db: Db, settings: SettingsStore, body: RegisterBody, requestHmac: string, idempotencyKeySha256: string | null): Promise<RegisterInput> {
  const params: Record<string, string> = {};

  // Products.
  const refs = body.products!;
  const ids = refs.filter((r): r is number => typeof r === 'number');
  const slugs = refs.filter((r): r is string => typeof r === 'string');
  const rows: Record<string, any>[] = await db('products')
    .where((w) => {
      if (ids.length) w.orWhereIn('id', ids);
      if (slugs.length) w.orWhereIn('slug', slugs);
    })
    .select('id', 'slug', 'type', 'active', 'currency');
  const byRef = (r: number | string) => rows.find((p) => (typeof r === 'number' ? Number(p.id) === r : p.slug === r));
  const resolved: Record<string, any>[] = [];
  const unknown: string[] = [];
  const inactive: string[] = [];
  for (const r of refs) {
    const p = byRef(r);
    if (!p) unknown.push(String(r));
    else if (!p.active) inactive.push(String(r));
    else resolved.push(p);
  }
  const productErrors: string[] = [];
  if (unknown.length) productErrors.push(`${unknown.join(', ')} ${unknown.length === 1 ? 'does' : 'do'} not match any product`);
  if (inactive.length) productErrors.push(`${inactive.join(', ')} ${inactive.length === 1 ? 'is' : 'are'} not active`);
  const distinct = new Set(resolved.map((p) => Number(p.id)));
  if (distinct.size !== resolved.length) productErrors.push('the same product is listed twice (by id and by slug)');
  const plans = resolved.filter((p) => p.type === 'plan');
  if (!unknown.length && !inactive.length) {
    if (plans.length === 0) productErrors.push('must include a plan');
    if (plans.length > 1) productErrors.push(`must include only one plan (got ${plans.map((p) => p.slug).join(', ')})`);
  }
  const currency = body.currency ?? plans[0]?.currency ?? resolved[0]?.currency ?? 'USD';
  const otherCurrency = resolved.filter((p) => p.currency.trim().toUpperCase() !== currency);
  if (otherCurrency.length) productErrors.push(`${otherCurrency.map((p) => p.slug).join(', ')} ${otherCurrency.length === 1 ? 'is' : 'are'} not priced in ${currency}`);
  if (productErrors.length) params.products = `products: ${productErrors.join('; ')}.`;

  // Customer.
  let email: string | null = body.customer?.email ?? null;
  if (body.customer_id !== undefined) {
    const c = await db('customers as c').join('users as u', 'u.id', 'c.user_id').where('c.id', body.customer_id).first('c.id', 'u.email');
    email = c?.email ?? null;
    if (!c) {
      throw new ApiError(400, 'customer_not_found', `Customer ${body.customer_id} was not found.`, {
        params: { ...params, customer_id: `customer_id ${body.customer_id} does not match any customer.` },
      });
    }
  } else if (body.customer?.user_id !== undefined) {
    const u = await db('users').where({ id: body.customer.user_id }).first('id', 'email');
    email = u?.email ?? null;
    if (!u) params['customer.user_id'] = `customer.user_id ${body.customer.user_id} does not match any user.`;
    else {
      const owner = await db('customers').where({ user_id: body.customer.user_id }).first('id');
      if (owner) params['customer.user_id'] = `customer.user_id ${body.customer.user_id} already belongs to customer ${owner.id}; use customer_id.`;
    }
  } else {
    const { username, email } = body.customer!;
    const taken: Record<string, any>[] = await db('users')
      .whereRaw('lower(username) = lower(?)', [username!])
      .orWhereRaw('lower(email) = lower(?)', [email!])
      .select('username', 'email');
    if (taken.some((u) => u.username.toLowerCase() === username!.toLowerCase())) params['customer.username'] = 'customer.username is already taken.';
    if (taken.some((u) => u.email.toLowerCase() === email!.toLowerCase())) params['customer.email'] = 'customer.email is already used by another account.';
  }

  // Site.
  let site: RegisterInput['site'] = null;
  if (body.site) {
    const addr = await siteAddress(settings, body.site.site_url);
    const taken = await db('sites').whereRaw('lower(domain) = ?', [addr.domain]).andWhere({ path: addr.path }).first('id');
    if (taken) params['site.site_url'] = 'site.site_url is already taken.';
    if (body.site.template_id !== undefined) {
      const t = await db('sites').where({ id: body.site.template_id }).first('type');
      if (!t) params['site.template_id'] = `site.template_id ${body.site.template_id} does not match any site.`;
      else if (t.type !== 'site_template') params['site.template_id'] = `site.template_id ${body.site.template_id} is not a site template (its type is ${t.type}).`;
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

  const plan = plans[0];
  const c = body.customer;
  let billing = c?.billing_address;
  if (body.country) billing = { country: body.country, ...(billing ?? {}) };
  return {
    requestHmac,
    idempotencyKeySha256,
    email,
    productSlugs: resolved.map((p) => p.slug),
    customer: {
      existingCustomerId: body.customer_id,
      userId: c?.user_id,
      account: body.customer_id === undefined && c?.user_id === undefined ? { username: c!.username!, email: c!.email! } : undefined,
      billing_address: billing,
    },
    cart: {
      plan_id: Number(plan.id),
      addon_ids: resolved.filter((p) => p !== plan).map((p) => Number(p.id)),
      currency,
      duration: body.duration,
      duration_unit: body.duration_unit,
    },
    auto_renew: body.auto_renew ?? false,
    membership: { status: 'pending', ...(body.membership ?? {}) } as RegisterInput['membership'],
    payment: { status: body.payment?.status ?? 'pending' },
    payment_method: body.payment_method ?? {},
    site,
  };
}
