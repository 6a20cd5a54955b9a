import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Search attributes of the register workflow (registered on every dev server by
 * src/infra/temporal-server.ts). Shared by the workflow and the handler that starts it.
 */
export const SA_CUSTOMER_ID = defineSearchAttributeKey('HostflowCustomerId', SearchAttributeType.INT);
export const SA_EMAIL = defineSearchAttributeKey('HostflowEmail', SearchAttributeType.KEYWORD);
export const SA_SITE_ID = defineSearchAttributeKey('HostflowSiteId', SearchAttributeType.INT);
export const SA_PRODUCTS = defineSearchAttributeKey('HostflowProducts', SearchAttributeType.KEYWORD_LIST);
