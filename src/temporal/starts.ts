import { WorkflowIdConflictPolicy, WorkflowNotFoundError, type WorkflowIdReusePolicy } from '@temporalio/client';
import type { SearchAttributePair, Workflow } from '@temporalio/common';
import type { Knex } from 'knex';
import { DomainError } from '../db/domain-error';
import type { Db } from '../db/knex';
import { relayLoop, type RelayLoop } from '../db/listen';
import { logger } from '../logger';
import type { StartOptions, TemporalGateway, Unavailable } from './gateway';

/** Notified (by a trigger of migration 20261203000010) when a start is written. */
export const WORKFLOW_STARTS_CHANNEL = 'hostflow_workflow_starts';
/** How long a freshly written start is left to the fast path of the request that wrote it, before a relay takes it. */
export const FAST_PATH_GRACE_MS = 5000;
/** Backoff between tries of one start: 1 s, doubling, at most 5 minutes. */
const BACKOFF = { firstMs: 1000, maxMs: 300_000 };
/** Started entries are kept this long (what was started when, for operators), then deleted by the relays. */
const KEEP_STARTED_DAYS = 7;
/** The memo field naming the outbox entry a run was started from (how a retry tells its own earlier start). */
export const START_ID_MEMO = 'outbox_start_id';

/** What one start needs: the gateway's StartOptions, with the workflow's type. */
export interface OutboxStart<T extends Workflow = Workflow> extends StartOptions<T> {
  /** The workflow function (its name is the type). */
  workflow: T;
}

interface StartRow {
  id: number;
  workflow_type: string;
  workflow_id: string;
  args: unknown[];
  summary: string;
  search_attributes: SearchAttributePair[];
  options: { conflict_policy?: WorkflowIdConflictPolicy; reuse_policy?: WorkflowIdReusePolicy; memo?: Record<string, unknown> };
  attempts: number;
  started_at: Date | null;
}

/**
 * Writes a start into the outbox, inside the caller's transaction (the one writing the row the
 * workflow belongs to). Returns its id, for the fast path (WorkflowStarts.startNow) after
 * commit. Args and memo are stored as JSON: never put a secret in them (nor in workflow args).
 */
export async function enqueueStart<T extends Workflow>(trx: Knex | Knex.Transaction, s: OutboxStart<T>, opts: { graceMs?: number } = {}): Promise<number> {
  const graceMs = opts.graceMs ?? FAST_PATH_GRACE_MS;
  const [row] = await trx('workflow_starts')
    .insert({
      workflow_type: s.workflow.name,
      workflow_id: s.workflowId,
      args: JSON.stringify(s.args),
      summary: s.summary,
      // Keys are plain { name, type } objects: they survive JSON (values here are ints and keywords).
      search_attributes: JSON.stringify(s.searchAttributes ?? []),
      options: JSON.stringify({
        conflict_policy: s.conflictPolicy ?? WorkflowIdConflictPolicy.USE_EXISTING,
        ...(s.reusePolicy ? { reuse_policy: s.reusePolicy } : {}),
        ...(s.memo ? { memo: s.memo } : {}),
      }),
      next_attempt_at: trx.raw(`now() + make_interval(secs => ?)`, [graceMs / 1000]),
    })
    .returning('id');
  return Number(row.id);
}

/** Whether a start of `workflowId` waits in the outbox (written, not yet started). */
export async function startPending(db: Db, workflowId: string): Promise<boolean> {
  return !!(await db('workflow_starts').where({ workflow_id: workflowId }).whereNull('started_at').first('id'));
}

/** Drops the starts of `workflowId` still waiting (its row left the state that needed the workflow), in the caller's transaction. */
export async function cancelPendingStarts(trx: Knex | Knex.Transaction, workflowId: string): Promise<number> {
  return trx('workflow_starts').where({ workflow_id: workflowId }).whereNull('started_at').delete();
}

/**
 * An error as last_error keeps it: the message, and what Temporal said behind a 503 (the
 * `detail` of the caller's error: a DomainError's details, or the data of a feature's ApiError).
 */
function describeError(err: unknown): string {
  const message = (err as Error)?.message ?? String(err);
  const data = err instanceof DomainError ? err.details : (err as { extra?: Record<string, unknown> } | null)?.extra;
  const detail = data?.detail;
  return typeof detail === 'string' && detail ? `${message} (${detail})` : message;
}

export type StartOutcome = 'started' | 'taken' | Error;

const relayUnavailable: Unavailable = (detail?: string) => new DomainError('unavailable', 'temporal_unavailable', `workflow start: ${detail ?? 'Temporal unreachable'}`);

/**
 * Starts outbox entries: the API's fast path right after its commit, and the relay. One entry
 * is tried by one process at a time (its row is locked, FOR UPDATE SKIP LOCKED, for the
 * call); a started entry is marked so and never started again.
 *
 * Never doubled: the start uses the entry's workflow id, so a retry after an error whose
 * outcome was unknown (a deadline passed, the connection dropped after sending) meets the run
 * the first try may have started. Before a retry the current run of the id is described: when
 * its memo names this entry, the first try did start it and the entry is only marked (this
 * covers TERMINATE_EXISTING, which would otherwise end that run and start another, and a run
 * that already finished). Otherwise the entry's conflict policy applies (USE_EXISTING joins a
 * running workflow of the id).
 */
export class WorkflowStarts {
  constructor(
    private readonly db: Db,
    private readonly temporal: TemporalGateway,
  ) {}

  /**
   * The fast path: tries the entries now (after the commit that wrote them), under the API's
   * call deadline. `started`: this call (or an earlier one) started it; `taken`: a relay holds
   * it at this moment; an error: it stays pending, and a relay tries again after the backoff.
   */
  async startNow(ids: number[], unavailable: Unavailable = relayUnavailable): Promise<StartOutcome[]> {
    return Promise.all(ids.map((id) => this.attempt(id, unavailable)));
  }

  /** The fast path for the entries waiting for `workflowId` (when the caller did not keep their ids). */
  async startPendingOf(workflowId: string, unavailable: Unavailable = relayUnavailable): Promise<StartOutcome[]> {
    const ids: number[] = (await this.db('workflow_starts').where({ workflow_id: workflowId }).whereNull('started_at').orderBy('id').pluck('id')).map(Number);
    const out: StartOutcome[] = [];
    // In order: a later entry (a restart) replaces what an earlier one started.
    for (const id of ids) out.push(await this.attempt(id, unavailable));
    return out;
  }

  /** One try of one entry (see the class). */
  async attempt(id: number, unavailable: Unavailable = relayUnavailable, timeoutMs?: number): Promise<StartOutcome> {
    return this.db.transaction(async (trx) => {
      const row: StartRow | undefined = await trx('workflow_starts').where({ id }).forUpdate().skipLocked().first();
      if (!row) return 'taken';
      if (row.started_at) return 'started';
      try {
        await this.launch(row, unavailable, timeoutMs);
      } catch (err) {
        const delayMs = Math.min(BACKOFF.firstMs * 2 ** row.attempts, BACKOFF.maxMs);
        await trx('workflow_starts')
          .where({ id })
          .update({
            attempts: row.attempts + 1,
            last_error: describeError(err).slice(0, 2000),
            next_attempt_at: trx.raw(`now() + make_interval(secs => ?)`, [delayMs / 1000]),
          });
        return err instanceof Error ? err : new Error(String(err));
      }
      await trx('workflow_starts').where({ id }).update({ attempts: row.attempts + 1, last_error: null, started_at: trx.fn.now() });
      return 'started';
    });
  }

  private async launch(row: StartRow, unavailable: Unavailable, timeoutMs?: number): Promise<void> {
    if (row.attempts > 0 && (await this.startedBefore(row, unavailable, timeoutMs))) return;
    const options: StartOptions<Workflow> = {
      workflowId: row.workflow_id,
      args: row.args,
      summary: row.summary,
      conflictPolicy: row.options.conflict_policy ?? WorkflowIdConflictPolicy.USE_EXISTING,
      ...(row.options.reuse_policy ? { reusePolicy: row.options.reuse_policy } : {}),
      memo: { ...(row.options.memo ?? {}), [START_ID_MEMO]: Number(row.id) },
      searchAttributes: row.search_attributes,
    };
    await this.temporal.start(row.workflow_type, options, unavailable, timeoutMs);
  }

  /** Whether the current run of the entry's workflow id was started from this entry (an earlier try whose answer was lost). */
  private async startedBefore(row: StartRow, unavailable: Unavailable, timeoutMs?: number): Promise<boolean> {
    try {
      const d = await this.temporal.call(unavailable, (c) => c.workflow.getHandle(row.workflow_id).describe(), timeoutMs);
      const memo = d.memo as Record<string, unknown> | undefined;
      return Number(memo?.[START_ID_MEMO]) === Number(row.id);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return false;
      throw err;
    }
  }
}

export interface StartRelay {
  /** One pass now (tests, and the timers): the ids of the entries it started. */
  sweep(): Promise<number[]>;
  stop(): Promise<void>;
}

/**
 * The outbox relay: starts the pending entries that are due, woken by NOTIFY when one is
 * written, at the moment the next one falls due, and by a sweep every `intervalMs`, which
 * catches what a lost listener missed. Every worker process (and `npm start`'s process) runs
 * one; their row locks share the work. Each pass also deletes entries started more than
 * KEEP_STARTED_DAYS ago.
 */
export function startWorkflowRelay(opts: { db: Db; temporal: TemporalGateway; intervalMs?: number; callTimeoutMs?: number }): StartRelay {
  const { db } = opts;
  const starts = new WorkflowStarts(db, opts.temporal);
  const log = logger.child({ component: 'workflow-start-relay' });
  const intervalMs = opts.intervalMs ?? 10_000;
  let dueTimer: NodeJS.Timeout | undefined;

  const pass = async (): Promise<number[]> => {
    const due: number[] = (
      await db('workflow_starts').whereNull('started_at').where('next_attempt_at', '<=', db.fn.now()).orderBy('next_attempt_at').limit(100).pluck('id')
    ).map(Number);
    const started: number[] = [];
    for (const id of due) {
      if (loop.stopped) break;
      const out = await starts.attempt(id, relayUnavailable, opts.callTimeoutMs ?? 10_000);
      if (out === 'started') started.push(id);
      else if (out instanceof Error) log.warn({ startId: id, err: out.message }, 'workflow start failed; tried again after a backoff');
    }
    await db('workflow_starts')
      .whereIn('id', db('workflow_starts').where('started_at', '<', db.raw(`now() - interval '${KEEP_STARTED_DAYS} days'`)).limit(1000).select('id'))
      .delete();
    // Wake again when the next pending entry falls due (sooner than the sweep).
    const [{ next }] = await db('workflow_starts').whereNull('started_at').min({ next: 'next_attempt_at' });
    if (next && !loop.stopped) {
      const inMs = Math.max(50, new Date(next).getTime() - Date.now());
      if (inMs < intervalMs) {
        clearTimeout(dueTimer);
        dueTimer = setTimeout(() => loop.wake(), inMs).unref();
      }
    }
    return started;
  };

  const loop: RelayLoop<number> = relayLoop({ db, name: 'workflow-start-relay', channels: [WORKFLOW_STARTS_CHANNEL], intervalMs, pass });
  return {
    sweep: loop.sweep,
    async stop() {
      await loop.stop();
      // A pass may have set it before it ended.
      clearTimeout(dueTimer);
    },
  };
}
