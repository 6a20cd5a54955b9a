/**
 * `npm start`: the whole service in one process tree with embedded defaults: PostgreSQL
 * (embedded unless DATABASE_URL), the Temporal dev server (unless TEMPORAL_ADDRESS),
 * migrations, the Temporal worker and the API.
 */
import fs from 'node:fs';
import path from 'node:path';
import { chatNamespace, ConfigError, loadConfig, WU_NAMESPACE } from './config';
import { createObjectStorage } from './infra/object-storage';
import { findTemporalBinary, startTemporalDevServer, TEMPORAL_MISSING } from './infra/temporal-server';
import { logger, setLogLevel } from './logger';
import { onShutdown, openDb, prepareDatabase, resolveDatabase, startHttp } from './runtime';
import { lazyTemporal } from './temporal/client';
import { taskQueues } from './temporal/task-queues';
import { startRelays, startWorker } from './worker-runtime';

const steps: (() => Promise<unknown>)[] = [];
const shutdown = onShutdown(steps);

async function main() {
  // Tenant credentials need a key; in the all-in-one service it is kept beside the data.
  const config = loadConfig(process.env, { credentialsKeyInDataDir: true });
  setLogLevel(config.LOG_LEVEL);
  fs.mkdirSync(config.DATA_DIR, { recursive: true });

  const database = await resolveDatabase(config, true);
  if (database.embedded) steps.push(() => database.embedded!.stop());

  let temporalAddress = config.TEMPORAL_ADDRESS;
  let uiUrl: string | null = null;
  if (!temporalAddress) {
    const binary = findTemporalBinary(config.TEMPORAL_CLI);
    if (!binary) throw new Error(TEMPORAL_MISSING);
    const server = await startTemporalDevServer({
      binary,
      port: config.TEMPORAL_DEV_PORT,
      uiPort: config.TEMPORAL_UI_PORT,
      dbFile: path.join(config.DATA_DIR, 'temporal.sqlite'),
      namespace: config.TEMPORAL_NAMESPACE,
      logFile: path.join(config.DATA_DIR, 'temporal.log'),
      // Killed or crashed, it is started again on the same port and SQLite file; the worker and the API reconnect.
      supervise: true,
      pidFile: path.join(config.DATA_DIR, 'temporal.pid'),
    });
    steps.push(() => server.stop());
    temporalAddress = server.address;
    uiUrl = server.uiUrl;
  }

  const db = openDb(database.url, config);
  steps.push(() => db.destroy());
  const settings = await prepareDatabase(db, config);

  // Connected on first use: with an external TEMPORAL_ADDRESS that is down, the API still starts.
  const temporal = lazyTemporal(temporalAddress, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, taskQueues(config).bulk);
  steps.push(() => temporal.connection.close());
  // One file storage for the worker and the API of this process.
  const storage = createObjectStorage(config);
  steps.push(async () => storage.close());
  const relays = startRelays(db, temporal, config);
  steps.push(() => relays.stop());
  // The dev server started above is there: the worker polls before "hostflow is up" is printed.
  // An external TEMPORAL_ADDRESS may be down: the worker then keeps trying in the background.
  const worker = await startWorker({ address: temporalAddress, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, db, config, storage, retryFirstStart: uiUrl === null });
  steps.push(() => worker.shutdown());
  // The console links workflows to the dev server's UI when no other is configured.
  const http = await startHttp({ ...config, TEMPORAL_UI_URL: config.TEMPORAL_UI_URL ?? uiUrl ?? undefined }, db, settings, temporal, undefined, storage);
  steps.push(() => http.close());

  const base = `${config.PUBLIC_URL?.replace(/\/$/, '') ?? `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${config.PORT}`}`;
  process.stdout.write(
    `\nhostflow is up.\n` +
      `  API base URL: ${base}${config.REST_PREFIX}/${WU_NAMESPACE}/\n` +
      `  Support chat: ${base}${config.REST_PREFIX}/${chatNamespace(config)}/ (WebSocket: …/chat/realtime)\n` +
      `  API reference: ${base}/docs (OpenAPI document: ${base}${config.REST_PREFIX}/${WU_NAMESPACE}/openapi.json)\n` +
      `  Console:      ${base}/console/ (sign in with the API key and secret, or an agent token)\n` +
      `  Temporal UI:  ${uiUrl ?? `(external Temporal at ${temporalAddress})`}\n` +
      `  Data folder:  ${config.DATA_DIR}\n` +
      `Press Ctrl-C to stop.\n\n`,
  );
}

main().catch(async (err) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else logger.fatal({ err }, 'start failed');
  // Stop what was started before the failure, then exit 1.
  await shutdown('start failed', 1);
});
