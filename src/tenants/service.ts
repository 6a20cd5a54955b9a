import crypto from 'node:crypto';
import { ApplicationFailure, WorkflowFailedError, WorkflowIdConflictPolicy } from '@temporalio/client';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { isPgError, PG_UNIQUE_VIOLATION } from '../db/errors';
import { ApiError, conflict, invalidParams, notFoundItem } from '../http/errors';
import type { Logger } from '../logger';
import { temporalUnavailable as temporalUnavailableError } from '../temporal/client';
import type { TemporalGateway } from '../temporal/gateway';
import { TENANT_OPERATION_FAILED, tenantBootstrap, tenantTeardown, tenantVerifyWorkflow, type TenantWorkflowInput, type TenantWorkflowResult } from '../../workflows/tenants';
import { SA_SITE_ID } from '../../workflows/search-attributes';
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

function workflowId(op: Operation, t: Pick<TenantRow, 'uid'>): string {
  return `tenant-${op}-${t.uid}`;
}

function temporalUnavailable(detail?: string): ApiError {
  return temporalUnavailableError('Tenant operations cannot be started right now', detail, 'Nothing was changed.');
}

const notATenant = (siteId: number) =>
  new ApiError(404, 'wu_rest_tenant_not_found', `Site ${siteId} is not an isolated tenant. Isolate it with POST /tenants/${siteId}/bootstrap.`);

const busy = (t: TenantRow, doing: string) =>
  conflict(
    'wu_rest_tenant_busy',
    `Site ${t.site_id} cannot ${doing} now: ${t.state === 'bootstrapping' ? 'bootstrap' : t.state === 'verifying' ? 'verification' : 'teardown'} is running (workflow ${t.workflow_id}). Wait for it to finish; migration-status shows its progress.`,
    { state: t.state, workflow_id: t.workflow_id },
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
    const t = await liveTenant(this.db, siteId);
    if (!t) {
      await this.siteExists(siteId);
      throw notATenant(siteId);
    }
    return tenantStatus(t);
  }

  /** Moves the entry from one of `from` to `to` (with a new workflow id); null when it was not in `from`. */
  private async transition(t: TenantRow, from: TenantState[], to: TenantState, op: Operation): Promise<TenantRow | null> {
    const [row] = await this.db('tenants')
      .where({ id: t.id })
      .whereIn('state', from)
      .update({ state: to, workflow_id: workflowId(op, t), error: null, step: null, date_modified: this.db.fn.now() })
      .returning('*');
    return (row as TenantRow) ?? null;
  }

  private async start(op: Operation, t: TenantRow, log: Logger): Promise<void> {
    const input: TenantWorkflowInput = { tenantId: Number(t.id), siteId: Number(t.site_id) };
    try {
      await this.temporal.start(
        TENANT_WORKFLOWS[op],
        {
          workflowId: workflowId(op, t),
          args: [input],
          // A running one is joined; a finished one with this id is run again.
          conflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
          memo: { site_id: Number(t.site_id), tenant_uid: t.uid },
          searchAttributes: [{ key: SA_SITE_ID, value: Number(t.site_id) }],
          summary: `${SUMMARY[op]}, site ${t.site_id}`,
        },
        temporalUnavailable,
      );
    } catch (err) {
      log.warn({ err }, 'tenant workflow start failed');
      throw err;
    }
  }

  /**
   * Waits up to TENANT_WAIT_SECONDS for the workflow; null when it is still running. A run that
   * failed after recording its outcome (TenantOperationFailed) answers that outcome, as a run of
   * older code that completed with it does; any other failure is the 500.
   */
  private async wait(op: Operation, t: TenantRow): Promise<TenantWorkflowResult | null> {
    const waitMs = this.config.TENANT_WAIT_SECONDS * 1000;
    if (waitMs <= 0) return null;
    try {
      return await this.temporal.result<(typeof TENANT_WORKFLOWS)[typeof op]>(workflowId(op, t), waitMs, temporalUnavailable);
    } catch (err) {
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
    for (let attempt = 0; attempt < 3; attempt++) {
      const t = await liveTenant(this.db, siteId);
      if (!t) {
        const uid = crypto.randomUUID();
        let created: TenantRow;
        try {
          [created] = await this.db('tenants')
            .insert({ uid, site_id: siteId, requested_host: requestedHost ?? null, state: 'bootstrapping', workflow_id: workflowId('bootstrap', { uid }) })
            .returning('*');
        } catch (err) {
          if (isPgError(err, PG_UNIQUE_VIOLATION)) continue; // another caller claimed the site first: join it
          throw err;
        }
        try {
          await this.start('bootstrap', created, log);
        } catch (err) {
          await this.db('tenants').where({ id: created.id, state: 'bootstrapping' }).delete();
          throw err;
        }
        return this.accepted(created, 'Bootstrap started: poll migration-status (status_url).');
      }
      const bound = t.database_host ?? t.requested_host;
      if (requestedHost && bound && requestedHost !== bound) {
        throw conflict('wu_rest_tenant_host_bound', `Site ${siteId} is bound to database host ${bound}; tear the tenant down to place it on ${requestedHost}.`, { database_host: bound });
      }
      switch (t.state) {
        case 'ready':
          return { status: 200, poll: false, body: { ...tenantStatus(t), message: `Site ${siteId} is already isolated and verified; nothing was done.` } };
        case 'bootstrapping':
          await this.start('bootstrap', t, log); // joins the running workflow (or restarts a lost start)
          return this.accepted(t, 'Bootstrap is already running; joined it.');
        case 'verifying':
        case 'tearing_down':
          throw busy(t, 'bootstrap');
        case 'failed':
        case 'not_ready': {
          const moved = await this.transition(t, ['failed', 'not_ready'], 'bootstrapping', 'bootstrap');
          if (!moved) continue;
          if (requestedHost && !moved.database_host) await this.db('tenants').where({ id: t.id }).update({ requested_host: requestedHost });
          try {
            await this.start('bootstrap', moved, log);
          } catch (err) {
            await this.db('tenants').where({ id: t.id, state: 'bootstrapping' }).update({ state: t.state, error: t.error === null ? null : JSON.stringify(t.error) });
            throw err;
          }
          return this.accepted(moved, 'Bootstrap started again: finished steps are skipped, the rest is redone.');
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
  private async startOrJoin(siteId: number, op: 'verify' | 'teardown', to: TenantState, log: Logger): Promise<TenantRow> {
    for (;;) {
      const t = await liveTenant(this.db, siteId);
      if (!t) {
        await this.siteExists(siteId);
        throw notATenant(siteId);
      }
      if (t.state === to) {
        await this.start(op, t, log);
        return t;
      }
      if (t.state === 'bootstrapping' || t.state === 'verifying' || t.state === 'tearing_down') throw busy(t, op === 'verify' ? 'be verified' : 'be torn down');
      if (op === 'teardown') {
        const inFlight = await this.db('tenant_push_jobs').where({ tenant_id: t.id, status: 'running' }).first('id');
        if (inFlight) throw conflict('wu_rest_tenant_busy', `Site ${siteId} cannot be torn down now: push job ${inFlight.id} is running.`, { state: t.state });
      }
      const moved = await this.transition(t, ['ready', 'not_ready', 'failed'], to, op);
      if (!moved) continue; // changed meanwhile: look again
      try {
        await this.start(op, moved, log);
      } catch (err) {
        await this.db('tenants').where({ id: t.id, state: to }).update({ state: t.state });
        throw err;
      }
      return moved;
    }
  }

  /** POST /tenants/{site_id}/verify */
  async verify(siteId: number, log: Logger): Promise<TenantOutcome> {
    const t = await this.startOrJoin(siteId, 'verify', 'verifying', log);
    const result = await this.wait('verify', t);
    const now = await this.fresh(t.id);
    if (!result) return this.accepted(now, 'Verification is running: poll migration-status (status_url).');
    return { status: 200, poll: false, body: { ...tenantStatus(now), message: now.state === 'ready' ? 'Verification passed: the tenant is ready.' : 'Verification failed: see checks for what to fix, then verify again.' } };
  }

  /** DELETE /tenants/{site_id} */
  async teardown(siteId: number, log: Logger): Promise<TenantOutcome> {
    const t = await this.startOrJoin(siteId, 'teardown', 'tearing_down', log);
    const result = await this.wait('teardown', t);
    if (!result) return this.accepted(await this.fresh(t.id), 'Teardown is running: poll migration-status (status_url) until it answers 404.');
    if (result.state !== 'torn_down') {
      throw new ApiError(503, 'wu_rest_tenant_teardown_incomplete', `Teardown stopped at step ${result.step}: ${result.error}. Fix the cause and send DELETE again; finished steps are skipped.`, {
        step: result.step ?? null,
      });
    }
    return { status: 200, poll: false, body: { site_id: siteId, deleted: true, state: 'torn_down', message: 'The tenant database, role, files and route are gone; its data is back in the shared tables.' } };
  }

  private accepted(t: TenantRow, message: string): TenantOutcome {
    return { status: 202, poll: true, body: { ...tenantStatus(t), message } };
  }
}
