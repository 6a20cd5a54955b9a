/**
 * Types shared by the /register API, its records transaction, the activities and the workflow.
 * Only ids and outcomes cross into Temporal; the request itself stays in `registrations`.
 */

export interface ErrorBody {
  code: string;
  message: string;
  data: { status: number; [k: string]: unknown };
}

/** The validated request as stored in `registrations.request` (personal data: PostgreSQL only). */
export interface RegistrationRequest {
  /** Product slugs, in the request's order (for the search attributes and the summary). */
  products: string[];
  plan: string;
  customer: {
    existingCustomerId?: number;
    userId?: number;
    /** A new account: its password hash is held in `registrations.password_hash`. */
    account?: { username: string; email: string };
    /** The id the new customer gets (taken from the sequence before the workflow starts, so the workflow can name it). */
    newCustomerId?: number;
    billing_address?: Record<string, unknown>;
  };
  cart: { plan_id: number; addon_ids: number[]; currency: string; duration?: number; duration_unit?: string };
  /** The discount code asked for (checked at request time; its use is taken in the records transaction). */
  discount?: { id: number; code: string };
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
    /** The id the new site gets (taken with the customer's, before the workflow starts). */
    newSiteId?: number;
    site_meta?: Record<string, unknown>;
    site_option?: Record<string, unknown>;
  };
}

export interface RegistrationIds {
  customer_id: number;
  membership_id: number;
  payment_id: number;
  /** null without a site. */
  site_id: number | null;
}

/** What the records transaction did; the error of a refusal is in the row, not here. */
export type CommitOutcome =
  | { status: 'committed'; ids: RegistrationIds; provision: boolean }
  /** Refused for a reason of the request (taken username…): final, the row holds the 4xx. */
  | { status: 'rejected' }
  /** The API gave up on it (it answered 503) before the transaction ran: nothing is written. */
  | { status: 'abandoned' };

/** The 200 body of /register: each record as its resource's GET returns it. */
export interface RegisterResult {
  customer: Record<string, unknown>;
  membership: Record<string, unknown>;
  payment: Record<string, unknown>;
  site: Record<string, unknown>;
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
  /** The plan's trial when this registration takes it (the customer never had one), else null. */
  trial: { duration: number; unit: string } | null;
  /** Recurring amount per period: plan + recurring add-ons. */
  amount: string;
  /** First payment: every product's amount plus every setup fee (with a trial: the setup fees and one-time products only). */
  initial_amount: string;
  line_items: LineItemOut[];
  subtotal: string;
  /** What the discount code takes off the lines of the first payment (0 without one). */
  discount_total: string;
  /** subtotal - discount_total. */
  total: string;
  /** The discount code applied (as stored), or null. */
  discount_code: string | null;
}

