import type { Knex } from 'knex';
import * as m20261125000001 from './20261125000001_foundation';
import * as m20261125000002 from './20261125000002_catalogue_and_estate';
import * as m20261125000003 from './20261125000003_registrations';
import * as m20261126000001 from './20261126000001_tenants';
import * as m20261126000002 from './20261126000002_translations';
import * as m20261126000003 from './20261126000003_chat';
import * as m20261126000004 from './20261126000004_tenant_user_sync';
import * as m20261127000020 from './20261127000020_chat_identity';
import * as m20261127000030 from './20261127000030_registration_passwords';
import * as m20261127000031 from './20261127000031_domain_next_check';
import * as m20261127000040 from './20261127000040_chat_attachment_quotas';
import * as m20261128000010 from './20261128000010_registration_request';
import * as m20261129000001 from './20261129000001_list_scale';
import * as m20261129000010 from './20261129000010_chat_session_email_filter';
import * as m20261130000030 from './20261130000030_rate_limits';
import * as m20261201000010 from './20261201000010_translation_expired';
import * as m20261202000010 from './20261202000010_idempotency_keys';
import * as m20261202000020 from './20261202000020_payment_gateway_ids';
import * as m20261203000010 from './20261203000010_workflow_starts';
import * as m20261203000020 from './20261203000020_translation_provider_failures';
import * as m20261203000030 from './20261203000030_payment_refunds';
import * as m20261203000040 from './20261203000040_membership_date_ranges';
import * as m20261203000050 from './20261203000050_product_price_variations';
import * as m20261203000060 from './20261203000060_discount_codes';
import * as m20261203000070 from './20261203000070_events';
import * as m20261203000080 from './20261203000080_webhooks';
import * as m20261204000010 from './20261204000010_events_no_notify';
import * as m20261204000030 from './20261204000030_membership_renewals';
import * as m20261204000050 from './20261204000050_membership_plan_changes';
import * as m20261205000010 from './20261205000010_webhook_deliveries_event_idx';
import * as m20261205000020 from './20261205000020_membership_lifecycle_deferral';
import * as m20261206000010 from './20261206000010_search_trigram_stats';
import * as m20261207000010 from './20261207000010_search_documents';
import * as m20261207000020 from './20261207000020_customer_search_documents';
import * as m20261208000010 from './20261208000010_id_bounds';

/**
 * Every migration, in order. Listed in code (not read from a folder) so the same list works
 * from TypeScript sources (tests, tsx) and from the compiled output.
 */
const migrations: Record<string, { up(k: Knex): Promise<void>; down(k: Knex): Promise<void> }> = {
  '20261125000001_foundation': m20261125000001,
  '20261125000002_catalogue_and_estate': m20261125000002,
  '20261125000003_registrations': m20261125000003,
  '20261126000001_tenants': m20261126000001,
  '20261126000002_translations': m20261126000002,
  '20261126000003_chat': m20261126000003,
  '20261126000004_tenant_user_sync': m20261126000004,
  '20261127000020_chat_identity': m20261127000020,
  '20261127000030_registration_passwords': m20261127000030,
  '20261127000031_domain_next_check': m20261127000031,
  '20261127000040_chat_attachment_quotas': m20261127000040,
  '20261128000010_registration_request': m20261128000010,
  '20261129000001_list_scale': m20261129000001,
  '20261129000010_chat_session_email_filter': m20261129000010,
  '20261130000030_rate_limits': m20261130000030,
  '20261201000010_translation_expired': m20261201000010,
  '20261202000010_idempotency_keys': m20261202000010,
  '20261202000020_payment_gateway_ids': m20261202000020,
  '20261203000010_workflow_starts': m20261203000010,
  '20261203000020_translation_provider_failures': m20261203000020,
  '20261203000030_payment_refunds': m20261203000030,
  '20261203000040_membership_date_ranges': m20261203000040,
  '20261203000050_product_price_variations': m20261203000050,
  '20261203000060_discount_codes': m20261203000060,
  '20261203000070_events': m20261203000070,
  '20261203000080_webhooks': m20261203000080,
  '20261204000010_events_no_notify': m20261204000010,
  '20261204000030_membership_renewals': m20261204000030,
  '20261204000050_membership_plan_changes': m20261204000050,
  '20261205000010_webhook_deliveries_event_idx': m20261205000010,
  '20261205000020_membership_lifecycle_deferral': m20261205000020,
  '20261206000010_search_trigram_stats': m20261206000010,
  '20261207000010_search_documents': m20261207000010,
  '20261207000020_customer_search_documents': m20261207000020,
  '20261208000010_id_bounds': m20261208000010,
};

export const migrationSource: Knex.MigrationSource<string> = {
  async getMigrations() {
    return Object.keys(migrations).sort();
  },
  getMigrationName(name) {
    return name;
  },
  async getMigration(name) {
    return migrations[name];
  },
};
