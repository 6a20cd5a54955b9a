import crypto from 'node:crypto';
import { ApplicationFailure, WorkflowFailedError, WorkflowIdConflictPolicy, WorkflowNotFoundError } from '@temporalio/client';
import { TENANT_OPERATION_FAILED, tenantBootstrap, tenantTeardown, tenantVerifyWorkflow, type TenantWorkflowInput, type TenantWorkflowResult } from '../../workflows/tenants';
import type { Config } from '../config';
import { isPgError, PG_UNIQUE_VIOLATION } from '../db/errors';
import type { Db } from '../db/knex';
import { ApiError, conflict, invalidParams, notFoundItem, temporalUnavailable as temporalUnavailableError } from '../http/errors';
import type { Logger } from '../logger';
import type { TemporalGateway } from '../temporal/gateway';
import { SA_SITE_ID } from '../temporal/search-attributes';
import { enqueueStart, startPending, WorkflowStarts, type OutboxStart } from '../temporal/starts';
import { tenantHosts } from './hosts';
import { liveTenant, tenantStatus, type TenantRow, type TenantState, type TenantStatus } from './store';

export const TENANT_WORKFLOWS = { bootstrap: tenantBootstrap, verify: tenantVerifyWorkflow, teardown: tenantTeardown } as const;
const SUMMARY = { bootstrap: 'Tenant bootstrap', verify: 'Tenant verification', teardown: 'Tenant teardown' } as const;
type Operation = keyof typeof TENANT_WORKFLOWS;

/** What a route answers: the status (with a message) or, after a teardown, the deletion; `poll` adds Location and Retry-After. */
export interface TenantOutcome {
  status: 200 | 202;
  body: (TenantStatus & { message: string }) | { site_id: number; deleted: true; state: 'torn_down'; message: string };
  poll: boolean;
}

function temporalUnavailable(detail?: string): ApiError {
  return temporalUnavailableError('Tenant operations cannot be started right now', detail, 'Nothing was changed.');
}

const notATenant = (siteId: number) =>
  new ApiError(404, 'wu_rest_tenant_not_found', `Site ${siteId} is not an isolated tenant. Isolate it with POST /tenants/${siteId}/bootstrap.`);

const busy = (tenant: TenantRow, doing: string) =>
  conflict(
    'wu_rest_tenant_busy',
    `Site ${tenant.site_id} cannot ${doing} now: ${tenant.state === 'bootstrapping' ? 'bootstrap' : tenant.state === 'verifying' ? 'verification' : 'teardown'} is running (workflow ${tenant.workflow_id}). Wait for it to finish; migration-status shows its progress.`,
    { state: tenant.state, workflow_id: tenant.workflow_id },
  );

/**
 * The tenant operations behind the routes. The registry row is the lock: a state change
 * is one conditional UPDATE, so two callers never start two operations for one site.
 * The workflows do the work; these methods start or join them and wait briefly.
 */
export class TenantService {
  constructor(
    private readonly db: Db,
    private readonly temporal: TemporalGateway,
    private readonly config: Config,
  ) {}

  private async siteExists(siteId: number): Promise<void> {
    if (!(await this.db('sites').where({ id: siteId }).first('id'))) throw notFoundItem('site');
  }

  async status(siteId: number): Promise<TenantStatus> {
    const tenant = await liveTenant(this.db, siteId);
    if (!tenant) {
      await this.siteExists(siteId);
      throw notATenant(siteId);
    }
    return tenantStatus(tenant);
  }

  /** The outbox entry of an operation's workflow (its id is the one stored on the row). */
  private startOf(op: Operation, tenant: Pick<TenantRow, 'id' | 'site_id' | 'uid'>, workflowId: string): OutboxStart<(typeof TENANT_WORKFLOWS)[Operation]> {
    const input: TenantWorkflowInput = { tenantId: Number(tenant.id), siteId: Number(tenant.site_id) };
    return {
      workflow: TENANT_WORKFLOWS[op],
      workflowId,
      args: [input],
      // A running one is joined; a finished one with this id is run again.
      conflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      memo: { site_id: Number(tenant.site_id), tenant_uid: tenant.uid },
      searchAttributes: [{ key: SA_SITE_ID, value: Number(tenant.site_id) }],
      summary: `${SUMMARY[op]}, site ${tenant.site_id}`,
    };
  }

  /**
   * Moves the entry from one of `from` to `to`, with a new workflow id and its start written in
   * the same transaction (the outbox); null when it was not in `from`.
   */
  private async transition(tenant: TenantRow, from: TenantState[], to: TenantState, op: Operation, extra: Partial<TenantRow> = {}): Promise<{ row: TenantRow; startId: number } | null> {
    const workflowId = await this.temporal.ids.build(`tenant-${op}`, tenant.uid);
    return this.db.transaction(async (trx) => {
      const [row] = await trx('tenants')
        .where({ id: tenant.id })
        .whereIn('state', from)
        .update({ state: to, workflow_id: workflowId, error: null, step: null, date_modified: trx.fn.now(), ...extra })
        .returning('*');
      if (!row) return null;
      return { row: row as TenantRow, startId: await enqueueStart(trx, this.startOf(op, row as TenantRow, workflowId)) };
    });
  }

  /** Starts the written entry now (the fast path); one not started here is left to the start relay. True: started here. */
  private async startNow(startId: number, log: Logger): Promise<boolean> {
    const [outcome] = await new WorkflowStarts(this.db, this.temporal).startNow([startId], temporalUnavailable);
    if (outcome instanceof Error) log.warn({ err: outcome }, 'tenant workflow not started yet; the start relay tries again');
    return outcome === 'started';
  }

  /**
   * Joins the operation already recorded on the row (its stored workflow id; a start lost
   * before the outbox existed is made again). Nothing is written, so nothing waits in the
   * outbox: Temporal unreachable is the 503. A start still waiting in the outbox is left to it.
   */
  private async join(op: Operation, tenant: TenantRow, log: Logger): Promise<boolean> {
    if (await startPending(this.db, tenant.workflow_id!)) return false;
    try {
      await this.temporal.start(TENANT_WORKFLOWS[op], this.startOf(op, tenant, tenant.workflow_id!), temporalUnavailable);
      return true;
    } catch (err) {
      log.warn({ err }, 'tenant workflow start failed');
      throw err;
    }
  }

  /**
   * Waits up to TENANT_WAIT_SECONDS for the workflow; null when it is still running, or when
   * its start waits in the outbox (`started` false: the id's last run may be an earlier one). A
   * run that failed after recording its outcome (TenantOperationFailed) answers that outcome, as
   * a run of older code that completed with it does; any other failure is the 500.
   */
  private async wait(op: Operation, tenant: TenantRow, started: boolean): Promise<TenantWorkflowResult | null> {
    const waitMs = this.config.TENANT_WAIT_SECONDS * 1000;
    if (waitMs <= 0 || !started) return null;
    try {
      return await this.temporal.result<(typeof TENANT_WORKFLOWS)[typeof op]>(tenant.workflow_id!, waitMs, temporalUnavailable);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return null; // its start waits in the outbox
      if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure && err.cause.type === TENANT_OPERATION_FAILED && err.cause.details?.[0]) {
        return err.cause.details[0] as TenantWorkflowResult;
      }
      if (err instanceof WorkflowFailedError) throw new ApiError(500, 'wu_rest_tenant_workflow_failed', `The tenant ${op} workflow failed: ${err.cause?.message ?? err.message}`);
      throw err;
    }
  }

  private async fresh(id: number): Promise<TenantRow> {
    return (await this.db('tenants').where({ id }).first()) as TenantRow;
  }

  private validateHost(requested: string | undefined): void {
    if (requested === undefined) return;
    const names = tenantHosts(this.config, this.db).map((h) => h.name);
    if (!names.includes(requested)) throw invalidParams({ database_host: `database_host must be one of: ${names.join(', ')}.` });
  }

  /** POST /tenants/{site_id}/bootstrap */
  async bootstrap(siteId: number, requestedHost: string | undefined, log: Logger): Promise<TenantOutcome> {
    await this.siteExists(siteId);
    this.validateHost(requestedHost);
    this.temporal.check(temporalUnavailable);
    for (let attempt = 0; attempt < 3; attempt++) {
      const tenant = await liveTenant(this.db, siteId);
      if (!tenant) {
        const uid = crypto.randomUUID();
        const workflowId = await this.temporal.ids.build('tenant-bootstrap', uid);
        let created: { row: TenantRow; startId: number };
        try {
          created = await this.db.transaction(async (trx) => {
            const [row] = await trx('tenants').insert({ uid, site_id: siteId, requested_host: requestedHost ?? null, state: 'bootstrapping', workflow_id: workflowId }).returning('*');
            return { row: row as TenantRow, startId: await enqueueStart(trx, this.startOf('bootstrap', row as TenantRow, workflowId)) };
          });
        } catch (err) {
          if (isPgError(err, PG_UNIQUE_VIOLATION)) continue; // another caller claimed the site first: join it
          throw err;
        }
        await this.startNow(created.startId, log);
        return this.accepted(created.row, 'Bootstrap started: poll migration-status (status_url).');
      }
      const boundHost = tenant.database_host ?? tenant.requested_host;
      if (requestedHost && boundHost && requestedHost !== boundHost) {
        throw conflict('wu_rest_tenant_host_bound', `Site ${siteId} is bound to database host ${boundHost}; tear the tenant down to place it on ${requestedHost}.`, { database_host: boundHost });
      }
      switch (tenant.state) {
        case 'ready':
          return { status: 200, poll: false, body: { ...tenantStatus(tenant), message: `Site ${siteId} is already isolated and verified; nothing was done.` } };
        case 'bootstrapping':
          await this.join('bootstrap', tenant, log);
          return this.accepted(tenant, 'Bootstrap is already running; joined it.');
        case 'verifying':
        case 'tearing_down':
          throw busy(tenant, 'bootstrap');
        case 'failed':
        case 'not_ready': {
          const moved = await this.transition(tenant, ['failed', 'not_ready'], 'bootstrapping', 'bootstrap', requestedHost && !tenant.database_host ? { requested_host: requestedHost } : {});
          if (!moved) continue;
          await this.startNow(moved.startId, log);
          return this.accepted(moved.row, 'Bootstrap started again: finished steps are skipped, the rest is redone.');
        }
        default:
          break;
      }
    }
    throw conflict('wu_rest_tenant_busy', `Site ${siteId} changed state while this request ran; try again.`);
  }

  /**
   * The live entry of the site, moved into `to` with a new workflow started, or joined when
   * it is already in `to`. Refused (409) while the other operations run.
   */
  private async startOrJoin(siteId: number, op: 'verify' | 'teardown', to: TenantState, log: Logger): Promise<{ tenant: TenantRow; started: boolean }> {
    this.temporal.check(temporalUnavailable);
    for (;;) {
      const tenant = await liveTenant(this.db, siteId);
      if (!tenant) {
        await this.siteExists(siteId);
        throw notATenant(siteId);
      }
      if (tenant.state === to) return { tenant, started: await this.join(op, tenant, log) };
      if (tenant.state === 'bootstrapping' || tenant.state === 'verifying' || tenant.state === 'tearing_down') throw busy(tenant, op === 'verify' ? 'be verified' : 'be torn down');
      if (op === 'teardown') {
        const inFlight = await this.db('tenant_push_jobs').where({ tenant_id: tenant.id, status: 'running' }).first('id');
        if (inFlight) throw conflict('wu_rest_tenant_busy', `Site ${siteId} cannot be torn down now: push job ${inFlight.id} is running.`, { state: tenant.state });
      }
      const moved = await this.transition(tenant, ['ready', 'not_ready', 'failed'], to, op);
      if (!moved) continue; // changed meanwhile: look again
      return { tenant: moved.row, started: await this.startNow(moved.startId, log) };
    }
  }

  /** POST /tenants/{site_id}/verify */
  async verify(siteId: number, log: Logger): Promise<TenantOutcome> {
    const { tenant, started } = await this.startOrJoin(siteId, 'verify', 'verifying', log);
    const result = await this.wait('verify', tenant, started);
    const now = await this.fresh(tenant.id);
    if (!result) return this.accepted(now, 'Verification is running: poll migration-status (status_url).');
    return { status: 200, poll: false, body: { ...tenantStatus(now), message: now.state === 'ready' ? 'Verification passed: the tenant is ready.' : 'Verification failed: see checks for what to fix, then verify again.' } };
  }

  /** DELETE /tenants/{site_id} */
  async teardown(siteId: number, log: Logger): Promise<TenantOutcome> {
    const { tenant, started } = await this.startOrJoin(siteId, 'teardown', 'tearing_down', log);
    const result = await this.wait('teardown', tenant, started);
    if (!result) return this.accepted(await this.fresh(tenant.id), 'Teardown is running: poll migration-status (status_url) until it answers 404.');
    if (result.state !== 'torn_down') {
      throw new ApiError(503, 'wu_rest_tenant_teardown_incomplete', `Teardown stopped at step ${result.step}: ${result.error}. Fix the cause and send DELETE again; finished steps are skipped.`, {
        step: result.step ?? null,
      });
    }
    return { status: 200, poll: false, body: { site_id: siteId, deleted: true, state: 'torn_down', message: 'The tenant database, role, files and route are gone; its data is back in the shared tables.' } };
  }

  private accepted(tenant: TenantRow, message: string): TenantOutcome {
    return { status: 202, poll: true, body: { ...tenantStatus(tenant), message } };
  }
}
