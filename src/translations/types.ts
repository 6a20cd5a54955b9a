/** Shared by the routes, the activities and the workflow (types and pure helpers only). */

export const PACKAGE_TYPES = ['plugin', 'theme'] as const;
export type PackageType = (typeof PACKAGE_TYPES)[number];

/**
 * The states a job row can be in (the contract's `missing` is the absence of a job). `expired`:
 * nobody approved it within TRANSLATION_APPROVAL_TIMEOUT_DAYS; like `failed`, `/retry` goes on.
 */
export const JOB_STATUSES = ['importing', 'pending_approval', 'processing', 'packaging', 'ready', 'failed', 'expired'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const PACKAGE_STATUSES = ['missing', ...JOB_STATUSES] as const;

/** Steps of the pipeline, in order; a failed job remembers the step it failed in. */
export const PIPELINE_STEPS = ['importing', 'pending_approval', 'processing', 'packaging'] as const;
export type PipelineStep = (typeof PIPELINE_STEPS)[number];

/** What a failed step means for an operator: the contract's validation, translation or packaging (an expired job: `expired`). */
export const FAILURE_KIND: Record<PipelineStep, string> = {
  importing: 'validation',
  pending_approval: 'rejected',
  processing: 'translation',
  packaging: 'packaging',
};

export const SOURCES = ['none', 'human', 'ai', 'mixed'] as const;

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

