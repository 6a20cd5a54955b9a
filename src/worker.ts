/** `npm run start:worker`: the Temporal worker alone, against DATABASE_URL and TEMPORAL_ADDRESS. */
import { ConfigError, loadConfig } from './config';
import { logger, setLogLevel } from './logger';
import { onShutdown, openDb } from './runtime';
import { connectTemporal } from './temporal/client';
import { taskQueues } from './temporal/task-queues';
import { startWorker } from './temporal/worker';
import { startTenantPushRelay } from './tenants/push-relay';

const steps: (() => Promise<unknown>)[] = [];
const shutdown = onShutdown(steps);

async function main() {
  const config = loadConfig();
  setLogLevel(config.LOG_LEVEL);
  if (!config.DATABASE_URL || !config.TEMPORAL_ADDRESS) {
    throw new ConfigError('start:worker needs DATABASE_URL and TEMPORAL_ADDRESS (use `npm start` for the all-in-one service).');
  }
  if (!config.TENANT_CREDENTIALS_KEY) {
    logger.warn('TENANT_CREDENTIALS_KEY is not set: tenant bootstraps on this worker will fail at the database step until it is');
  }
  const db = openDb(config.DATABASE_URL, config);
  steps.push(() => db.destroy());
  const worker = await startWorker({ address: config.TEMPORAL_ADDRESS, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, db, config });
  steps.push(() => worker.shutdown());
  // The tenant push outbox relay runs beside the worker (every replica; the workflow id dedups).
  const temporal = await connectTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, taskQueues(config).bulk);
  steps.push(() => temporal.connection.close());
  const relay = startTenantPushRelay({ db, temporal });
  steps.push(() => relay.stop());
  await worker.done;
}

main().catch(async (err) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else logger.fatal({ err }, 'worker failed');
  // Stop what was started before the failure, then exit 1.
  await shutdown('worker failed', 1);
});
