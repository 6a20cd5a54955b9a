import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  ContinueAsNew,
  defineSignal,
  makeContinueAsNewFunc,
  patched,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import type { TranslationActivities } from '../activities/translations';
import type { PipelineInput, PipelineResult, PipelineStep } from '../src/translations/types';

export type { PipelineInput, PipelineResult } from '../src/translations/types';

// The API signals through these objects (src/translations/service.ts).
export const approveSignal = defineSignal<[{ by?: string }]>('translationApprove');
export const rejectSignal = defineSignal<[{ reason: string; by?: string }]>('translationReject');

const STEPS: PipelineStep[] = ['importing', 'pending_approval', 'processing', 'packaging'];

/**
 * Changes shipped through patched() (README "Shipping a workflow change"): runs started by older
 * code replay without them. Once no such run is left, each becomes deprecatePatch(), then goes.
 */
export const PATCHES = {
  /** The approval wait ends after input.approvalTimeoutSeconds: the job is `expired`. */
  approvalTimeout: 'translation-approval-timeout',
  /** Processing continues as new every input.batchesPerRun batches, or when the server suggests it. */
  continueAsNew: 'translation-continue-as-new',
} as const;

/** For inputs of runs started before these fields existed (TRANSLATION_APPROVAL_TIMEOUT_DAYS, TRANSLATION_BATCHES_PER_RUN). */
const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 30 * 86_400;
const DEFAULT_BATCHES_PER_RUN = 500;

// Database steps: infrastructure trouble is retried; input problems are non-retryable.
const steps = proxyActivities<TranslationActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
});

const record = proxyActivities<TranslationActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

function reasonOf(err: unknown, step: PipelineStep, aiMaxTries: number): string {
  let cause: unknown = err;
  if (cause instanceof ActivityFailure && cause.cause) cause = cause.cause;
  const message = cause instanceof Error ? cause.message : String(cause);
  const retryable = cause instanceof ApplicationFailure ? !cause.nonRetryable : true;
  if (step === 'processing') return `Translation failed${retryable ? ` after ${aiMaxTries} tries` : ''}: ${message}`;
  if (step === 'packaging') return `Packaging failed: ${message}`;
  return `Validation failed: ${message}`;
}

/**
 * importing -> pending_approval -> processing -> packaging -> ready, or failed (with the step
 * and the reason on the job), or expired (nobody approved in time). A retry starts a new run
 * from the failed step. The job row is the source of truth the API reads; the activities write
 * it. Processing continues as new (same workflow id, fromStep 'processing') so that no run's
 * history grows with the number of batches.
 */
export async function translationPipeline(input: PipelineInput): Promise<PipelineResult> {
  const { jobId } = input;
  let approved = false;
  let rejected: string | null = null;
  setHandler(approveSignal, () => {
    if (rejected === null) approved = true;
  });
  setHandler(rejectSignal, ({ reason }) => {
    if (!approved) rejected = reason;
  });

  // One batch per activity: its result is stored before the next starts, so a worker that dies
  // mid-batch costs that batch only. The heartbeat notices a dead worker within 15 s.
  const batches = proxyActivities<TranslationActivities>({
    startToCloseTimeout: '15 minutes',
    heartbeatTimeout: '15 seconds',
    retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: input.aiMaxTries, nonRetryableErrorTypes: ['TranslationProviderRejected'] },
  });

  const from = STEPS.indexOf(input.fromStep ?? 'importing');
  let step: PipelineStep = STEPS[Math.max(from, 0)];
  try {
    if (from <= 0) {
      step = 'importing';
      const imported = await steps.translationImport(jobId);
      if (imported.autoApprove) approved = true;
    }
    if (from <= 1) {
      step = 'pending_approval';
      if (!approved) {
        const state = await steps.translationAwaitApproval(jobId);
        if (state.approved) approved = true;
      }
      if (patched(PATCHES.approvalTimeout)) {
        const timeoutSeconds = input.approvalTimeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_SECONDS;
        if (!(await condition(() => approved || rejected !== null, timeoutSeconds * 1000))) {
          // The activity decides under the row's lock: an approve (or reject) the API recorded
          // just before the timer fired wins over the timeout.
          const outcome = await record.translationExpire(jobId, timeoutSeconds);
          if (outcome.state === 'expired') return { status: 'expired', step, reason: outcome.reason };
          if (outcome.state === 'approved') approved = true;
          else rejected ??= outcome.reason;
        }
      } else {
        await condition(() => approved || rejected !== null);
      }
      if (!approved) {
        const reason = `Rejected by an administrator: ${rejected}`;
        await record.translationFail(jobId, 'pending_approval', reason);
        return { status: 'failed', step, reason };
      }
    }
    if (from <= 2) {
      step = 'processing';
      const start = await steps.translationStartProcessing(jobId);
      let remaining = start.remaining;
      const bounded = patched(PATCHES.continueAsNew);
      const perRun = input.batchesPerRun ?? DEFAULT_BATCHES_PER_RUN;
      for (let done = 0; start.provider && remaining > 0; done++) {
        if (bounded && (done >= perRun || workflowInfo().continueAsNewSuggested)) {
          // Only what the next run needs: the job (the row holds strings and counts) and the step;
          // the memo (job, package) stays for operators.
          await makeContinueAsNewFunc<typeof translationPipeline>({ memo: workflowInfo().memo })({ ...input, fromStep: 'processing' });
        }
        remaining = (await batches.translationBatch(jobId)).remaining;
      }
    }
    step = 'packaging';
    await steps.translationPackage(jobId);
    return { status: 'ready' };
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err;
    const reason = reasonOf(err, step, input.aiMaxTries);
    await record.translationFail(jobId, step, reason);
    return { status: 'failed', step, reason };
  }
}

// Worker versioning (README "Shipping a workflow change"): a job waits for its approval for up to
// TRANSLATION_APPROVAL_TIMEOUT_DAYS, so it moves to the current worker version at its next workflow
// task (AUTO_UPGRADE) and the new code must replay its history: every change to what it does goes
// behind patched().
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, translationPipeline);
