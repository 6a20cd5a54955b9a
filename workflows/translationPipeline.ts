import { ActivityFailure, ApplicationFailure, condition, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type { TranslationActivities } from '../activities/translations';
import type { PipelineInput, PipelineResult, PipelineStep } from '../src/translations/types';

export type { PipelineInput, PipelineResult } from '../src/translations/types';

// The API signals through these objects (src/translations/service.ts).
export const approveSignal = defineSignal<[{ by?: string }]>('translationApprove');
export const rejectSignal = defineSignal<[{ reason: string; by?: string }]>('translationReject');

const STEPS: PipelineStep[] = ['importing', 'pending_approval', 'processing', 'packaging'];

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
 * and the reason on the job). A retry starts a new run from the failed step. The job row is
 * the source of truth the API reads; the activities write it.
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
      await condition(() => approved || rejected !== null);
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
      while (start.provider && remaining > 0) {
        remaining = (await batches.translationBatch(jobId)).remaining;
      }
    }
    step = 'packaging';
    await steps.translationPackage(jobId);
    return { status: 'ready' };
  } catch (err) {
    const reason = reasonOf(err, step, input.aiMaxTries);
    await record.translationFail(jobId, step, reason);
    return { status: 'failed', step, reason };
  }
}
