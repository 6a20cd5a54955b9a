import type { ResourceExamples } from '../db/resource';

/** The document's examples: a create and an update of a real run, and the record answered (test/examples.test.ts replays them). */
export const siteExamples: ResourceExamples = {
  create: { customer_id: 1, membership_id: 1, domain: 'alice.example.com', path: '/', title: 'Alice Studio', type: 'customer_owned' },
  record: {
    id: 1,
    model: 'site',
    title: 'Alice Studio',
    description: '',
    domain: 'alice.example.com',
    path: '/',
    customer_id: 1,
    membership_id: 1,
    template_id: null,
    type: 'customer_owned',
    active: true,
    public: true,
    archived: false,
    site_meta: {},
    migrated_from_id: null,
    date_created: '2026-11-26T12:18:46.799Z',
    date_modified: '2026-11-26T12:18:46.799Z',
    _links: {
      self: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/sites/1' }],
      collection: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/sites' }],
      customer: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/customers/1' }],
      membership: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/memberships/1' }],
    },
  },
  update: { title: 'Alice Studio Paris', public: false },
};
