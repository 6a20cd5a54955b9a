import { WorkflowIdConflictPolicy, WorkflowNotFoundError } from '@temporalio/client';
import type { Knex } from 'knex';
import { membershipChangedSignal, membershipLifecycle } from '../../workflows/membershipLifecycle';
import { DomainError } from '../db/domain-error';
import type { Db } from '../db/knex';
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

/** Whether a write makes the membership start (or join) its lifecycle: it now wants one and did not before, or never had one. */
function startsLifecycle(before: Row | null, after: Row): boolean {
  return wantsLifecycle(after) && (before === null || !wantsLifecycle(before) || before.workflow_id == null);
}

/** What runs after a membership write's commit: the start's fast path (a workflow id), the signal (a workflow id). */
export interface LifecycleEffect {
  start: string | null;
  signal: string | null;
}

const signalUnavailable = (detail?: string) => new DomainError('unavailable', 'temporal_unavailable', `membership lifecycle: ${detail ?? 'Temporal unreachable'}`);

/**
 * The rule that gives every recurring membership its lifecycle workflow (membershipLifecycle,
 * workflow id `<prefix>-membership-<id>`, kept on the row): asked by every write of a
 * membership (the API, /register, refunds, payment completion, the lifecycle's own steps),
 * inside its transaction.
 * - A membership that becomes active or trialing with a due date gets the workflow's start in
 *   the start outbox, in the same transaction (USE_EXISTING: a running lifecycle is joined).
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
    if (!billingChanged(before, after) || !startsLifecycle(before, after)) return after;
    const workflowId = await this.workflowIdOf(after);
    let row = after;
    if (after.workflow_id !== workflowId) [row] = await trx('memberships').where({ id: after.id }).update({ workflow_id: workflowId }).returning('*');
    await enqueueStart(trx, {
      workflow: membershipLifecycle,
      workflowId,
      args: [{ membershipId: Number(after.id) }],
      conflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      memo: { membership_id: Number(after.id), customer_id: Number(after.customer_id) },
      searchAttributes: after.customer_id ? [{ key: SA_CUSTOMER_ID, value: Number(after.customer_id) }] : [],
      summary: `Lifecycle of membership ${after.id} (customer ${after.customer_id})`,
    });
    return row;
  }

  /**
   * What to do after the commit of a write from `before` to `after` (`after` as changed() left
   * it): the start's fast path, and the signal to a run that may be waiting (one was started
   * before this write).
   */
  effectOf(before: Row | null, after: Row): LifecycleEffect {
    if (!billingChanged(before, after)) return { start: null, signal: null };
    return {
      start: startsLifecycle(before, after) ? ((after.workflow_id as string | null) ?? null) : null,
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
