/** `npm run start:api`: the HTTP API alone, against DATABASE_URL and TEMPORAL_ADDRESS. */
import { ConfigError, loadConfig } from './config';
import { logger, setLogLevel } from './logger';
import { onShutdown, openDb, prepareDatabase, startHttp } from './runtime';
import { lazyTemporal } from './temporal/client';
import { taskQueues } from './temporal/task-queues';

const steps: (() => Promise<unknown>)[] = [];
const shutdown = onShutdown(steps);

async function main() {
  const config = loadConfig();
  setLogLevel(config.LOG_LEVEL);
  if (!config.DATABASE_URL || !config.TEMPORAL_ADDRESS) {
    throw new ConfigError('start:api needs DATABASE_URL and TEMPORAL_ADDRESS (use `npm start` for the all-in-one service).');
  }
  const db = openDb(config.DATABASE_URL, config);
  steps.push(() => db.destroy());
  const settings = await prepareDatabase(db, config);
  // Connected on first use: the API serves (and /readyz says Temporal is unreachable) while Temporal is down.
  const temporal = lazyTemporal(config.TEMPORAL_ADDRESS, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, taskQueues(config).bulk);
  steps.push(() => temporal.connection.close());
  const http = await startHttp(config, db, settings, temporal);
  steps.push(() => http.close());
  logger.info({ host: config.HOST, port: config.PORT }, 'API listening');
}

main().catch(async (err) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else logger.fatal({ err }, 'start failed');
  // Stop what was started before the failure, then exit 1.
  await shutdown('start failed', 1);
});
