import type { Knex } from 'knex';

/**
 * Site content and isolated ("sovereign") tenants.
 *
 * - site_users: users linked to a site besides its owning customer's user (with their role).
 * - site_options, site_posts: a site's own data while it lives in the shared database. Ids
 *   come from the network's sequences, also for rows that later live in a tenant database,
 *   so moving rows out and back never needs new ids.
 * - tenants: the registry (site -> database host, database, role, files, host name). One
 *   live entry per site (a partial unique index); a torn-down entry stays as history.
 *   Credentials are stored encrypted (AES-256-GCM, key from TENANT_CREDENTIALS_KEY).
 * - tenant_routes: host name (+ path) -> tenant database host and name.
 * - tenant_push_jobs: the work of moving a site's data into its tenant database.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('site_users', (t) => {
    t.bigInteger('site_id').notNullable().references('id').inTable('sites').onDelete('CASCADE');
    t.bigInteger('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE');
    t.text('role').notNullable().defaultTo('editor');
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['site_id', 'user_id']);
  });
  await knex.raw("ALTER TABLE site_users ADD CONSTRAINT site_users_role_check CHECK (role IN ('administrator','editor','author','contributor','subscriber'))");
  await knex.raw('CREATE INDEX site_users_user_idx ON site_users (user_id)');

  await knex.schema.createTable('site_options', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('site_id').notNullable().references('id').inTable('sites').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('value').notNullable().defaultTo('');
    t.unique(['site_id', 'name']);
  });

  await knex.schema.createTable('site_posts', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('site_id').notNullable().references('id').inTable('sites').onDelete('CASCADE');
    t.text('post_type').notNullable().defaultTo('post');
    t.text('title').notNullable().defaultTo('');
    t.text('content').notNullable().defaultTo('');
    t.text('status').notNullable().defaultTo('publish');
    t.bigInteger('author_id').nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE INDEX site_posts_site_idx ON site_posts (site_id, id)');

  await knex.schema.createTable('tenants', (t) => {
    t.bigIncrements('id').primary();
    // Random, so workflow ids and database names never repeat, not even across databases
    // that share one Temporal namespace or one PostgreSQL server.
    t.uuid('uid').notNullable().unique();
    t.bigInteger('site_id').notNullable().references('id').inTable('sites').onDelete('CASCADE');
    t.text('isolation_model').notNullable().defaultTo('sovereign');
    t.text('state').notNullable().defaultTo('bootstrapping');
    t.text('step').nullable();
    t.text('workflow_id').nullable();
    t.text('requested_host').nullable();
    t.text('database_host').nullable();
    t.text('database_name').nullable();
    t.text('role_name').nullable();
    t.text('credentials').nullable();
    t.text('filesystem_root').nullable();
    t.text('hostname').nullable();
    t.text('path').nullable();
    t.jsonb('verification').notNullable().defaultTo('{}');
    t.jsonb('error').nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_torn_down', { useTz: true }).nullable();
  });
  await knex.raw(
    "ALTER TABLE tenants ADD CONSTRAINT tenants_state_check CHECK (state IN ('bootstrapping','verifying','ready','not_ready','failed','tearing_down','torn_down'))",
  );
  await knex.raw("ALTER TABLE tenants ADD CONSTRAINT tenants_isolation_model_check CHECK (isolation_model IN ('sovereign'))");
  await knex.raw("CREATE UNIQUE INDEX tenants_live_site_uq ON tenants (site_id) WHERE state <> 'torn_down'");
  await knex.raw("CREATE INDEX tenants_host_idx ON tenants (database_host) WHERE state <> 'torn_down'");

  await knex.schema.createTable('tenant_routes', (t) => {
    t.text('hostname').notNullable();
    t.text('path').notNullable().defaultTo('/');
    t.bigInteger('tenant_id').notNullable().references('id').inTable('tenants').onDelete('CASCADE');
    t.bigInteger('site_id').notNullable();
    t.text('database_host').notNullable();
    t.text('database_name').notNullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE UNIQUE INDEX tenant_routes_host_path_uq ON tenant_routes (lower(hostname), path)');
  await knex.raw('CREATE UNIQUE INDEX tenant_routes_tenant_uq ON tenant_routes (tenant_id)');

  await knex.schema.createTable('tenant_push_jobs', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('tenant_id').notNullable().references('id').inTable('tenants').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.text('status').notNullable().defaultTo('queued');
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('rows_pushed').notNullable().defaultTo(0);
    t.text('last_error').nullable();
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw("ALTER TABLE tenant_push_jobs ADD CONSTRAINT tenant_push_jobs_status_check CHECK (status IN ('queued','running','done','failed'))");
  await knex.raw('CREATE INDEX tenant_push_jobs_tenant_idx ON tenant_push_jobs (tenant_id, status)');
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['tenant_push_jobs', 'tenant_routes', 'tenants', 'site_posts', 'site_options', 'site_users']) await knex.schema.dropTableIfExists(t);
}
