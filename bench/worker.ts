/**
 * The bench worker: the service's workflows and activities, plus the bench-only workflows
 * (bench/workflows/: benchNoop, benchLocal) and their no-op activity, none of which is in the
 * production bundle or worker. It registers as a version of its own deployment
 * (`<TEMPORAL_DEPLOYMENT_NAME>-bench`): its bundle's build id is not the service's, and it must
 * never become the current version of the service's deployment on a shared server.
 */
import path from 'node:path';
import { createActivities } from '../activities';
import { bundleWorkflows, type WorkerBundle } from '../src/temporal/bundle';
import { placeWorkflows } from '../src/temporal/task-queues';
import { startQueueWorkers } from '../src/temporal/worker';

placeWorkflows({ benchNoop: 'interactive', benchLocal: 'interactive' });

export const BENCH_WORKFLOWS = path.join(__dirname, 'workflows', 'index.ts');

let bundle: Promise<WorkerBundle> | undefined;
/** The bench workflows' bundle, made once per process. */
export function benchBundle(): Promise<WorkerBundle> {
  bundle ??= bundleWorkflows(BENCH_WORKFLOWS).then((b) => ({ option: b, buildId: b.buildId, origin: 'bundled at start' }));
  return bundle;
}

export async function startBenchWorker(opts: Omit<Parameters<typeof startQueueWorkers>[0], 'createActivities' | 'bundle'>) {
  return startQueueWorkers({
    ...opts,
    config: { ...opts.config, TEMPORAL_DEPLOYMENT_NAME: `${opts.config.TEMPORAL_DEPLOYMENT_NAME}-bench` },
    bundle: await benchBundle(),
    // benchNoop and benchLocal's activity: does nothing.
    createActivities: (deps) => ({ ...createActivities(deps), benchNoopActivity: async () => undefined }),
  });
}
