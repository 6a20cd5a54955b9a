import { WorkflowIdConflictPolicy, WorkflowNotFoundError } from '@temporalio/client';
import type { Knex } from 'knex';
import { membershipChangedSignal, membershipLifecycle } from '../../workflows/membershipLifecycle';
import type { Config } from '../config';
import { DomainError } from '../db/domain-error';
import type { Db } from '../db/knex';
import { relayLoop, type RelayLoop } from '../db/listen';
import type { Row } from '../db/table-service';
import { logger } from '../logger';
import type { TemporalGateway } from '../temporal/gateway';
import { SA_CUSTOMER_ID } from '../temporal/search-attributes';
import { enqueueStart, WorkflowStarts } from '../temporal/starts';
import type { WorkflowIds } from '../temporal/workflow-ids';

/** The statuses in which a recurring membership with a due date has a running lifecycle. */
const LIVE = new Set(['active', 'trialing']);

/**
 * The fields the lifecycle reads (README "Billing: renewals"): a change to any of them wakes
 * a waiting lifecycle (the membershipChanged signal), which reads the row again.
 */
export const BILLING_FIELDS = [
  'status',
  'recurring',
  'auto_renew',
  'date_expiration',
  'date_trial_end',
  'plan_id',
  'addon_products',
  'amount',
  'duration',
  'duration_unit',
  'billing_cycles',
  'times_billed',
  'gateway',
] as const;

/** When the membership is next billed: the trial's end while trialing, else its expiration; null: never. */
export function dueDateOf(m: Row): Date | null {
  const v = m.status === 'trialing' ? m.date_trial_end : m.date_expiration;
  return v == null ? null : new Date(v);
}

/** Whether the membership should have a running lifecycle workflow: recurring, active or trialing, with a due date. */
export function wantsLifecycle(m: Row): boolean {
  return Boolean(m.recurring) && LIVE.has(m.status) && dueDateOf(m) !== null;
}

const same = (a: unknown, b: unknown) => {
  if (a instanceof Date || b instanceof Date) return (a == null ? null : new Date(a as string).getTime()) === (b == null ? null : new Date(b as string).getTime());
  if (typeof a === 'object' && a !== null) return JSON.stringify(a) === JSON.stringify(b);
  return String(a) === String(b);
};

/** Whether a write changed what the lifecycle reads. */
export function billingChanged(before: Row | null, after: Row): boolean {
  return before === null || BILLING_FIELDS.some((f) => !same(before[f], after[f]));
}

/** Whether the membership's lifecycle was started (or joined): it has a workflow id and no start waiting for the horizon. */
function started(m: Row): boolean {
  return m.workflow_id != null && m.lifecycle_deferred_due == null;
}

/** Whether a write makes the membership start (or join) its lifecycle: it now wants one and did not before, or never had one started. */
function startsLifecycle(before: Row | null, after: Row): boolean {
  return wantsLifecycle(after) && (before === null || !wantsLifecycle(before) || !started(before));
}

/** What runs after a membership write's commit: the start's fast path (a workflow id), the signal (a workflow id). */
export interface LifecycleEffect {
  start: string | null;
  signal: string | null;
}

const signalUnavailable = (detail?: string) => new DomainError('unavailable', 'temporal_unavailable', `membership lifecycle: ${detail ?? 'Temporal unreachable'}`);

/** How far ahead of its due date a membership's lifecycle is started, from the configuration. */
export function lifecycleHorizonMs(config: Pick<Config, 'BILLING_LIFECYCLE_HORIZON_HOURS'>): number {
  return Math.round(config.BILLING_LIFECYCLE_HORIZON_HOURS * 3_600_000);
}

/** Deferred starts made per transaction by the sweep. */
const SWEEP_BATCH = 500;

/**
 * The rule that gives every recurring membership its lifecycle workflow (membershipLifecycle,
 * workflow id `<prefix>-membership-<id>`, kept on the row): asked by every write of a
 * membership (the API, /register, refunds, payment completion, the lifecycle's own steps),
 * inside its transaction.
 * - A membership that becomes active or trialing with a due date gets the workflow's start in
 *   the start outbox, in the same transaction (USE_EXISTING: a running lifecycle is joined),
 *   when that date is within the horizon (BILLING_LIFECYCLE_HORIZON_HOURS). Further out, the
 *   row keeps the date in `lifecycle_deferred_due` and the sweep (`startDeferred`, beside every
 *   worker) starts it once the date comes within the horizon: a bulk import of 100,000
 *   memberships starts the few coming due, not 100,000 workflows at once.
 * - A membership whose billing fields changed while a lifecycle may be waiting is signalled
 *   after the commit (membershipChanged), fire and forget: the workflow reads the row again
 *   when it wakes, so a lost signal only means it wakes at the due date it knew and finds the
 *   date moved (it sleeps again) or the membership finished (it ends).
 */
export class MembershipLifecycles {
  private readonly starts: WorkflowStarts | null;

  constructor(
    private readonly ids: WorkflowIds,
    /** Null where no signal is sent (the worker: its writes are the workflow's own steps, or new memberships). */
    private readonly temporal: TemporalGateway | null,
    db?: Db,
    /** How far ahead of its due date a lifecycle is started (ms; by default always at once). */
    private readonly horizonMs = Infinity,
  ) {
    this.starts = temporal && db ? new WorkflowStarts(db, temporal) : null;
  }

  /** A membership's lifecycle workflow id: the one on its row, else a new one. */
  async workflowIdOf(m: Row): Promise<string> {
    return (m.workflow_id as string | null) ?? this.ids.build('membership', Number(m.id));
  }

  /**
   * In the write's transaction, after the row is written: enqueues the start when the
   * membership now wants a lifecycle and did not before (or never had one): the row gets its
   * workflow_id. Returns the row as it is now.
   */
  async changed(trx: Knex.Transaction, before: Row | null, after: Row): Promise<Row> {
    if (!billingChanged(before, after)) return after;
    if (!startsLifecycle(before, after)) {
      // No longer wanting a lifecycle: a start still waiting for the horizon is dropped.
      if (after.lifecycle_deferred_due != null && !wantsLifecycle(after)) return this.setRow(trx, after, { lifecycle_deferred_due: null });
      return after;
    }
    const due = dueDateOf(after)!;
    if (due.getTime() - Date.now() > this.horizonMs) {
      const known = after.lifecycle_deferred_due == null ? null : new Date(after.lifecycle_deferred_due).getTime();
      return known === due.getTime() ? after : this.setRow(trx, after, { lifecycle_deferred_due: due });
    }
    return this.start(trx, after);
  }

  /** Writes `cols` on the membership's row (in the transaction); answers the row as it is now. */
  private async setRow(trx: Knex.Transaction, m: Row, cols: Row): Promise<Row> {
    const [row] = await trx('memberships').where({ id: m.id }).update(cols).returning('*');
    return row;
  }

  /** Puts the lifecycle's start in the outbox (the row gets its workflow id; no start left waiting for the horizon). */
  private async start(trx: Knex.Transaction, after: Row, graceMs?: number): Promise<Row> {
    const workflowId = await this.workflowIdOf(after);
    let row = after;
    if (after.workflow_id !== workflowId || after.lifecycle_deferred_due != null) row = await this.setRow(trx, after, { workflow_id: workflowId, lifecycle_deferred_due: null });
    await enqueueStart(trx, {
      workflow: membershipLifecycle,
      workflowId,
      args: [{ membershipId: Number(after.id) }],
      conflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      memo: { membership_id: Number(after.id), customer_id: Number(after.customer_id) },
      searchAttributes: after.customer_id ? [{ key: SA_CUSTOMER_ID, value: Number(after.customer_id) }] : [],
      summary: `Lifecycle of membership ${after.id} (customer ${after.customer_id})`,
    }, graceMs === undefined ? {} : { graceMs });
    return row;
  }

  /**
   * The sweep's pass: the lifecycles waiting for the horizon whose due date is now within it
   * are started (their starts put in the outbox for the relay, in batches of SWEEP_BATCH rows
   * locked with SKIP LOCKED, so N workers sweeping at once share the rows). A row that no
   * longer wants a lifecycle loses its deferral. Answers how many starts it enqueued.
   */
  async startDeferred(db: Db, batch = SWEEP_BATCH): Promise<number> {
    if (!Number.isFinite(this.horizonMs)) return 0;
    let total = 0;
    for (;;) {
      const n = await db.transaction(async (trx) => {
        const rows: Row[] = await trx('memberships')
          .whereNotNull('lifecycle_deferred_due')
          .where('lifecycle_deferred_due', '<=', new Date(Date.now() + this.horizonMs))
          .orderBy('lifecycle_deferred_due')
          .limit(batch)
          .forUpdate()
          .skipLocked();
        let started = 0;
        for (const m of rows) {
          if (wantsLifecycle(m)) {
            // No request waits to start it: the relay takes it at once.
            await this.start(trx, m, 0);
            started++;
          } else await this.setRow(trx, m, { lifecycle_deferred_due: null });
        }
        total += started;
        return rows.length;
      });
      if (n < batch) return total;
    }
  }

  /**
   * What to do after the commit of a write from `before` to `after` (`after` as changed() left
   * it): the start's fast path, and the signal to a run that may be waiting (one was started
   * before this write).
   */
  effectOf(before: Row | null, after: Row): LifecycleEffect {
    if (!billingChanged(before, after)) return { start: null, signal: null };
    return {
      start: startsLifecycle(before, after) && after.lifecycle_deferred_due == null ? ((after.workflow_id as string | null) ?? null) : null,
      signal: before?.workflow_id != null ? (before.workflow_id as string) : null,
    };
  }

  /** After the commit: the fast path of an enqueued start (what fails is left to the start relay), then the signal. */
  async afterCommit(effect: LifecycleEffect): Promise<void> {
    if (effect.start && this.starts) {
      for (const out of await this.starts.startPendingOf(effect.start, signalUnavailable)) {
        if (out instanceof Error) logger.warn({ err: out.message, workflowId: effect.start }, 'membership lifecycle not started yet; the start relay tries again');
      }
    }
    if (effect.signal) await this.signal(effect.signal);
  }

  /** membershipChanged, fire and forget (logged on failure): the workflow re-reads the row when it wakes anyway. */
  async signal(workflowId: string): Promise<void> {
    if (!this.temporal?.configured) return;
    try {
      await this.temporal.signal(workflowId, membershipChangedSignal, [], signalUnavailable);
    } catch (err) {
      // No run (it ended: the membership finished; or its start is still in the outbox): nothing to wake.
      if (err instanceof WorkflowNotFoundError) return;
      logger.warn({ err: (err as Error).message, workflowId }, 'membership lifecycle not signalled; it reads the membership again at its due date');
    }
  }
}

/**
 * The sweep of lifecycle starts deferred to the horizon, beside every worker (runtime's
 * startRelays): a pass at start and every `intervalMs` (1 minute; the horizon is hours, so a
 * pass late by one interval changes nothing). With N workers the passes overlap harmlessly:
 * SKIP LOCKED hands each row to one of them, and a started row is no longer deferred.
 */
export function startLifecycleSweep(db: Db, lifecycles: MembershipLifecycles, intervalMs = 60_000): RelayLoop<number> {
  const loop = relayLoop({ db, name: 'lifecycle-sweep', channels: [], intervalMs, pass: async () => [await lifecycles.startDeferred(db)] });
  loop.wake();
  return loop;
}
