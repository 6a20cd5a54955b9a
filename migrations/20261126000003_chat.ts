import type { Knex } from 'knex';

/**
 * Support chat: agents, sessions, messages, attachments, satisfaction, agent time, canned
 * replies, business hours, and the tickets the chat falls back to. Tokens are stored only as
 * SHA-256 digests of high-entropy random secrets.
 */
function ts(t: Knex.CreateTableBuilder, knex: Knex): void {
  t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
}

function check(table: string, column: string, values: string[]): string {
  return `ALTER TABLE ${table} ADD CONSTRAINT ${table}_${column}_check CHECK (${column} IN (${values.map((v) => `'${v}'`).join(',')}))`;
}

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('chat_agents', (t) => {
    t.bigIncrements('id').primary();
    t.text('name').notNullable();
    t.text('email').notNullable();
    t.boolean('is_admin').notNullable().defaultTo(false);
    t.boolean('active').notNullable().defaultTo(true);
    t.text('token_sha256').notNullable();
    t.text('presence').notNullable().defaultTo('offline');
    t.timestamp('presence_changed_at', { useTz: true }).nullable();
    ts(t, knex);
  });
  await knex.raw('CREATE UNIQUE INDEX chat_agents_email_uq ON chat_agents (lower(email))');
  await knex.raw(check('chat_agents', 'presence', ['online', 'away', 'offline']));

  await knex.schema.createTable('tickets', (t) => {
    t.bigIncrements('id').primary();
    t.text('subject').notNullable();
    t.text('status').notNullable().defaultTo('open');
    t.text('priority').notNullable().defaultTo('normal');
    t.text('category').nullable();
    t.text('source').notNullable().defaultTo('chat');
    t.bigInteger('customer_id').nullable().references('id').inTable('customers').onDelete('SET NULL');
    t.text('customer_name').notNullable().defaultTo('');
    t.text('customer_email').notNullable().defaultTo('');
    t.bigInteger('site_id').nullable().references('id').inTable('sites').onDelete('SET NULL');
    ts(t, knex);
  });
  await knex.raw(check('tickets', 'status', ['open', 'pending', 'resolved', 'closed']));
  await knex.raw(check('tickets', 'priority', ['low', 'normal', 'high', 'urgent']));

  await knex.schema.createTable('ticket_messages', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('ticket_id').notNullable().references('id').inTable('tickets').onDelete('CASCADE');
    t.text('sender_type').notNullable();
    t.text('sender_name').notNullable().defaultTo('');
    t.text('body').notNullable();
    // The chat message this line copies (at most once per ticket).
    t.bigInteger('chat_message_id').nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(check('ticket_messages', 'sender_type', ['customer', 'agent', 'system']));
  await knex.raw('CREATE UNIQUE INDEX ticket_messages_chat_uq ON ticket_messages (ticket_id, chat_message_id) WHERE chat_message_id IS NOT NULL');
  await knex.raw('CREATE INDEX ticket_messages_ticket_idx ON ticket_messages (ticket_id, id)');

  await knex.schema.createTable('ticket_notes', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('ticket_id').notNullable().references('id').inTable('tickets').onDelete('CASCADE');
    t.bigInteger('agent_id').nullable().references('id').inTable('chat_agents').onDelete('SET NULL');
    t.text('note').notNullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('chat_sessions', (t) => {
    t.bigIncrements('id').primary();
    t.text('status').notNullable().defaultTo('waiting');
    t.bigInteger('customer_id').nullable().references('id').inTable('customers').onDelete('SET NULL');
    t.text('customer_name').notNullable().defaultTo('');
    t.text('customer_email').notNullable().defaultTo('');
    t.bigInteger('site_id').nullable().references('id').inTable('sites').onDelete('SET NULL');
    t.text('page_url').nullable();
    t.text('page_title').nullable();
    t.text('referrer').nullable();
    t.text('locale').nullable();
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.bigInteger('assigned_agent_id').nullable().references('id').inTable('chat_agents').onDelete('SET NULL');
    t.bigInteger('ticket_id').nullable().references('id').inTable('tickets').onDelete('SET NULL');
    t.text('fallback_reason').nullable();
    t.text('token_sha256').notNullable();
    t.timestamp('token_expires_at', { useTz: true }).notNullable();
    t.text('follow_up_workflow_id').nullable();
    t.timestamp('assigned_at', { useTz: true }).nullable();
    t.timestamp('first_response_at', { useTz: true }).nullable();
    t.timestamp('resolved_at', { useTz: true }).nullable();
    t.timestamp('closed_at', { useTz: true }).nullable();
    t.timestamp('last_message_at', { useTz: true }).nullable();
    ts(t, knex);
  });
  await knex.raw(check('chat_sessions', 'status', ['waiting', 'assigned', 'active', 'resolved', 'closed']));
  await knex.raw(check('chat_sessions', 'fallback_reason', ['offline', 'realtime_unavailable', 'wait_timeout', 'follow_up_unavailable', 'converted', 'linked']));
  await knex.raw('CREATE INDEX chat_sessions_status_idx ON chat_sessions (status, id)');
  await knex.raw('CREATE INDEX chat_sessions_agent_idx ON chat_sessions (assigned_agent_id, id)');
  await knex.raw('CREATE INDEX chat_sessions_customer_idx ON chat_sessions (customer_id, id)');
  await knex.raw('CREATE INDEX chat_sessions_site_idx ON chat_sessions (site_id, id)');
  await knex.raw('CREATE INDEX chat_sessions_date_created_idx ON chat_sessions (date_created, id)');

  await knex.schema.createTable('chat_attachments', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('session_id').notNullable().references('id').inTable('chat_sessions').onDelete('CASCADE');
    t.text('uploader_type').notNullable();
    t.text('name').notNullable();
    t.text('mime_type').notNullable();
    t.bigInteger('size').notNullable();
    t.text('sha256').notNullable();
    t.integer('width').nullable();
    t.integer('height').nullable();
    t.text('storage_name').notNullable().unique();
    t.text('thumbnail_storage_name').nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE INDEX chat_attachments_session_idx ON chat_attachments (session_id, id)');

  await knex.schema.createTable('chat_messages', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('session_id').notNullable().references('id').inTable('chat_sessions').onDelete('CASCADE');
    t.text('sender_type').notNullable();
    t.bigInteger('agent_id').nullable().references('id').inTable('chat_agents').onDelete('SET NULL');
    t.text('sender_name').notNullable().defaultTo('');
    t.text('body').notNullable();
    t.bigInteger('attachment_id').nullable().references('id').inTable('chat_attachments').onDelete('SET NULL');
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(check('chat_messages', 'sender_type', ['customer', 'agent', 'system']));
  await knex.raw('CREATE INDEX chat_messages_session_idx ON chat_messages (session_id, id)');

  await knex.schema.createTable('chat_satisfaction', (t) => {
    t.bigInteger('session_id').primary().references('id').inTable('chat_sessions').onDelete('CASCADE');
    t.smallint('rating').notNullable();
    t.text('comment').nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('ALTER TABLE chat_satisfaction ADD CONSTRAINT chat_satisfaction_rating_check CHECK (rating BETWEEN 1 AND 5)');

  await knex.schema.createTable('chat_agent_time', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('session_id').notNullable().references('id').inTable('chat_sessions').onDelete('CASCADE');
    t.bigInteger('agent_id').notNullable().references('id').inTable('chat_agents').onDelete('CASCADE');
    t.integer('minutes').notNullable();
    t.text('note').notNullable().defaultTo('');
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('ALTER TABLE chat_agent_time ADD CONSTRAINT chat_agent_time_minutes_check CHECK (minutes BETWEEN 1 AND 1440)');
  await knex.raw('CREATE INDEX chat_agent_time_session_idx ON chat_agent_time (session_id, id)');

  await knex.schema.createTable('chat_canned_replies', (t) => {
    t.bigIncrements('id').primary();
    t.text('shortcut').notNullable();
    t.text('title').notNullable();
    t.text('body').notNullable();
    ts(t, knex);
  });
  await knex.raw('CREATE UNIQUE INDEX chat_canned_replies_shortcut_uq ON chat_canned_replies (lower(shortcut))');

  // Business hours: one row (id 1).
  await knex.schema.createTable('chat_business_hours', (t) => {
    t.integer('id').primary();
    t.boolean('enabled').notNullable().defaultTo(false);
    t.text('timezone').notNullable().defaultTo('UTC');
    t.jsonb('schedule').notNullable().defaultTo('{}');
    t.jsonb('holidays').notNullable().defaultTo('[]');
    t.text('offline_message').notNullable().defaultTo('');
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex('chat_business_hours').insert({
    id: 1,
    enabled: false,
    timezone: 'UTC',
    schedule: JSON.stringify({}),
    holidays: JSON.stringify([]),
    offline_message: 'We are away right now. Leave a message and we will answer by email.',
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'chat_business_hours',
    'chat_canned_replies',
    'chat_agent_time',
    'chat_satisfaction',
    'chat_messages',
    'chat_attachments',
    'chat_sessions',
    'ticket_notes',
    'ticket_messages',
    'tickets',
    'chat_agents',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}
