import type { Db } from '../db/knex';
import type { ListSpec } from '../db/list';
import { TableService, type RecordChange, type Row, type TableResourceConfig, type Trx } from '../db/table-service';
import { recordEvent } from '../events/record';
import { conflict, invalidParams } from '../http/errors';
import { cancelPendingStarts } from '../temporal/starts';
import type { DomainChecks } from './checks';
import { CHECKING_STAGES, DOMAIN_STAGES, INACTIVE_STAGES } from './schema';
import { requiredRecord, type MappingTarget } from './target';

export const domainListSpec: ListSpec = {
  idColumn: 't.id',
  dateCreatedColumn: 't.date_created',
  searchable: ['t.domain'],
  sortable: {
    id: 't.id',
    domain: 't.domain',
    stage: 't.stage',
    blog_id: 't.blog_id',
    customer_id: 't.customer_id',
    date_created: 't.date_created',
    date_modified: 't.date_modified',
  },
  filters: {
    domain: { column: 't.domain', type: 'string' },
    stage: { column: 't.stage', type: { enum: DOMAIN_STAGES } },
    blog_id: { column: 't.blog_id', type: 'int' },
    customer_id: { column: 't.customer_id', type: 'int' },
    active: { column: 't.active', type: 'bool' },
    primary_domain: { column: 't.primary_domain', type: 'bool' },
    secure: { column: 't.secure', type: 'bool' },
  },
};

const pick = (cols: Row, current: Row | undefined, key: string) => (key in cols ? cols[key] : current?.[key]);
const isSet = (v: unknown) => v !== undefined && v !== null;

/**
 * The rules of a domain write, inside its transaction: unique name (any case); the site
 * belongs to the customer when both are given (on create the site's customer is taken when
 * customer_id is not sent); primary needs a site and un-marks the site's other domains
 * (the site row is locked so two requests cannot both win); checking/failed stages force
 * `active` false; renaming a checked domain starts its checks over.
 */
async function checkDomain(trx: Trx, cols: Row, current?: Row): Promise<void> {
  const errors: Record<string, string> = {};

  if (current && 'domain' in cols && cols.domain !== current.domain && !('stage' in cols) && !['domain-mapping', 'done-without-ssl'].includes(current.stage)) {
    cols.stage = 'checking-dns';
  }
  if ('domain' in cols && cols.domain !== current?.domain) {
    const q = trx('domains').whereRaw('lower(domain) = ?', [String(cols.domain).toLowerCase()]);
    if (current) q.whereNot({ id: current.id });
    const taken = await q.first('id');
    if (taken) errors.domain = `domain ${cols.domain} is already mapped (domain ${taken.id}).`;
  }

  const blogId = pick(cols, current, 'blog_id');
  if (isSet(blogId) && ('blog_id' in cols || 'customer_id' in cols)) {
    const site = await trx('sites').where({ id: blogId }).first('customer_id');
    if (site) {
      if (!current && !('customer_id' in cols)) {
        if (isSet(site.customer_id)) cols.customer_id = Number(site.customer_id);
      } else {
        const customerId = pick(cols, current, 'customer_id');
        if (isSet(customerId) && Number(site.customer_id) !== Number(customerId)) {
          errors.blog_id = `site ${blogId} ${isSet(site.customer_id) ? `belongs to customer ${site.customer_id}` : 'belongs to no customer'}, not to customer ${customerId}.`;
        }
      }
    }
  }

  const primary = Boolean(pick(cols, current, 'primary_domain'));
  if (primary && !isSet(blogId) && ('primary_domain' in cols || 'blog_id' in cols)) {
    errors.primary_domain = 'primary_domain needs a site: send blog_id (the site this domain is mapped to).';
  }
  if (Object.keys(errors).length) throw invalidParams(errors);

  const stage = pick(cols, current, 'stage') ?? 'checking-dns';
  if (INACTIVE_STAGES.has(stage)) {
    if (!current || 'stage' in cols || 'active' in cols) cols.active = false;
  } else if (current && 'stage' in cols && INACTIVE_STAGES.has(current.stage) && !('active' in cols)) {
    cols.active = true;
  }

  if (primary && isSet(blogId) && ('primary_domain' in cols || 'blog_id' in cols)) {
    await trx('sites').where({ id: blogId }).forUpdate().first('id');
    const others = trx('domains').where({ blog_id: blogId, primary_domain: true });
    if (current) others.whereNot({ id: current.id });
    await others.update({ primary_domain: false, date_modified: trx.fn.now() });
  }
}

/** The stage a retry checks again from: the step that failed, or the one waiting for its next try. */
const RETRY_FROM: Record<string, string> = {
  'checking-dns': 'checking-dns',
  failed: 'checking-dns',
  'checking-ssl-cert': 'checking-ssl-cert',
  'ssl-failed': 'checking-ssl-cert',
};

/** domain_created; domain_stage_changed whenever its stage changes (by the API, or by its check: activities/domains.ts). */
export async function recordDomainEvents(trx: Trx, change: RecordChange): Promise<void> {
  const { before, after, record, last } = change;
  if (!before) await recordEvent(trx, { slug: 'domain_created', objectId: Number(after.id), payload: record }, { last });
  else if (before.stage !== after.stage) await recordEvent(trx, { slug: 'domain_stage_changed', objectId: Number(after.id), payload: record }, { last });
}

/**
 * Domain mappings. A mapping created in (or moved to) `checking-dns` gets a durable check
 * workflow (`checking-ssl-cert` too: the check then starts at the certificate), written to the
 * start outbox in the write's transaction and started after its commit; deleting the mapping,
 * or moving it out of the checking stages by hand, stops it. Every record carries
 * `dns_record`, the record its name needs (see ./target.ts).
 */
export function createDomainService(db: Db, checks: DomainChecks, target: MappingTarget): TableService {
  return new TableService(db, {
    ...domainTable(target),
    hooks: {
      changed: recordDomainEvents,
      // A check that cannot start is refused before anything is read or written.
      beforeWrite(input, op) {
        if (CHECKING_STAGES.has(op === 'create' ? (input.stage ?? 'checking-dns') : input.stage)) checks.assertAvailable();
      },
      beforeCreate: (trx, cols) => checkDomain(trx, cols),
      beforeUpdate: (trx, current, cols) => checkDomain(trx, cols, current),
      // A mapping created in a checking stage gets its check's start in the same transaction (the outbox).
      async afterCreate(trx, row, write) {
        if (!CHECKING_STAGES.has(row.stage)) return;
        const workflowId = await checks.workflowId(Number(row.id));
        const [changed] = await trx('domains').where({ id: row.id }).update({ workflow_id: workflowId }).returning('*');
        await checks.enqueue(trx, changed, workflowId);
        write.afterCommit(() => checks.startNow(workflowId));
        return changed;
      },
      async afterUpdate(trx, before, after, write) {
        // Sending a checking stage (even the current one) or renaming a checked domain (re)starts its check,
        // under the id stored on the row (a check started before ids had a prefix keeps its id).
        if (CHECKING_STAGES.has(after.stage) && (CHECKING_STAGES.has(write.input.stage) || after.domain !== before.domain)) {
          const workflowId = before.workflow_id ?? (await checks.workflowId(Number(after.id)));
          // Cleared before the start: the new check's first try may record its own error at once.
          const [changed] = await trx('domains').where({ id: after.id }).update({ last_error: null, next_check_at: null, workflow_id: workflowId }).returning('*');
          await checks.enqueue(trx, changed, workflowId);
          write.afterCommit(() => checks.startNow(workflowId));
          return changed;
        }
        if (before.workflow_id && CHECKING_STAGES.has(before.stage) && !CHECKING_STAGES.has(after.stage)) {
          await cancelPendingStarts(trx, before.workflow_id);
          write.afterCommit(() => checks.stop(before.workflow_id, `stage set to ${after.stage} by hand`));
        }
      },
      // A start still waiting goes with the mapping; a running check is stopped.
      async beforeDelete(trx, row, write) {
        if (!row.workflow_id) return;
        await cancelPendingStarts(trx, row.workflow_id);
        write.afterCommit(() => checks.stop(row.workflow_id));
      },
    },
  });
}

/** The domains table as records read it (with dns_record); what the check's activities answer its events with. */
export function domainTable(target: MappingTarget): TableResourceConfig {
  return {
    table: 'domains',
    model: 'domain',
    columns: {
      domain: 'text',
      blog_id: 'int',
      customer_id: 'int',
      active: 'bool',
      primary_domain: 'bool',
      secure: 'bool',
      stage: 'text',
      workflow_id: 'text',
      last_error: 'text',
      next_check_at: 'timestamp',
    },
    listSpec: domainListSpec,
    references: {
      blog_id: { table: 'sites', label: 'site' },
      customer_id: { table: 'customers', label: 'customer' },
    },
    uniques: {
      domains_domain_uq: { field: 'domain', message: 'domain is already mapped.' },
      domains_one_primary_uq: { field: 'primary_domain', message: 'another domain of this site was marked primary at the same moment; try again.' },
    },
    computedFrom: { dns_record: ['domain'] },
    // Each record gets dns_record, the record its name needs (unless the fields asked leave it out).
    async present(records, fields) {
      if (fields && !fields.has('dns_record')) return;
      const value = await target.value();
      for (const rec of records) rec.dns_record = requiredRecord(rec.domain, value);
    },
  };
}

/**
 * POST /domains/{id}/retry: checks again at once, from the step that failed or the one
 * waiting for its next try (the same as sending that checking stage). Other stages have
 * nothing to retry: 409.
 */
export async function retryDomainCheck(domains: TableService, id: number): Promise<Row | null> {
  const row = await domains.getRow(id);
  if (!row) return null;
  const stage = RETRY_FROM[row.stage];
  if (!stage) {
    throw conflict(
      'wu_rest_domain_not_retryable',
      `Domain ${id} is in stage ${row.stage}: no check failed or waits for a try, so there is nothing to retry. To check it from the start, set its stage to checking-dns.`,
    );
  }
  return domains.update(id, { stage });
}
