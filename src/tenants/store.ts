import type { Db } from '../db/knex';
import { isoDate } from '../db/timestamps';
import { recordEvent } from '../events/record';

/** The three verification checks, in the order they run. */
export const CHECK_NAMES = ['no_legacy', 'sovereign_push', 'tenant_users'] as const;
export type CheckName = (typeof CHECK_NAMES)[number];
export const CHECK_STATUSES = ['pending', 'running', 'passed', 'failed'] as const;
export type CheckStatus = (typeof CHECK_STATUSES)[number];

export interface CheckResult {
  status: CheckStatus;
  message: string;
  checked_at: string | null;
}

export const TENANT_STATES = ['bootstrapping', 'verifying', 'ready', 'not_ready', 'failed', 'tearing_down', 'torn_down'] as const;
export type TenantState = (typeof TENANT_STATES)[number];

/** A row of the tenant registry. */
export interface TenantRow {
  id: number;
  uid: string;
  site_id: number;
  isolation_model: 'sovereign';
  state: TenantState;
  step: string | null;
  workflow_id: string | null;
  requested_host: string | null;
  database_host: string | null;
  database_name: string | null;
  role_name: string | null;
  /** Encrypted; never leaves the service. */
  credentials: string | null;
  filesystem_root: string | null;
  hostname: string | null;
  path: string | null;
  verification: Partial<Record<CheckName, CheckResult>>;
  error: { operation: string; step: string | null; message: string; at: string } | null;
  date_created: Date;
  date_modified: Date;
  date_torn_down: Date | null;
}

/** The live (not torn down) registry entry of a site. */
export async function liveTenant(db: Db, siteId: number): Promise<TenantRow | undefined> {
  return db('tenants').where({ site_id: siteId }).whereNot({ state: 'torn_down' }).first();
}

/** The migration status object: the contract's fields, then the details behind them. */
export function tenantStatus(tenant: TenantRow) {
  const checks = {} as Record<CheckName, CheckResult>;
  for (const name of CHECK_NAMES) checks[name] = tenant.verification?.[name] ?? { status: 'pending', message: 'Not verified yet.', checked_at: null };
  const verification = Object.fromEntries(CHECK_NAMES.map((n) => [n, checks[n].status])) as Record<CheckName, CheckStatus>;
  return {
    site_id: Number(tenant.site_id),
    isolation_model: tenant.isolation_model,
    database_host: tenant.database_host ?? tenant.requested_host ?? null,
    verification,
    ready: tenant.state === 'ready' && CHECK_NAMES.every((n) => checks[n].status === 'passed'),
    checks,
    state: tenant.state,
    step: tenant.step,
    workflow_id: tenant.workflow_id,
    database_name: tenant.database_name,
    hostname: tenant.hostname,
    path: tenant.path,
    error: tenant.error ?? null,
    date_created: isoDate(tenant.date_created),
    date_modified: isoDate(tenant.date_modified),
  };
}
export type TenantStatus = ReturnType<typeof tenantStatus>;

/**
 * A change of a tenant's registry entry by its workflow, and the event it makes, in one
 * transaction: tenant_ready when it becomes ready, tenant_torn_down when torn down,
 * tenant_failed when the workflow could not finish (`failed`). The payload is the status
 * GET /tenants/{site_id} answers.
 */
export async function changeTenant(db: Db, tenantId: number, patch: Record<string, unknown>, opts: { failed?: boolean } = {}): Promise<void> {
  await db.transaction(async (trx) => {
    const before = await trx('tenants').where({ id: tenantId }).forUpdate().first('state');
    if (!before) return;
    const [after] = (await trx('tenants').where({ id: tenantId }).update(patch).returning('*')) as TenantRow[];
    const slug = opts.failed ? 'tenant_failed' : after.state !== before.state && after.state === 'ready' ? 'tenant_ready' : after.state !== before.state && after.state === 'torn_down' ? 'tenant_torn_down' : null;
    if (slug) await recordEvent(trx, { slug, objectId: Number(after.site_id), payload: tenantStatus(after) });
  });
}

