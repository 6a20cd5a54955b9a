import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { TableService, type RecordChange, type Refs, type Row, type Trx } from '../db/table-service';
import type { DomainChecks } from '../domains/checks';
import { recordEvents } from '../events/record';
import { conflict, invalidParams } from '../http/errors';
import { SITE_TYPES } from './schema';

export const siteListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.title', 't.domain', 't.description'],
  searchTable: 'sites',
  table: 'sites',
  idBounds: 'sites',
  counted: { table: 'sites', by: { 't.type': 'type' } },
  sortable: {
    id: 't.id',
    title: 't.title',
    domain: 't.domain',
    path: 't.path',
    type: 't.type',
    customer_id: 't.customer_id',
    membership_id: 't.membership_id',
    date_created: 't.date_created',
    date_modified: 't.date_modified',
  },
  filters: {
    customer_id: { column: 't.customer_id', type: 'int' },
    membership_id: { column: 't.membership_id', type: 'int' },
    template_id: { column: 't.template_id', type: 'int' },
    type: { column: 't.type', type: { enum: SITE_TYPES } },
    domain: { column: 't.domain', type: 'string' },
    path: { column: 't.path', type: 'string' },
    active: { column: 't.active', type: 'bool' },
    public: { column: 't.public', type: 'bool' },
    archived: { column: 't.archived', type: 'bool' },
  },
};

const pick = (cols: Row, current: Row | undefined, key: string) => (key in cols ? cols[key] : current?.[key]);

/** The rule "one site per address": the id of the site at (domain, path), the domain compared case-insensitively. */
export async function siteAtAddress(db: Knex | Trx, domain: string, path: string, exceptId?: number): Promise<number | null> {
  const q = db('sites').whereRaw('lower(domain) = ?', [domain.toLowerCase()]).andWhere({ path });
  if (exceptId !== undefined) q.whereNot({ id: exceptId });
  const row = await q.first('id');
  return row ? Number(row.id) : null;
}

/** The rule "a template is a site of type site_template": what is wrong with `templateId`, or null. */
export async function templateProblem(db: Knex | Trx, templateId: number): Promise<string | null> {
  const template = await db('sites').where({ id: templateId }).first('type');
  if (!template) return `template_id ${templateId} does not match any site.`;
  return templateTypeProblem(templateId, template.type);
}

function templateTypeProblem(templateId: number, type: string | undefined): string | null {
  if (type === undefined || type === 'site_template') return null;
  return `template_id ${templateId} is not a site template (its type is ${type}).`;
}

/**
 * Rules a site write must keep, checked inside the write's transaction:
 * (domain, path) unique; the template is a site of type site_template (and not the site
 * itself); the membership belongs to the site's customer. On create, a membership without
 * a customer_id gives the site its customer.
 */
async function checkSite(trx: Trx, cols: Row, refs: Refs, current?: Row): Promise<void> {
  const errors: Record<string, string> = {};
  const domain = pick(cols, current, 'domain');
  const path = pick(cols, current, 'path') ?? '/';
  if (('domain' in cols || 'path' in cols) && domain !== undefined) {
    const taken = await siteAtAddress(trx, String(domain), path, current ? Number(current.id) : undefined);
    if (taken) errors.domain = `domain ${domain} with path ${path} is already used by site ${taken}.`;
  }
  if (cols.template_id !== undefined && cols.template_id !== null) {
    if (current && Number(cols.template_id) === Number(current.id)) errors.template_id = 'template_id must not be the site itself.';
    else {
      // The reference check fetched it (an unknown template_id is refused there).
      const problem = templateTypeProblem(Number(cols.template_id), refs.template_id?.type);
      if (problem) errors.template_id = problem;
    }
  }
  const membershipId = pick(cols, current, 'membership_id');
  if (membershipId !== undefined && membershipId !== null && ('membership_id' in cols || 'customer_id' in cols)) {
    // Fetched by the reference check when the write sets it.
    const membership = refs.membership_id ?? (await trx('memberships').where({ id: membershipId }).first('customer_id'));
    if (membership) {
      if (!current && !('customer_id' in cols)) cols.customer_id = Number(membership.customer_id);
      const customerId = pick(cols, current, 'customer_id');
      if (customerId !== undefined && customerId !== null && Number(customerId) !== Number(membership.customer_id)) {
        errors.membership_id = `membership_id ${membershipId} belongs to customer ${membership.customer_id}, not to customer ${customerId}.`;
      }
    }
  }
  if (Object.keys(errors).length) throw invalidParams(errors);
}

/**
 * A new site's own data, as a WordPress network creates it: its options and a first post
 * and page. It lives in the shared tables until the site is isolated (see src/tenants).
 */
async function seedSiteContent(trx: Trx, row: Row): Promise<void> {
  const url = `https://${row.domain}${row.path === '/' ? '' : String(row.path).replace(/\/$/, '')}`;
  const options: Record<string, string> = {
    blogname: String(row.title),
    blogdescription: String(row.description ?? ''),
    siteurl: url,
    home: url,
    template_id: row.template_id === null || row.template_id === undefined ? '' : String(row.template_id),
  };
  await trx('site_options').insert(Object.entries(options).map(([name, value]) => ({ site_id: row.id, name, value })));
  // The customer's user, asked inside the insert (no round trip of its own).
  const authorId = row.customer_id ? trx.raw('(SELECT user_id FROM customers WHERE id = ?)', [row.customer_id]) : null;
  await trx('site_posts').insert([
    { site_id: row.id, post_type: 'post', title: 'Hello world!', content: 'Welcome to your new site. This is your first post.', status: 'publish', author_id: authorId },
    { site_id: row.id, post_type: 'page', title: 'Sample Page', content: 'This is an example page.', status: 'publish', author_id: authorId },
  ]);
}

/** An isolated site is torn down (DELETE /tenants/{id}) before it can be deleted. */
async function refuseIsolatedSite(trx: Trx, row: Row): Promise<void> {
  const tenant = await trx('tenants').where({ site_id: row.id }).whereNot({ state: 'torn_down' }).first('state');
  if (tenant) {
    throw conflict('wu_rest_site_isolated', `Site ${row.id} is an isolated tenant (state ${tenant.state}); tear it down first with DELETE /tenants/${row.id}.`);
  }
}

/** A site is published when it is active, public and not archived. */
const published = (row: Row | null) => row !== null && Boolean(row.active) && Boolean(row.public) && !row.archived;

/** site_created; site_published when a site becomes published (on its creation too). */
export async function recordSiteEvents(trx: Trx, change: RecordChange): Promise<void> {
  const { before, after, record } = change;
  const slugs = [...(!before ? ['site_created'] : []), ...(published(after) && !published(before) ? ['site_published'] : [])];
  await recordEvents(trx, slugs, Number(after.id), record, change.last);
}

/**
 * Sites. With `checks`, deleting a site stops the checks of its domain mappings (which go with
 * it: ON DELETE CASCADE).
 */
export function createSiteService(db: Db, checks?: DomainChecks): TableService {
  return new TableService(db, {
    table: 'sites',
    model: 'site',
    columns: {
      title: 'text',
      description: 'text',
      domain: 'text',
      path: 'text',
      customer_id: 'int',
      membership_id: 'int',
      template_id: 'int',
      type: 'text',
      active: 'bool',
      public: 'bool',
      archived: 'bool',
      site_meta: 'json',
      migrated_from_id: 'int',
    },
    listSpec: siteListSpec,
    references: {
      customer_id: { table: 'customers', label: 'customer' },
      membership_id: { table: 'memberships', label: 'membership' },
      template_id: { table: 'sites', label: 'site' },
    },
    uniques: { sites_domain_path_uq: { field: 'domain', message: 'domain with this path is already used by another site.' } },
    hooks: {
      changed: recordSiteEvents,
      beforeCreate: (trx, cols, refs) => checkSite(trx, cols, refs),
      afterCreate: (trx, row) => seedSiteContent(trx, row),
      beforeUpdate: (trx, current, cols, refs) => checkSite(trx, cols, refs, current),
      async beforeDelete(trx, row, write) {
        await refuseIsolatedSite(trx, row);
        if (!checks) return;
        const workflows: string[] = await trx('domains').where({ blog_id: row.id }).whereNotNull('workflow_id').pluck('workflow_id');
        if (workflows.length) write.afterCommit(() => Promise.all(workflows.map((w) => checks.stop(w))));
      },
    },
  });
}
