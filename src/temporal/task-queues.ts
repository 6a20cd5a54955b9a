import type { Config } from '../config';

/**
 * Which task queue each workflow type runs on: the one place that says so. Its activities run
 * on the same queue (the SDK's default), so a worker polling only one queue runs everything
 * of that kind.
 *
 * - interactive (TEMPORAL_TASK_QUEUE): what a caller waits for, or what must answer within
 *   seconds: the register saga, chat follow-ups, domain checks.
 * - bulk (TEMPORAL_BULK_TASK_QUEUE, default `<TEMPORAL_TASK_QUEUE>-bulk`): long activities over
 *   many rows or files: translation pipelines and the tenant workflows; and webhook deliveries,
 *   whose attempts wait on receivers for up to 10 s each; and membership lifecycles (renewals:
 *   thousands can fall due in the same hour, and a charge waits on the payment gateway).
 *
 * So a register step never queues behind a tenant push or an AI batch for an activity slot or
 * a database connection; each kind is scaled with its own workers (README "Scaling workers").
 */
export type TaskQueueKind = 'interactive' | 'bulk';

/** The production workflow types; the bench worker places its own with placeWorkflows. */
export const WORKFLOW_TASK_QUEUES: Record<string, TaskQueueKind> = {
  register: 'interactive',
  chatFollowUp: 'interactive',
  domainCheck: 'interactive',
  translationPipeline: 'bulk',
  tenantBootstrap: 'bulk',
  tenantVerifyWorkflow: 'bulk',
  tenantTeardown: 'bulk',
  tenantPush: 'bulk',
  // Runs started before webhookShard (issue 19) finish on it; the relay starts only webhookShard.
  webhookDelivery: 'bulk',
  membershipLifecycle: 'bulk',
  webhookShard: 'bulk',
};

/** Places workflow types that are not the service's (bench/worker.ts: the bench workflows). */
export function placeWorkflows(types: Record<string, TaskQueueKind>): void {
  Object.assign(WORKFLOW_TASK_QUEUES, types);
}

export interface TaskQueues {
  interactive: string;
  bulk: string;
}

/** The two queue names the configuration gives. */
export function taskQueues(config: Pick<Config, 'TEMPORAL_TASK_QUEUE' | 'TEMPORAL_BULK_TASK_QUEUE'>): TaskQueues {
  return { interactive: config.TEMPORAL_TASK_QUEUE, bulk: config.TEMPORAL_BULK_TASK_QUEUE ?? bulkQueueOf(config.TEMPORAL_TASK_QUEUE) };
}

export function bulkQueueOf(interactive: string): string {
  return `${interactive}-bulk`;
}

/** The queue a workflow type starts on; a type not listed here is a programming error, not a default. */
export function taskQueueFor(workflowType: string, queues: TaskQueues): string {
  const kind = Object.hasOwn(WORKFLOW_TASK_QUEUES, workflowType) ? WORKFLOW_TASK_QUEUES[workflowType] : undefined;
  if (!kind) throw new Error(`workflow type ${workflowType} has no task queue in src/temporal/task-queues.ts`);
  return queues[kind];
}

/**
 * The queues a worker process polls (WORKER_TASK_QUEUES: queue names, comma-separated; unset:
 * both). A name that is neither queue is refused: a worker polling it would run nothing.
 */
export function workerTaskQueues(config: Pick<Config, 'WORKER_TASK_QUEUES'>, queues: TaskQueues): { kind: TaskQueueKind; name: string }[] {
  const all = (Object.entries(queues) as [TaskQueueKind, string][]).map(([kind, name]) => ({ kind, name }));
  const wanted = config.WORKER_TASK_QUEUES;
  if (!wanted?.length) return all;
  const unknown = wanted.filter((n) => !all.some((q) => q.name === n));
  if (unknown.length) {
    throw new Error(`WORKER_TASK_QUEUES names ${unknown.join(', ')}, which is neither the interactive queue (${queues.interactive}) nor the bulk queue (${queues.bulk})`);
  }
  return all.filter((q) => wanted.includes(q.name));
}
