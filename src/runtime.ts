/**
 * The composition root's start-up shared by every entry point: the database, the HTTP server and
 * the shutdown. What only a worker process runs (its Temporal workers with their activities, the
 * relays) is in worker-runtime.ts, so that `npm run start:api` never loads the worker SDK, its
 * native core bridge or the activities.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import pg from 'pg';
import { createApp } from './app';
import type { Config } from './config';
import { startIdBoundsFolding } from './db/id-bounds';
import { createDb, type Db } from './db/knex';
import { migrateLatest } from './db/migrate';
import { warmSearchTrigrams } from './db/search-trigrams';
import { answerClientError } from './http/client-error';
import { Metrics } from './http/metrics';
import { startEmbeddedPostgres, type EmbeddedPg } from './infra/embedded-postgres';
import type { ObjectStorage } from './infra/object-storage';
import { logger } from './logger';
import { SettingsStore } from './settings/store';
import type { TemporalHandle } from './temporal/client';

export const EMBEDDED_DB_NAME = 'hostflow';

/**
 * The database to use: DATABASE_URL when set; otherwise the embedded server under
 * DATA_DIR/postgres, reused when it is already running (e.g. by `npm start`), started here
 * when `startIfDown`.
 */
export async function resolveDatabase(config: Config, startIfDown: boolean): Promise<{ url: string; embedded: EmbeddedPg | null }> {
  if (config.DATABASE_URL) return { url: config.DATABASE_URL, embedded: null };
  const dir = path.join(config.DATA_DIR, 'postgres');
  const passwordFile = path.join(dir, 'pg-password');
  if (fs.existsSync(passwordFile)) {
    const password = fs.readFileSync(passwordFile, 'utf8').trim();
    const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${config.EMBEDDED_PG_PORT}/${EMBEDDED_DB_NAME}`;
    const probe = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    const up = await probe.connect().then(
      () => true,
      () => false,
    );
    await probe.end().catch(() => undefined);
    if (up) return { url, embedded: null };
  }
  if (!startIfDown) {
    throw new Error('DATABASE_URL is not set and the embedded PostgreSQL is not running (start it with `npm start`).');
  }
  const embedded = await startEmbeddedPostgres(dir, config.EMBEDDED_PG_PORT);
  await embedded.ensureDatabase(EMBEDDED_DB_NAME);
  return { url: embedded.url(EMBEDDED_DB_NAME), embedded };
}

/** Migrate and make sure API credentials exist; prints them when this start created them. */
export async function prepareDatabase(db: Db, config: Config): Promise<SettingsStore> {
  const applied = await migrateLatest(db);
  if (applied.length) logger.info({ migrations: applied }, 'migrations applied');
  const settings = new SettingsStore(db);
  const created = await settings.ensureCredentials({ key: config.WU_API_KEY, secret: config.WU_API_SECRET });
  if (created?.generated) {
    // Shown once, on the terminal only (never through the logger).
    process.stdout.write(
      `\nGenerated API credentials (shown only now; rotate with \`npm run cli -- credentials refresh\`):\n` +
        `  API key:    ${created.key}\n  API secret: ${created.secret}\n\n`,
    );
  }
  return settings;
}

/** `storage`: the process's shared file storage; when not given, one is built from the config and closed with the server. */
export async function startHttp(config: Config, db: Db, settings: SettingsStore, temporal: TemporalHandle | null, metrics = new Metrics(db), storage?: ObjectStorage) {
  const app = createApp({ config, db, settings, temporal, metrics, storage });
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  // Unparseable requests (a URL over 16 KiB included) get a JSON error, not Node's empty one.
  server.on('clientError', answerClientError);
  // The support chat's WebSocket channel (upgrade requests on the same port).
  app.locals.chat.attach(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.PORT, config.HOST, () => resolve());
  });
  // The searched tables' common trigrams, read (and sampled when stale) before the first search.
  void warmSearchTrigrams(db, app.locals.searchTables);
  // The hours' id bounds that date ranges start their pages from, folded now and then.
  const stopFolding = startIdBoundsFolding(db);
  return {
    server,
    async close() {
      stopFolding();
      await app.locals.chat.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 5000).unref();
      });
      if (!storage) app.locals.storage.close();
    },
  };
}

export function openDb(url: string, config: Config): Db {
  return createDb(url, config.DB_POOL_MAX);
}

/** Runs `steps` in reverse order on SIGINT/SIGTERM, once; a second signal exits at once. */
/**
 * Stops what a process started, in reverse order, on SIGINT/SIGTERM (exit 0) or when the
 * returned function is called (a start that failed half way: exit with its code), so a failed
 * start never leaves a Temporal dev server or an embedded PostgreSQL running behind it.
 */
export function onShutdown(steps: (() => Promise<unknown>)[]): (reason: string, code?: number) => Promise<void> {
  let stopping = false;
  const shutdown = async (reason: string, code = 0) => {
    if (stopping) process.exit(code || 1);
    stopping = true;
    logger.info({ reason }, 'shutting down');
    for (const step of [...steps].reverse()) {
      try {
        await step();
      } catch (err) {
        logger.error({ err }, 'shutdown step failed');
      }
    }
    process.exit(code);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  return shutdown;
}
