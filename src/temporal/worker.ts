import path from 'node:path';
import { DefaultLogger, NativeConnection, Runtime, Worker, bundleWorkflowCode, type LogLevel, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { createActivities } from '../../activities';
import type { Config } from '../config';
import type { Db } from '../db/knex';
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

export async function startWorker(opts: { address: string; namespace: string; taskQueue: string; db: Db; config: Config }): Promise<RunningWorker> {
  installRuntime();
  const connection = await NativeConnection.connect({ address: opts.address });
  const worker = await Worker.create({
    connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowBundle: await workflowBundle(),
    activities: createActivities({ db: opts.db, config: opts.config }),
  });
  const done = worker.run().finally(() => connection.close());
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
