/** `npm run start:worker`: the Temporal worker alone, against DATABASE_URL and TEMPORAL_ADDRESS. */
import { ConfigError, loadConfig } from './config';
import { logger, setLogLevel } from './logger';
import { onShutdown, openDb } from './runtime';
import { lazyTemporal } from './temporal/client';
import { taskQueues } from './temporal/task-queues';
import { startRelays, startWorker } from './worker-runtime';

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
  // The outbox relays run beside the worker (every replica), and work while Temporal is down (they retry).
  const temporal = lazyTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, taskQueues(config).bulk);
  steps.push(() => temporal.connection.close());
  const relays = startRelays(db, temporal, config);
  steps.push(() => relays.stop());
  // Temporal not there yet (a deploy that starts everything at once): tried again with backoff.
  const worker = await startWorker({ address: config.TEMPORAL_ADDRESS, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, db, config, retryFirstStart: true });
  steps.push(() => worker.shutdown());
  await worker.done;
}

main().catch(async (err) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else logger.fatal({ err }, 'worker failed');
  // Stop what was started before the failure, then exit 1.
  await shutdown('worker failed', 1);
});
