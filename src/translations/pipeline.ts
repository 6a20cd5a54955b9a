import { WorkflowIdReusePolicy, WorkflowNotFoundError, WorkflowUpdateFailedError, type WorkflowIdConflictPolicy } from '@temporalio/client';
import { ApplicationFailure, type UpdateDefinition } from '@temporalio/common';
import type { Knex } from 'knex';
import { DECISION_REFUSED, translationApproveUpdate, translationPipeline, translationRejectUpdate } from '../../workflows/translationPipeline';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { conflict, temporalUnavailable as temporalUnavailableError, type ApiError } from '../http/errors';
import type { TemporalGateway } from '../temporal/gateway';
import { enqueueStart, startPending, WorkflowStarts, type StartOutcome } from '../temporal/starts';
import { decisionUpdateId, type Decision, type DecisionOutcome, type DecisionRefusal, type PipelineInput, type PipelineStep, type TranslationPackage } from './types';

export type PipelineConfig = Pick<Config, 'TRANSLATION_AI_MAX_TRIES' | 'TRANSLATION_APPROVAL_TIMEOUT_DAYS' | 'TRANSLATION_BATCHES_PER_RUN'>;

/** A job as a decision needs it: the pipeline it is sent to. */
interface JobRun {
  id: number;
  workflow_id: string;
}

type Approved = Extract<DecisionOutcome, { state: 'approved' }>;
type Rejected = Extract<DecisionOutcome, { state: 'rejected' }>;

export function temporalUnavailable(detail?: string): ApiError {
  return temporalUnavailableError('The translation pipeline cannot be reached right now', detail);
}

/** An approve or reject whose answer did not come: it may or may not have been recorded, and asking again is safe. */
function decisionUnconfirmed(detail?: string): ApiError {
  return temporalUnavailableError(
    'The decision could not be confirmed',
    detail,
    'Sending the same request again is safe: it is the same decision (update approve-<job id> or reject-<job id>), which the pipeline records at most once.',
  );
}

/** Why the pipeline refused a decision, or null when the update failed for another reason. */
function refusalOf(err: WorkflowUpdateFailedError): DecisionRefusal | null {
  const cause = err.cause;
  if (!(cause instanceof ApplicationFailure) || cause.type !== DECISION_REFUSED) return null;
  return (cause.details?.[0] as DecisionRefusal | undefined) ?? { state: 'not_pending' };
}

/**
 * A job's translationPipeline workflow through the Temporal gateway: its start (through the
 * workflow start outbox, under the workflow id stored on the job), its decisions (updates) and
 * whether it runs.
 */
export class TranslationPipeline {
  private readonly starts: WorkflowStarts;

  constructor(
    private readonly db: Db,
    private readonly temporal: TemporalGateway,
    private readonly config: PipelineConfig,
  ) {
    this.starts = new WorkflowStarts(db, temporal);
  }

  /** The 503 at once when Temporal is not configured or known unreachable (before anything is written). */
  assertAvailable(): void {
    this.temporal.check(temporalUnavailable);
  }

  /** A new job's workflow id; a job keeps the one stored on its row. */
  workflowId(pkg: TranslationPackage): Promise<string> {
    return this.temporal.ids.build('translation', pkg.slug, pkg.type, pkg.version, pkg.locale);
  }

  /** Writes the start of a job's pipeline into the outbox, in the caller's transaction (the one writing the job); its id, for startNow. */
  enqueue(trx: Knex.Transaction, jobId: number, workflowId: string, pkg: TranslationPackage, fromStep: PipelineStep | undefined, conflictPolicy: WorkflowIdConflictPolicy): Promise<number> {
    const input: PipelineInput = {
      jobId,
      slug: pkg.slug,
      type: pkg.type as PipelineInput['type'],
      version: pkg.version,
      locale: pkg.locale,
      aiMaxTries: this.config.TRANSLATION_AI_MAX_TRIES,
      approvalTimeoutSeconds: Math.max(1, Math.round(this.config.TRANSLATION_APPROVAL_TIMEOUT_DAYS * 86_400)),
      batchesPerRun: this.config.TRANSLATION_BATCHES_PER_RUN,
      ...(fromStep ? { fromStep } : {}),
    };
    return enqueueStart(trx, {
      workflow: translationPipeline,
      workflowId,
      args: [input],
      conflictPolicy,
      // A retry (or a package built again after its job was removed) reuses the id.
      reusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      memo: { job_id: jobId, slug: pkg.slug, type: pkg.type, version: pkg.version, locale: pkg.locale, ...(fromStep ? { from_step: fromStep } : {}) },
      summary: `Translation pipeline, ${pkg.type} ${pkg.slug} ${pkg.version} ${pkg.locale} (job ${jobId})${fromStep ? `, retry from ${fromStep}` : ''}`,
    });
  }

  /** Starts written starts now, after their commit (the fast path); one that fails stays in the outbox for the start relay. */
  startNow(startIds: number[]): Promise<StartOutcome[]> {
    return this.starts.startNow(startIds, temporalUnavailable);
  }

  /** Whether a start of the workflow waits in the outbox (written, not started yet). */
  startWaiting(workflowId: string): Promise<boolean> {
    return startPending(this.db, workflowId);
  }

  /** The status of the job's workflow (RUNNING, COMPLETED, …), or null when there is no such workflow. */
  async runStatus(workflowId: string): Promise<string | null> {
    try {
      const description = await this.temporal.call(temporalUnavailable, (client) => client.workflow.getHandle(workflowId).describe());
      return description.status.name;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return null;
      throw err;
    }
  }

  approve(job: JobRun, arg: { by: string; bulk?: boolean }): Promise<Approved | DecisionRefusal> {
    return this.decide(job, translationApproveUpdate, 'approve', arg);
  }

  reject(job: JobRun, arg: { by: string; reason: string }): Promise<Rejected | DecisionRefusal> {
    return this.decide(job, translationRejectUpdate, 'reject', arg);
  }

  /**
   * Asks the job's pipeline to decide (an update, README "Decisions: updates and signals"): its
   * answer, or its refusal (the DecisionRefusal), or the 409 for a run that has ended. The
   * update id makes a retried call, here or by the client, decide at most once.
   */
  private async decide<Ret, Arg>(job: JobRun, update: UpdateDefinition<Ret, [Arg]>, decision: Decision['decision'], arg: Arg): Promise<Ret | DecisionRefusal> {
    try {
      return await this.temporal.update(job.workflow_id, update, [arg], decisionUpdateId(decision, Number(job.id)), decisionUnconfirmed);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) {
        throw conflict('wu_rest_translation_workflow_not_running', 'The pipeline of this job is not running (it was terminated or lost); POST .../retry restarts it from its step.');
      }
      if (err instanceof WorkflowUpdateFailedError) {
        const refusal = refusalOf(err);
        if (refusal) return refusal;
        // A worker of the code from before decisions were updates took it (a rolling deploy).
        if (/No registered handler for update/.test((err.cause as Error | undefined)?.message ?? '')) {
          throw decisionUnconfirmed('a worker of older code, without decision updates, answered; the new workers take over within the deploy');
        }
      }
      throw err;
    }
  }
}
