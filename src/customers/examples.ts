import type { ResourceExamples } from '../db/resource';

/** The document's examples: a create and an update of a real run, and the record answered (test/examples.test.ts replays them). */
export const customerExamples: ResourceExamples = {
  create: {
    username: 'alice',
    email: 'alice@example.com',
    password: 's3cret!pass',
    display_name: 'Alice Martin',
    vip: true,
    billing_address: { company_name: 'Alice Studio', billing_city: 'Paris', billing_country: 'FR' },
  },
  record: {
    id: 1,
    model: 'customer',
    user_id: 1,
    username: 'alice',
    email: 'alice@example.com',
    display_name: 'Alice Martin',
    type: 'customer',
    email_verification: 'none',
    date_registered: '2026-11-26T12:18:45.018Z',
    last_login: null,
    has_trialed: false,
    vip: true,
    ips: [],
    signup_form: 'by-admin',
    extra_information: '',
    billing_address: { billing_city: 'Paris', company_name: 'Alice Studio', billing_country: 'FR' },
    notes: [],
    migrated_from_id: null,
    date_created: '2026-11-26T12:18:45.018Z',
    date_modified: '2026-11-26T12:18:45.018Z',
    _links: { self: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/customers/1' }], collection: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/customers' }] },
  },
  update: { vip: false, extra_information: 'Prefers e-mail over phone.' },
};
