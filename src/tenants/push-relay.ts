import { WorkflowIdConflictPolicy } from '@temporalio/client';
import { tenantPush } from '../../workflows/tenants';
import type { Db } from '../db/knex';
import { relayLoop } from '../db/listen';
import { ApiError } from '../http/errors';
import type { TemporalGateway } from '../temporal/gateway';
import { SA_SITE_ID } from '../temporal/search-attributes';

export const TENANT_PUSH_CHANNEL = 'hostflow_tenant_push';

export interface PushRelay {
  /** One pass now (tests, and the interval). Resolves with the tenants whose workflow was started or joined. */
  sweep(): Promise<number[]>;
  stop(): Promise<void>;
}

/**
 * The relay of the tenant push outbox: tenants with queued push jobs (queued by the database
 * triggers of migration 20261126000004) get their tenantPush workflow (<prefix>-tenant-push-<uid>;
 * a running one is joined). Woken by NOTIFY on commit, and a sweep every `intervalMs`
 * catches what a lost connection missed. Every worker process runs one; the workflow id
 * makes their starts one. `temporal`: a gateway of the process's own (a background job's
 * longer deadline; a failed pass is tried again by the next).
 */
export function startTenantPushRelay(opts: { db: Db; temporal: TemporalGateway; intervalMs?: number }): PushRelay {
  const { db, temporal } = opts;
  const unavailable = (detail?: string) => new ApiError(503, 'temporal_unavailable', `tenant push relay: ${detail ?? 'Temporal unreachable'}`);

  const pass = async (): Promise<number[]> => {
    const due: { id: number; uid: string; site_id: number }[] = await db('tenants as t')
      .whereIn('t.state', ['ready', 'not_ready'])
      .whereExists(db('tenant_push_jobs as j').whereRaw('j.tenant_id = t.id').andWhere('j.status', 'queued'))
      .select('t.id', 't.uid', 't.site_id');
    for (const tenant of due) {
      await temporal.start(
        tenantPush,
        {
          workflowId: await temporal.ids.build('tenant-push', tenant.uid),
          args: [{ tenantId: Number(tenant.id), siteId: Number(tenant.site_id) }],
          conflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
          memo: { site_id: Number(tenant.site_id), tenant_uid: tenant.uid },
          searchAttributes: [{ key: SA_SITE_ID, value: Number(tenant.site_id) }],
          summary: `Tenant push, site ${tenant.site_id}`,
        },
        unavailable,
      );
    }
    return due.map((tenant) => Number(tenant.site_id));
  };

  return relayLoop({ db, name: 'tenant-push-relay', channels: [TENANT_PUSH_CHANNEL], intervalMs: opts.intervalMs ?? 30_000, pass });
}
