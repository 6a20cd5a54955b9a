import type { ResourceExamples } from '../db/resource';

/** The document's examples: a create and an update of a real run, and the record answered (test/examples.test.ts replays them). */
export const webhookExamples: ResourceExamples = {
  create: {
    name: 'CRM sync',
    description: 'Customers and payments to the CRM.',
    webhook_url: 'https://crm.example.com/hooks/hostflow',
    event: '*',
  },
  record: {
    id: 1,
    model: 'webhook',
    name: 'CRM sync',
    description: 'Customers and payments to the CRM.',
    webhook_url: 'https://crm.example.com/hooks/hostflow',
    event: '*',
    integration: 'manual',
    active: true,
    event_count: 0,
    date_last_failed: null,
    date_created: '2026-11-27T06:40:00.000Z',
    date_modified: '2026-11-27T06:40:00.000Z',
    _links: {
      self: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/webhooks/1' }],
      collection: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/webhooks' }],
    },
  },
  update: { event: 'payment_completed' },
};
