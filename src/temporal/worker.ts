import { DefaultLogger, NativeConnection, Runtime, Worker, type LogLevel, type WorkflowBundleOption } from '@temporalio/worker';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { createObjectStorage, type ObjectStorage } from '../infra/object-storage';
import { logger } from '../logger';
import { loadWorkerBundle, type WorkerBundle } from './bundle';
import { bulkQueueOf, workerTaskQueues, type TaskQueueKind } from './task-queues';
import { promoteVersion, workerDeploymentOptions, type DeploymentVersion, type PromoteOutcome } from './versioning';

export interface RunningWorker {
  /** Resolves when the worker has stopped for good (shutdown()); a failed worker is restarted, not ended. */
  done: Promise<void>;
  shutdown(): Promise<void>;
  /** The workflow bundle's SHA-256 (src/temporal/bundle.ts). */
  buildId: string;
  /** The worker deployment version it registers as; null with WORKER_VERSIONING=false. */
  version: DeploymentVersion | null;
  /** What became of WORKER_VERSIONING_SET_CURRENT (null without versioning); startWorker waits for it up to PROMOTE_START_WAIT_MS. */
  promoted: Promise<PromoteOutcome> | null;
}

/** One task queue's supervised SDK Worker. */
interface QueueWorker {
  done: Promise<void>;
  shutdown(): Promise<void>;
  /** The connection of the Worker running now (throws while none is). */
  connection(): NativeConnection;
}

/** How long startWorker waits for its version to become current before it returns (it goes on trying after). */
export const PROMOTE_START_WAIT_MS = 30_000;

/**
 * Restart backoff of a worker that failed: 0.5 s, doubling up to 10 s, back to 0.5 s after a
 * run that lasted a minute.
 */
export const WORKER_RESTART = { firstMs: 500, maxMs: 10_000, healthyRunMs: 60_000 };

let runtimeInstalled = false;
/** Where the SDK's Prometheus exporter listens (WORKER_METRICS_HOST:WORKER_METRICS_PORT), or null (port 0: off). */
export function metricsBindAddress(config: Pick<Config, 'WORKER_METRICS_HOST' | 'WORKER_METRICS_PORT'>): string | null {
  if (!config.WORKER_METRICS_PORT) return null;
  const host = config.WORKER_METRICS_HOST.includes(':') ? `[${config.WORKER_METRICS_HOST}]` : config.WORKER_METRICS_HOST;
  return `${host}:${config.WORKER_METRICS_PORT}`;
}

/**
 * The SDK's runtime, once per process (Runtime.install refuses a second call, and the first
 * NativeConnection or Worker makes a default one): its log lines go through our logger, at
 * warn and above unless LOG_LEVEL asks for more, and, given a config whose
 * WORKER_METRICS_PORT is not 0, its metrics (temporal_*: task slots, poll and schedule-to-start
 * latencies, activity and workflow outcomes, sticky cache) are served for Prometheus at
 * http://WORKER_METRICS_HOST:WORKER_METRICS_PORT/metrics. The first call decides: a process
 * that bundles or replays workflows before it starts a worker (the replay test) has no metrics.
 */
function installRuntime(config?: Pick<Config, 'WORKER_METRICS_HOST' | 'WORKER_METRICS_PORT'>): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const level: LogLevel = logger.levelVal <= 20 ? 'DEBUG' : 'WARN';
  const bindAddress = config ? metricsBindAddress(config) : null;
  try {
    Runtime.install({
      logger: new DefaultLogger(level, (entry) => {
        const fn = entry.level === 'ERROR' ? 'error' : entry.level === 'WARN' ? 'warn' : 'debug';
        logger[fn]({ component: 'temporal-sdk', ...entry.meta }, entry.message);
      }),
      ...(bindAddress ? { telemetryOptions: { metrics: { prometheus: { bindAddress } } } } : {}),
    });
  } catch (err) {
    runtimeInstalled = false;
    // The port taken: say which setting, not only the SDK's "Address already in use".
    if (bindAddress) throw new Error(`worker metrics (WORKER_METRICS_HOST:WORKER_METRICS_PORT = ${bindAddress}): ${(err as Error).message}; choose another port, or 0 to turn them off`);
    throw err;
  }
  if (bindAddress) logger.info({ bindAddress }, 'temporal worker metrics served at /metrics');
}

let bundle: Promise<WorkerBundle> | undefined;
/**
 * The workflow bundle this process's workers run, and its build id, loaded once per process:
 * the prebuilt one of `npm run build` when run from dist/, bundled now from the sources otherwise.
 */
export function workerBundle(): Promise<WorkerBundle> {
  installRuntime();
  bundle ??= loadWorkerBundle();
  return bundle;
}

/** The bundle as the SDK takes it (a worker's or a replayer's `workflowBundle`). */
export async function workflowBundle(): Promise<WorkflowBundleOption> {
  return (await workerBundle()).option;
}

/**
 * What one worker process may hold, stated rather than left to the SDK's defaults (which size
 * the workflow cache from the V8 heap limit: about 2,300 workflows on a 4 GB heap). All
 * workflows run in ONE reused V8 context (`reuseV8Context`, the SDK's default since 1.9, set
 * here so it stays so): each cached workflow costs its own state, not a context of its own.
 * Past WORKER_MAX_CACHED_WORKFLOWS the least recently used is evicted and replayed from its
 * history when its next task comes. Activities share the process's database pool
 * (DB_POOL_MAX), so more of them at once than that only wait for a connection. One Worker per
 * task queue (src/temporal/task-queues.ts): the cache and the workflow task slots are per queue.
 */
export function workerBounds(
  config: Pick<
    Config,
    'WORKER_MAX_CACHED_WORKFLOWS' | 'WORKER_MAX_WORKFLOW_TASKS' | 'WORKER_MAX_ACTIVITIES' | 'WORKER_MAX_BULK_ACTIVITIES' | 'WORKER_MAX_LOCAL_ACTIVITIES' | 'WORKER_SHUTDOWN_GRACE_SECONDS'
  >,
  kind: TaskQueueKind = 'interactive',
) {
  return {
    reuseV8Context: true,
    // A stopping worker (SIGTERM in a deploy) stops polling at once, then gives the activities
    // it runs this long to finish before it cancels them: the SDK's default is 0, so every
    // deploy cancelled the AI batches in flight, each costing one of its tries.
    shutdownGraceTime: config.WORKER_SHUTDOWN_GRACE_SECONDS * 1000,
    maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS,
    // The SDK refuses fewer than 2 workflow task slots with a cache.
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_WORKFLOW_TASKS,
    // Per queue: the interactive queue's activities are short database steps, the bulk queue's
    // long ones (a push, an AI batch) hold a connection for longer, so fewer of them run at once.
    maxConcurrentActivityTaskExecutions: kind === 'bulk' ? config.WORKER_MAX_BULK_ACTIVITIES : config.WORKER_MAX_ACTIVITIES,
    maxConcurrentLocalActivityExecutions: config.WORKER_MAX_LOCAL_ACTIVITIES,
  };
}

/**
 * A worker that comes back by itself. The SDK 1.24 Worker retries its polls while the server
 * is away (measured: 90 s of refused connections, and a server back without the namespace for
 * 30 s; it polled again each time once the server was back), but a Worker whose run() ends
 * with an error (a poll error its core gives up on) never polls again: so a run that ends
 * without shutdown() is followed by a new NativeConnection and Worker, with backoff
 * (WORKER_RESTART), each attempt logged, until shutdown(). The first start is retried only
 * with `retryFirstStart` (worker processes, which may start before Temporal); otherwise a wrong
 * address or namespace stops the process's start.
 *
 * Per process: with N worker replicas each one restarts its own worker.
 */
async function superviseQueue(opts: {
  address: string;
  namespace: string;
  taskQueue: string;
  kind: TaskQueueKind;
  config: Config;
  workflowBundle: WorkflowBundleOption;
  /** The worker deployment version the Worker registers as, or null (WORKER_VERSIONING=false). */
  version: DeploymentVersion | null;
  activities: object;
  /** The first start too is tried again with backoff (worker processes: Temporal may come up after them); it then runs in the background. */
  retryFirstStart?: boolean;
}): Promise<QueueWorker> {
  const create = async () => {
    const connection = await NativeConnection.connect({ address: opts.address });
    try {
      const worker = await Worker.create({
        connection,
        namespace: opts.namespace,
        taskQueue: opts.taskQueue,
        workflowBundle: opts.workflowBundle,
        activities: opts.activities,
        ...(opts.version && { workerDeploymentOptions: workerDeploymentOptions(opts.version) }),
        ...workerBounds(opts.config, opts.kind),
      });
      return { connection, worker };
    } catch (err) {
      await connection.close().catch(() => undefined);
      throw err;
    }
  };
  /** Runs a worker until it ends, then closes its connection; a failure is logged, not thrown. */
  const runOnce = async (w: { connection: NativeConnection; worker: Worker }) => {
    try {
      await w.worker.run();
    } catch (err) {
      if (!stopping) logger.error({ err, taskQueue: opts.taskQueue }, 'temporal worker failed');
    } finally {
      await w.connection.close().catch(() => undefined);
    }
  };

  let current: { connection: NativeConnection; worker: Worker } | null = opts.retryFirstStart ? null : await create();
  let stopping = false;
  let stop!: () => void;
  const stopped = new Promise<null>((resolve) => (stop = () => resolve(null)));
  const sleep = (ms: number) => Promise.race([new Promise<void>((r) => setTimeout(r, ms).unref()), stopped]);

  const done = supervise();
  async function supervise(): Promise<void> {
    let delay = WORKER_RESTART.firstMs;
    for (;;) {
      const first = current === null;
      if (current) {
        const startedAt = Date.now();
        await runOnce(current);
        if (stopping) return;
        if (Date.now() - startedAt >= WORKER_RESTART.healthyRunMs) delay = WORKER_RESTART.firstMs;
      }
      for (let attempt = 1; ; attempt++) {
        if (!first || attempt > 1) {
          logger.warn({ attempt, delayMs: delay, address: opts.address }, first ? 'temporal worker cannot start yet; trying again' : 'temporal worker restarting');
          await sleep(delay);
          delay = Math.min(delay * 2, WORKER_RESTART.maxMs);
        }
        if (stopping) return;
        const pending = create();
        const next = await Promise.race([pending, stopped]).catch((err: Error) => {
          logger.warn({ attempt, err: err.message }, 'temporal worker could not connect');
          return undefined;
        });
        if (next === null) {
          // Stopped while connecting: a worker made after all is run and shut down at once.
          void pending.then(
            (w) => {
              const run = runOnce(w);
              try {
                w.worker.shutdown();
              } catch {
                // it ended already
              }
              return run;
            },
            () => undefined,
          );
          return;
        }
        if (next) {
          current = next;
          break;
        }
      }
      logger.info({ taskQueue: opts.taskQueue }, first ? 'temporal worker running' : 'temporal worker running again');
    }
  }
  if (current) logger.info({ taskQueue: opts.taskQueue, kind: opts.kind, namespace: opts.namespace }, 'temporal worker running');
  return {
    done,
    async shutdown() {
      stopping = true;
      stop();
      if (current && current.worker.getState() === 'RUNNING') current.worker.shutdown();
      await done;
    },
    connection() {
      if (!current) throw new Error('the worker has not connected yet');
      return current.connection;
    },
  };
}

/**
 * The process's workers: one per task queue it polls (WORKER_TASK_QUEUES; unset: the
 * interactive queue `taskQueue` and the bulk queue, TEMPORAL_BULK_TASK_QUEUE or
 * `<taskQueue>-bulk`), each restarting by itself as above, sharing the activities (one database
 * pool, one file storage) and the workflow bundle.
 */
export async function startQueueWorkers(opts: {
  address: string;
  namespace: string;
  taskQueue: string;
  db: Db;
  config: Config;
  storage?: ObjectStorage;
  /** The first start too is tried again with backoff (worker processes: Temporal may come up after them); it then runs in the background. */
  retryFirstStart?: boolean;
  /** The workflow code to run; default the process's (workerBundle()). */
  bundle?: WorkerBundle;
  /** The activities, built once for all the queues (the composition root passes the service's: this layer knows no feature). */
  createActivities: (deps: { db: Db; config: Config; storage: ObjectStorage }) => object;
}): Promise<RunningWorker> {
  installRuntime(opts.config);
  const queues = workerTaskQueues(opts.config, { interactive: opts.taskQueue, bulk: opts.config.TEMPORAL_BULK_TASK_QUEUE ?? bulkQueueOf(opts.taskQueue) });
  // The process's shared file storage; when not given, one built from the config, closed when the workers stop.
  const storage = opts.storage ?? createObjectStorage(opts.config);
  const own = !opts.storage;
  const code = opts.bundle ?? (await workerBundle());
  const version: DeploymentVersion | null = opts.config.WORKER_VERSIONING ? { deploymentName: opts.config.TEMPORAL_DEPLOYMENT_NAME, buildId: code.buildId } : null;
  const started: QueueWorker[] = [];
  try {
    const activities = opts.createActivities({ db: opts.db, config: opts.config, storage });
    for (const q of queues) {
      started.push(
        await superviseQueue({ address: opts.address, namespace: opts.namespace, taskQueue: q.name, kind: q.kind, config: opts.config, workflowBundle: code.option, version, activities, retryFirstStart: opts.retryFirstStart }),
      );
    }
  } catch (err) {
    await Promise.all(started.map((w) => w.shutdown()));
    if (own) storage.close();
    throw err;
  }
  const done = Promise.all(started.map((w) => w.done)).then(() => {
    if (own) storage.close();
  });
  // Once its workers poll (every queue of the process: the server refuses a version that does
  // not poll every queue the current one polls), the version can become current. A restarted
  // worker keeps its version: this runs once per process start.
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const promoted = version
    ? promoteVersion({ connection: () => started[0].connection(), namespace: opts.namespace, version, mode: opts.config.WORKER_VERSIONING_SET_CURRENT, stopped })
    : null;
  if (promoted) {
    const waited = await Promise.race([promoted, new Promise<null>((r) => setTimeout(() => r(null), PROMOTE_START_WAIT_MS).unref())]);
    if (!waited) logger.warn({ version: `${version!.deploymentName}.${version!.buildId}` }, 'worker version not current yet; still trying');
  }
  logger.info({ queues: queues.map((q) => q.name), namespace: opts.namespace, buildId: code.buildId, bundle: code.origin, versioning: version !== null }, 'temporal workers running');
  return {
    done,
    buildId: code.buildId,
    version,
    promoted,
    async shutdown() {
      stop();
      await Promise.all(started.map((w) => w.shutdown()));
      await done;
    },
  };
}
