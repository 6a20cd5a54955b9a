import type { ResourceExamples } from '../db/resource';

/** The document's examples: a create and an update of a real run, and the record answered (test/examples.test.ts replays them). */
export const domainExamples: ResourceExamples = {
  create: { domain: 'shop.alice-studio.com', customer_id: 1, blog_id: 1, primary_domain: true, stage: 'domain-mapping' },
  record: {
    id: 1,
    model: 'domain',
    domain: 'shop.alice-studio.com',
    blog_id: 1,
    customer_id: 1,
    active: true,
    primary_domain: true,
    secure: false,
    stage: 'domain-mapping',
    workflow_id: null,
    last_error: null,
    next_check_at: null,
    date_created: '2026-11-26T12:18:47.252Z',
    date_modified: '2026-11-26T12:18:47.252Z',
    dns_record: { type: 'CNAME', name: 'shop.alice-studio.com', value: 'localhost' },
    _links: {
      self: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/domains/1' }],
      collection: [{ href: 'http://127.0.0.1:8080/wp-json/wu/v2/domains' }],
      site: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/sites/1' }],
      customer: [{ embeddable: true, href: 'http://127.0.0.1:8080/wp-json/wu/v2/customers/1' }],
    },
  },
  update: { secure: true },
};
