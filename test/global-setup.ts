/**
 * Starts what the suite needs, once per run:
 * - PostgreSQL: TEST_DATABASE_URL (a server where we may create databases) when set,
 *   otherwise an embedded server in .tmp/test-pg-<pid> on a free port (removed afterwards);
 * - a template database migrated once (each test file clones it);
 * - Temporal: TEMPORAL_ADDRESS when set, otherwise `temporal server start-dev` on free ports;
 * - the console's and the chat widget's builds (dist/web/console, dist/web/widget), when older than their sources.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { createDb } from '../src/db/knex';
import { migrateLatest } from '../src/db/migrate';
import { revokePublicConnect, startEmbeddedPostgres } from '../src/infra/embedded-postgres';
import { findTemporalBinary, freePort, startTemporalDevServer, TEMPORAL_MISSING } from '../src/infra/temporal-server';
import { buildConsoleIfStale, buildWidgetIfStale } from './web-build';

export default async function globalSetup(): Promise<void> {
  const root = path.resolve(__dirname, '..');
  const tmp = path.join(root, '.tmp');
  fs.mkdirSync(tmp, { recursive: true });
  const g = globalThis as Record<string, unknown>;

  buildConsoleIfStale();
  buildWidgetIfStale();

  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    // One folder per run, so runs side by side do not share a server.
    const dir = path.join(tmp, `test-pg-${process.pid}`);
    fs.rmSync(dir, { recursive: true, force: true });
    g.__HF_PG_DIR__ = dir;
    const server = await startEmbeddedPostgres(dir, await freePort());
    g.__HF_PG__ = server;
    adminUrl = server.url('postgres');
  }
  const template = `hf_template_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${template}`);
  await admin.query(`CREATE DATABASE ${template}`);
  await revokePublicConnect(admin, [template]);
  await admin.end();
  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${template}`;
  const db = createDb(templateUrl.toString(), 2);
  await migrateLatest(db);
  await db.destroy();

  let temporalAddress = process.env.TEMPORAL_ADDRESS;
  if (!temporalAddress) {
    const binary = findTemporalBinary(process.env.TEMPORAL_CLI, root);
    if (!binary) throw new Error(TEMPORAL_MISSING);
    const server = await startTemporalDevServer({ binary, port: await freePort(), logFile: path.join(tmp, `temporal-test-${process.pid}.log`), timeoutMs: 90_000 });
    g.__HF_TEMPORAL__ = server;
    temporalAddress = server.address;
  }

  process.env.HF_TEST_ADMIN_DB_URL = adminUrl;
  process.env.HF_TEST_TEMPLATE_DB = template;
  // Test databases of this run are hft_<run id>_<random>: the teardown drops only those, so
  // runs sharing one server (TEST_DATABASE_URL) never drop each other's databases.
  process.env.HF_TEST_RUN_ID = String(process.pid);
  process.env.HF_TEST_TEMPORAL_ADDRESS = temporalAddress;
}
