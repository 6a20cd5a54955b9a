import type { ResourceExamples } from '../db/resource';

/** The document's examples: a create and an update of a real run, and the record answered (test/examples.test.ts replays them). */
export const paymentExamples: ResourceExamples = {
  create: {
    customer_id: 1,
    membership_id: 1,
    product_id: 1,
    status: 'completed',
    gateway: 'stripe',
    gateway_payment_id: 'pi_3PqX2aLk',
    currency: 'USD',
    line_items: [
      { name: 'Starter', description: '1 month', quantity: 1, unit_price: '9.90', product_id: 1 },
      { name: 'Starter setup fee', quantity: 1, unit_price: '5.00', product_id: 1 },
      { name: 'Daily backups', quantity: 1, unit_price: '3.00', product_id: 2 },
    ],
  },
  record: {
    id: 1,
    model: 'payment',
    customer_id: 1,
    membership_id: 1,
    product_id: 1,
    parent_id: null,
    currency: 'USD',
    subtotal: 17.9,
    refund_total: 0,
    discount_total: 0,
    discount_code: null,
    tax_total: 0,
    total: 17.9,
    status: 'completed',
    gateway: 'stripe',
    gateway_payment_id: 'pi_3PqX2aLk',
    line_items: [
      { name: 'Starter', quantity: 1, product_id: 1, unit_price: 9.9, description: '1 month' },
      { name: 'Starter setup fee', quantity: 1, product_id: 1, unit_price: 5 },
      { name: 'Daily backups', quantity: 1, product_id: 2, unit_price: 3 },
    ],
    invoice_number: 1,
    migrated_from_id: null,
    date_created: '2026-11-26T12:18:46.361Z',
    date_modified: '2026-11-26T12:18:46.361Z',
    _links: {
      self: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/payments/1' }],
      collection: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/payments' }],
      customer: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/customers/1' }],
      membership: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/memberships/1' }],
      product: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/products/1' }],
    },
  },
  update: { gateway_payment_id: 'pi_3PqX2aLm' },
};
