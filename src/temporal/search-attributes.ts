import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Search attributes of hostflow's workflows, set by the services that start them (registered on every dev server by
 * src/infra/temporal-server.ts). Ids and product slugs only: no personal data, which the
 * namespace would keep for its retention period, readable by anyone who can read it.
 * A registration is found by e-mail with `npm run cli -- registrations find <email>`.
 */
export const SA_CUSTOMER_ID = defineSearchAttributeKey('HostflowCustomerId', SearchAttributeType.INT);
export const SA_SITE_ID = defineSearchAttributeKey('HostflowSiteId', SearchAttributeType.INT);
export const SA_PRODUCTS = defineSearchAttributeKey('HostflowProducts', SearchAttributeType.KEYWORD_LIST);
