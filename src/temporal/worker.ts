import path from 'node:path';
import { DefaultLogger, NativeConnection, Runtime, Worker, bundleWorkflowCode, type LogLevel, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createActivities } from '../../activities';
import type { Config } from '../config';
import type { Db } from '../db/knex';
import { createObjectStorage, type ObjectStorage } from '../infra/object-storage';
import { logger } from '../logger';

export interface RunningWorker {
  worker: Worker;
  /** Resolves when the worker has stopped. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

export function workflowsPath(): string {
  return require.resolve(path.join(__dirname, '..', '..', 'workflows'));
}

let runtimeInstalled = false;
/** The SDK's own log lines go through our logger, at warn and above unless LOG_LEVEL asks for more. */
function installRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const level: LogLevel = logger.levelVal <= 20 ? 'DEBUG' : 'WARN';
  Runtime.install({
    logger: new DefaultLogger(level, (entry) => {
      const fn = entry.level === 'ERROR' ? 'error' : entry.level === 'WARN' ? 'warn' : 'debug';
      logger[fn]({ component: 'temporal-sdk', ...entry.meta }, entry.message);
    }),
  });
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;
/** The workflow bundle is built once per process. */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  installRuntime();
  bundle ??= bundleWorkflowCode({
    workflowsPath: workflowsPath(),
    logger: { info: () => undefined, debug: () => undefined, trace: () => undefined, log: () => undefined, warn: (m, meta) => logger.warn(meta ?? {}, m), error: (m, meta) => logger.error(meta ?? {}, m) },
  });
  return bundle;
}

/**
 * What one worker process may hold, stated rather than left to the SDK's defaults (which size
 * the workflow cache from the V8 heap limit: about 2,300 workflows on a 4 GB heap). All
 * workflows run in ONE reused V8 context (`reuseV8Context`, the SDK's default since 1.9, set
 * here so it stays so): each cached workflow costs its own state, not a context of its own.
 * Past WORKER_MAX_CACHED_WORKFLOWS the least recently used is evicted and replayed from its
 * history when its next task comes. Activities share the process's database pool
 * (DB_POOL_MAX), so more of them at once than that only wait for a connection.
 */
export function workerBounds(config: Pick<Config, 'WORKER_MAX_CACHED_WORKFLOWS' | 'WORKER_MAX_WORKFLOW_TASKS' | 'WORKER_MAX_ACTIVITIES' | 'WORKER_MAX_LOCAL_ACTIVITIES'>) {
  return {
    reuseV8Context: true,
    maxCachedWorkflows: config.WORKER_MAX_CACHED_WORKFLOWS,
    // The SDK refuses fewer than 2 workflow task slots with a cache.
    maxConcurrentWorkflowTaskExecutions: config.WORKER_MAX_WORKFLOW_TASKS,
    maxConcurrentActivityTaskExecutions: config.WORKER_MAX_ACTIVITIES,
    maxConcurrentLocalActivityExecutions: config.WORKER_MAX_LOCAL_ACTIVITIES,
  };
}

/**
 * `storage`: the process's shared file storage; when not given, one is built from the config
 * and closed when the worker stops.
 */
export async function startWorker(opts: { address: string; namespace: string; taskQueue: string; db: Db; config: Config; storage?: ObjectStorage }): Promise<RunningWorker> {
  installRuntime();
  const storage = opts.storage ?? createObjectStorage(opts.config);
  const own = !opts.storage;
  const connection = await NativeConnection.connect({ address: opts.address });
  const worker = await Worker.create({
    connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowBundle: await workflowBundle(),
    activities: createActivities({ db: opts.db, config: opts.config, storage }),
    ...workerBounds(opts.config),
  });
  const done = worker.run().finally(async () => {
    await connection.close();
    if (own) storage.close();
  });
  logger.info({ taskQueue: opts.taskQueue, namespace: opts.namespace }, 'temporal worker running');
  return {
    worker,
    done,
    async shutdown() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}
