import type { Knex } from 'knex';

/**
 * Attachment quotas: the client address of each upload (req.ip, as TRUST_PROXY decides), so the
 * per-address quota is counted from the rows every API replica shares. Rows from before have
 * none and count for no address.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE chat_attachments ADD COLUMN uploader_address text');
  await knex.raw('CREATE INDEX chat_attachments_address_idx ON chat_attachments (uploader_address, date_created)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX chat_attachments_address_idx');
  await knex.raw('ALTER TABLE chat_attachments DROP COLUMN uploader_address');
}
