import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  ContinueAsNew,
  defineSignal,
  defineUpdate,
  makeContinueAsNewFunc,
  patched,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  workflowInfo,
} from '@temporalio/workflow';
import type { TranslationActivities } from '../activities/translations';
import type { Decision, DecisionOutcome, DecisionRefusal, PipelineInput, PipelineResult, PipelineStep } from '../src/translations/types';

export type { PipelineInput, PipelineResult } from '../src/translations/types';

/**
 * Approve and reject (README "Decisions: updates and signals"): the API calls these updates
 * (src/translations/pipeline.ts) with the update id approve-<job id> / reject-<job id>, and waits
 * for the answer. The validator refuses a job that is not waiting for approval or was already
 * decided (nothing is recorded then); the handler records the decision through the activity
 * translationDecide and answers what the job's row says.
 */
export const translationApproveUpdate = defineUpdate<Extract<DecisionOutcome, { state: 'approved' }>, [{ by: string; bulk?: boolean }]>('translationApproveUpdate');
export const translationRejectUpdate = defineUpdate<Extract<DecisionOutcome, { state: 'rejected' }>, [{ by: string; reason: string }]>('translationRejectUpdate');

/** The ApplicationFailure type of a refused decision; its one detail is a DecisionRefusal. */
export const DECISION_REFUSED = 'TranslationDecisionRefused';

/**
 * The signals the API sent before decisions were updates. They stay registered: runs that
 * received one replay it, and an API replica of the older code (during a rolling deploy) still
 * sends them after writing the row itself.
 */
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
  /**
   * Approve and reject are updates whose handler records the decision through an activity.
   * The marker is recorded with the first such activity of a run; runs from before it received
   * signals only (their handlers stay).
   */
  decisionUpdates: 'translation-decision-updates',
  /**
   * A job that failed (a step gave up) ends its run Failed (ApplicationFailure TranslationFailed,
   * its details the PipelineResult) after the job recorded it. Rejected and expired jobs are
   * decisions, not failures: their runs still complete.
   */
  failRuns: 'translation-fail-runs',
  /**
   * The AI provider's error budget is kept by the batch activity (TRANSLATION_AI_MAX_TRIES per
   * batch, TRANSLATION_AI_ERROR_BUDGET per job); the activity's own retries cover infrastructure
   * (a worker killed or stopped mid-batch, database trouble) and no longer spend the provider's tries.
   */
  providerBudget: 'translation-provider-budget',
} as const;

/** Tries of a batch for infrastructure trouble, on top of the provider's (PATCHES.providerBudget). */
const INFRASTRUCTURE_TRIES = 10;

/** The failure type of a run whose job failed; its details[0] is the PipelineResult. */
export const TRANSLATION_FAILED = 'TranslationFailed';

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

function refused(state: DecisionRefusal['state'], message: string): ApplicationFailure {
  const refusal: DecisionRefusal = { state };
  return ApplicationFailure.create({ message, type: DECISION_REFUSED, nonRetryable: true, details: [refusal] });
}

/** `attempts`: the batch activity's maximumAttempts, which a retryable failure used up. */
function reasonOf(err: unknown, step: PipelineStep, aiMaxTries: number, attempts: number): string {
  let cause: unknown = err;
  if (cause instanceof ActivityFailure && cause.cause) cause = cause.cause;
  const message = cause instanceof Error ? cause.message : String(cause);
  const retryable = cause instanceof ApplicationFailure ? !cause.nonRetryable : true;
  if (step === 'processing' && cause instanceof ApplicationFailure && cause.type === 'TranslationProviderTriesSpent') {
    return `Translation failed after ${Number(cause.details?.[0] ?? aiMaxTries)} tries: ${message}`;
  }
  if (step === 'processing' && retryable && attempts !== aiMaxTries) return `Translation failed after ${attempts} attempts (the provider's tries not spent): ${message}`;
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

  const from = STEPS.indexOf(input.fromStep ?? 'importing');
  // Where the run is with respect to approval: before its wait (importing, or the retry's
  // check of the row), in it, or past it (decided, expired, failed, or started past it).
  let approval: 'before' | 'waiting' | 'past' = from <= 1 ? 'before' : 'past';
  let deciding: Decision['decision'] | null = null;

  const validate = (decision: Decision['decision']) => {
    if (approved) throw refused('approved', 'The job was already approved.');
    if (rejected !== null) throw refused('rejected', 'The job was already rejected.');
    if (deciding !== null && deciding !== decision) throw refused('deciding', `The job is being ${deciding === 'approve' ? 'approved' : 'rejected'}.`);
    if (approval === 'past') throw refused('not_pending', 'The job is not waiting for approval.');
  };
  const decide = async (d: Decision): Promise<DecisionOutcome> => {
    deciding = d.decision;
    try {
      // An update can arrive as the import's result does (the row already says pending_approval):
      // it is taken, and waits here for the approval wait to begin.
      await condition(() => approval !== 'before');
      validate(d.decision);
      patched(PATCHES.decisionUpdates);
      // Under the row's lock: the activity records the decision, or says what decided first
      // (the approval timeout, or an API replica of the older code writing the row itself).
      const outcome = await record.translationDecide(jobId, d);
      if (outcome.state === 'approved' && rejected === null) approved = true;
      if (outcome.state === 'rejected' && !approved) rejected ??= outcome.reason;
      return outcome;
    } finally {
      deciding = null;
    }
  };
  setHandler(
    translationApproveUpdate,
    async ({ by, bulk }) => {
      const outcome = await decide({ decision: 'approve', by, ...(bulk ? { bulk } : {}) });
      if (outcome.state === 'approved') return outcome;
      throw refused(outcome.state, `The job was not approved: it is ${outcome.state === 'not_pending' ? outcome.status : outcome.state}.`);
    },
    { validator: (_d: { by: string; bulk?: boolean }) => validate('approve') },
  );
  setHandler(
    translationRejectUpdate,
    async ({ by, reason }) => {
      const outcome = await decide({ decision: 'reject', by, reason });
      if (outcome.state === 'rejected') return outcome;
      throw refused(outcome.state, `The job was not rejected: it is ${outcome.state === 'not_pending' ? outcome.status : outcome.state}.`);
    },
    { validator: (_d: { by: string; reason: string }) => validate('reject') },
  );

  // One batch per activity: its result is stored before the next starts, so a worker that dies
  // mid-batch costs that batch only. The heartbeat notices a dead worker within 15 s.
  let batchAttempts = input.aiMaxTries;
  const batchesWith = (maximumAttempts: number) =>
    proxyActivities<TranslationActivities>({
      startToCloseTimeout: '15 minutes',
      heartbeatTimeout: '15 seconds',
      retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts, nonRetryableErrorTypes: ['TranslationProviderRejected'] },
    });
  /** A failed job's result, when its run is to end Failed (PATCHES.failRuns): thrown once the handlers are done. */
  let failure: PipelineResult | null = null;

  let step: PipelineStep = STEPS[Math.max(from, 0)];
  const result = await run();
  // An update still deciding (e.g. one the approval timeout overtook) answers before the run ends.
  approval = 'past';
  if (!allHandlersFinished()) await condition(allHandlersFinished);
  // (Set inside run(): TypeScript cannot see it from here.)
  const failed = failure as PipelineResult | null;
  if (failed) throw ApplicationFailure.create({ message: failed.reason, type: TRANSLATION_FAILED, nonRetryable: true, details: [failed] });
  return result;

  async function run(): Promise<PipelineResult> {
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
        approval = 'waiting';
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
        approval = 'past';
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
        if (start.provider && remaining > 0 && patched(PATCHES.providerBudget)) batchAttempts = input.aiMaxTries + INFRASTRUCTURE_TRIES;
        const batches = batchesWith(batchAttempts);
        const perRun = input.batchesPerRun ?? DEFAULT_BATCHES_PER_RUN;
        for (let done = 0; start.provider && remaining > 0; done++) {
          if (bounded && (done >= perRun || workflowInfo().continueAsNewSuggested)) {
            // Only what the next run needs: the job (the row holds strings and counts) and the step;
            // the memo (job, package) stays for operators.
            if (!allHandlersFinished()) await condition(allHandlersFinished);
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
      approval = 'past';
      const reason = reasonOf(err, step, input.aiMaxTries, batchAttempts);
      await record.translationFail(jobId, step, reason);
      const result: PipelineResult = { status: 'failed', step, reason };
      if (patched(PATCHES.failRuns)) failure = result;
      return result;
    }
  }
}

// Worker versioning (README "Shipping a workflow change"): a job waits for its approval for up to
// TRANSLATION_APPROVAL_TIMEOUT_DAYS, so it moves to the current worker version at its next workflow
// task (AUTO_UPGRADE) and the new code must replay its history: every change to what it does goes
// behind patched().
setWorkflowOptions({ versioningBehavior: 'AUTO_UPGRADE' }, translationPipeline);
