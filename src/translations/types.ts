/** Shared by the routes, the services, the activities and the workflow (types and small helpers, no I/O). */

export const PACKAGE_TYPES = ['plugin', 'theme'] as const;
export type PackageType = (typeof PACKAGE_TYPES)[number];

/**
 * The states a job row can be in (the contract's `missing` is the absence of a job). `expired`:
 * nobody approved it within TRANSLATION_APPROVAL_TIMEOUT_DAYS; like `failed`, `/retry` goes on.
 */
export const JOB_STATUSES = ['importing', 'pending_approval', 'processing', 'packaging', 'ready', 'failed', 'expired'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const PACKAGE_STATUSES = ['missing', ...JOB_STATUSES] as const;

/** A language pack: one version of a plugin or theme in one locale (a job builds one). */
export interface TranslationPackage {
  slug: string;
  type: string;
  version: string;
  locale: string;
}

/** Steps of the pipeline, in order; a failed job remembers the step it failed in. */
export const PIPELINE_STEPS = ['importing', 'pending_approval', 'processing', 'packaging'] as const;
export type PipelineStep = (typeof PIPELINE_STEPS)[number];

/** A job at one of the pipeline's steps is in flight (it has not ended). */
export const IN_FLIGHT_STATUSES: readonly JobStatus[] = PIPELINE_STEPS;

/** What a failed step means for an operator: the contract's validation, translation or packaging (an expired job: `expired`). */
export const FAILURE_KIND: Record<PipelineStep, string> = {
  importing: 'validation',
  pending_approval: 'rejected',
  processing: 'translation',
  packaging: 'packaging',
};

export const SOURCES = ['none', 'human', 'ai', 'mixed'] as const;

/** One entry of a job's `logs` (a JSON array, appended with `logs || ?::jsonb`). */
export function logLine(step: string, message: string, level: 'info' | 'warn' | 'error' = 'info'): string {
  return JSON.stringify([{ at: new Date().toISOString(), step, level, message }]);
}

/** Where the translations came from: human, ai, mixed, or none yet. */
export function sourceLabel(human: number, ai: number): (typeof SOURCES)[number] {
  if (human > 0 && ai > 0) return 'mixed';
  if (ai > 0) return 'ai';
  if (human > 0) return 'human';
  return 'none';
}

export interface PipelineInput {
  jobId: number;
  slug: string;
  type: PackageType;
  version: string;
  locale: string;
  /** Where a retry starts (default: the beginning). */
  fromStep?: PipelineStep;
  /** Tries of one AI batch before the job fails (TRANSLATION_AI_MAX_TRIES). */
  aiMaxTries: number;
  /** How long the approval wait lasts before the job is `expired` (TRANSLATION_APPROVAL_TIMEOUT_DAYS; absent in runs started before it). */
  approvalTimeoutSeconds?: number;
  /** AI batches per workflow run before it continues as new (TRANSLATION_BATCHES_PER_RUN; absent in runs started before it). */
  batchesPerRun?: number;
}

export interface PipelineResult {
  status: 'ready' | 'failed' | 'expired';
  step?: PipelineStep;
  reason?: string;
}

/**
 * A decision on a job waiting for approval, sent to its pipeline as an update
 * (translationApproveUpdate / translationRejectUpdate) and recorded by the activity
 * translationDecide. `bulk`: approved through POST /translations/jobs/approve.
 */
export type Decision = { decision: 'approve'; by: string; bulk?: boolean } | { decision: 'reject'; by: string; reason: string };

/**
 * What the job's row says about its approval once translationDecide has run (under the row's
 * lock): approved, rejected, expired (the wait timed out first), or not waiting at all.
 */
export type DecisionOutcome =
  | { state: 'approved'; by: string | null }
  | { state: 'rejected'; reason: string }
  | { state: 'expired'; reason: string }
  | { state: 'not_pending'; status: string };

/**
 * Why the pipeline refused a decision (the detail of its DECISION_REFUSED failure): the job was already approved or rejected, its approval wait expired, it is not waiting
 * for approval (before the import ended, or past the wait), or another decision is being recorded.
 */
export interface DecisionRefusal {
  state: 'approved' | 'rejected' | 'expired' | 'not_pending' | 'deciding';
}

/** Update ids: one approve and one reject per run of a job, so a retried call never decides twice. */
export const decisionUpdateId = (decision: Decision['decision'], jobId: number): string => `${decision}-${jobId}`;

