import type { ResourceExamples } from '../db/resource';

/** The document's examples: a create and an update of a real run, and the record answered (test/examples.test.ts replays them). */
export const membershipExamples: ResourceExamples = {
  create: {
    customer_id: 1,
    plan_id: 1,
    addon_products: [{ product_id: 2, quantity: 1 }],
    status: 'active',
    gateway: 'stripe',
    gateway_customer_id: 'cus_Q3xA9k',
    gateway_subscription_id: 'sub_1PqX2aLk',
    auto_renew: true,
    amount: '12.90',
    initial_amount: '17.90',
    date_expiration: '2026-12-26T12:18:46.123Z',
  },
  record: {
    id: 1,
    model: 'membership',
    customer_id: 1,
    plan_id: 1,
    addon_products: [{ quantity: 1, product_id: 2 }],
    currency: 'USD',
    initial_amount: 17.9,
    recurring: true,
    auto_renew: true,
    duration: 1,
    duration_unit: 'month',
    amount: 12.9,
    discount_code: null,
    date_activated: '2026-11-26T12:18:46.123Z',
    date_trial_end: null,
    date_renewed: null,
    date_cancellation: null,
    date_expiration: '2026-12-26T12:18:46.123Z',
    times_billed: 0,
    billing_cycles: 0,
    status: 'active',
    gateway: 'stripe',
    gateway_customer_id: 'cus_Q3xA9k',
    gateway_subscription_id: 'sub_1PqX2aLk',
    migrated_from_id: null,
    date_created: '2026-11-26T12:18:46.123Z',
    date_modified: '2026-11-26T12:18:46.123Z',
    scheduled_change: null,
    credit_balance: 0,
    _links: {
      self: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/memberships/1' }],
      collection: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/memberships' }],
      customer: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/customers/1' }],
      plan: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/products/1' }],
    },
  },
  update: { auto_renew: false, gateway_subscription_id: 'sub_1PqX2aLm' },
};

/**
 * POST /memberships/{id}/change: the README's worked example. Basic at 29 USD a month, renewed
 * 2026-11-01, changes to Pro (49 USD a month) on 2026-11-21 00:00 UTC: 10 of 30 days are left.
 */
const previewAnswer = {
  membership_id: 1,
  when: 'now',
  preview: true,
  currency: 'USD',
  from: { plan_id: 1, duration: 1, duration_unit: 'month', addon_products: [], amount: 29 },
  to: { plan_id: 3, duration: 1, duration_unit: 'month', addon_products: [], amount: 49 },
  period: { start: '2026-11-01T00:00:00.000Z', end: '2026-12-01T00:00:00.000Z', seconds: 2592000, remaining_seconds: 864000 },
  // 29 × 864000 / 2592000 = 9.666… → 9.67; 49 × 864000 / 2592000 = 16.333… → 16.33.
  credit: 9.67,
  cost: 16.33,
  amount_due: 6.66,
  credit_left: 0,
  lines: [{ name: 'Pro', description: '10 of 30 days left of the period to 2026-12-01, prorated; less 9.67 USD credit for the unused time of the current plan', quantity: 1, unit_price: 16.33, product_id: 3 }],
  effective_at: '2026-11-21T00:00:00.000Z',
  next_renewal: { date: '2026-12-01T00:00:00.000Z', amount: 49, credit_applied: 0, amount_due: 49 },
};

/** The downgrade back to Basic, scheduled for the period's end: nothing is prorated, the membership carries it. */
const scheduledAnswer = {
  ...previewAnswer,
  when: 'period_end',
  preview: false,
  from: previewAnswer.to,
  to: previewAnswer.from,
  credit: 0,
  cost: 0,
  amount_due: 0,
  lines: [],
  effective_at: '2026-12-01T00:00:00.000Z',
  next_renewal: { date: '2026-12-01T00:00:00.000Z', amount: 29, credit_applied: 0, amount_due: 29 },
  membership: {
    ...membershipExamples.record,
    plan_id: 3,
    addon_products: [],
    amount: 49,
    date_renewed: '2026-11-01T00:00:00.000Z',
    date_expiration: '2026-12-01T00:00:00.000Z',
    scheduled_change: { plan_id: 1, duration: 1, duration_unit: 'month', addon_products: [], amount: 29, effective_at: '2026-12-01T00:00:00.000Z', requested_at: '2026-11-21T00:00:00.000Z' },
    _links: { ...(membershipExamples.record._links as Record<string, unknown>), plan: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/products/3' }] },
  },
  payment: null,
};

export const changeExamples = {
  bodies: {
    upgrade: { summary: 'Upgrade now, prorated', value: { plan_id: 3, when: 'now' } },
    preview: { summary: 'What an upgrade would cost, changing nothing', value: { plan_id: 3, when: 'now', preview: true } },
    yearly: { summary: 'To the yearly price now: a new period starts', value: { plan_id: 3, duration: 1, duration_unit: 'year', when: 'now' } },
    downgrade: { summary: 'Downgrade at the end of the period, dropping the add-ons', value: { plan_id: 2, addon_products: [], when: 'period_end' } },
  },
  answers: {
    preview: { summary: 'The preview of the upgrade', value: previewAnswer },
    scheduled: { summary: 'A downgrade scheduled for the end of the period', value: scheduledAnswer },
  },
};
