import type { Knex } from 'knex';

/**
 * Translation projects (a plugin or theme with its source strings and where human
 * translations come from) and translation jobs (one per slug + type + version + locale: the
 * pipeline's state, its strings and the built package). The unique key on jobs is what makes
 * concurrent status checks start one pipeline only.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('translation_projects', (t) => {
    t.bigIncrements('id').primary();
    t.text('slug').notNullable();
    t.text('type').notNullable();
    t.text('name').notNullable();
    t.text('version').notNullable();
    t.text('pot').nullable();
    t.text('pot_url').nullable();
    t.text('glotpress_url_template').nullable();
    t.jsonb('po_files').notNullable().defaultTo('{}');
    t.boolean('auto_approve').notNullable().defaultTo(false);
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['slug', 'type']);
  });
  await knex.raw("ALTER TABLE translation_projects ADD CONSTRAINT translation_projects_type_check CHECK (type IN ('plugin','theme'))");
  await knex.raw('ALTER TABLE translation_projects ADD CONSTRAINT translation_projects_pot_check CHECK (pot IS NOT NULL OR pot_url IS NOT NULL)');

  await knex.schema.createTable('translation_jobs', (t) => {
    t.bigIncrements('id').primary();
    t.bigInteger('project_id').nullable().references('id').inTable('translation_projects').onDelete('SET NULL');
    t.text('slug').notNullable();
    t.text('type').notNullable();
    t.text('version').notNullable();
    t.text('locale').notNullable();
    t.text('status').notNullable().defaultTo('importing');
    t.text('source').notNullable().defaultTo('none');
    t.integer('total_strings').notNullable().defaultTo(0);
    t.integer('remaining_strings').notNullable().defaultTo(0);
    t.integer('human_strings').notNullable().defaultTo(0);
    t.integer('ai_strings').notNullable().defaultTo(0);
    t.integer('batches_done').notNullable().defaultTo(0);
    /** The strings and their translations (see src/translations/gettext.ts Entry). */
    t.jsonb('entries').nullable();
    t.text('workflow_id').notNullable();
    t.text('failure_step').nullable();
    t.text('failure_reason').nullable();
    t.text('rejection_reason').nullable();
    t.timestamp('approved_at', { useTz: true }).nullable();
    t.text('approved_by').nullable();
    t.text('package_path').nullable();
    t.bigInteger('package_size').nullable();
    t.text('package_sha256').nullable();
    t.jsonb('package_files').nullable();
    t.jsonb('logs').notNullable().defaultTo('[]');
    t.timestamp('status_changed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_created', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('date_modified', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['slug', 'type', 'version', 'locale']);
    t.index(['status']);
    t.index(['locale']);
  });
  await knex.raw(
    "ALTER TABLE translation_jobs ADD CONSTRAINT translation_jobs_status_check CHECK (status IN ('importing','pending_approval','processing','packaging','ready','failed'))",
  );
  await knex.raw("ALTER TABLE translation_jobs ADD CONSTRAINT translation_jobs_type_check CHECK (type IN ('plugin','theme'))");
  await knex.raw(
    "ALTER TABLE translation_jobs ADD CONSTRAINT translation_jobs_failure_step_check CHECK (failure_step IS NULL OR failure_step IN ('importing','pending_approval','processing','packaging'))",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('translation_jobs');
  await knex.schema.dropTableIfExists('translation_projects');
}
