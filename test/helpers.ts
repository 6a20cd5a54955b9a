import crypto from 'node:crypto';
import http from 'node:http';
import type { Express } from 'express';
import pg from 'pg';
import request from 'supertest';
import { createApp, type AppWithRegistry } from '../src/app';
import { loadConfig, type Config } from '../src/config';
import { createDb, type Db } from '../src/db/knex';
import { answerClientError } from '../src/http/client-error';
import { Metrics } from '../src/http/metrics';
import { revokePublicConnect } from '../src/infra/embedded-postgres';
import { buildOpenApiDocument } from '../src/openapi/document';
import { prepareDatabase } from '../src/runtime';
import { SettingsStore } from '../src/settings/store';
import { connectTemporal, type TemporalHandle } from '../src/temporal/client';
import { taskQueues } from '../src/temporal/task-queues';
import type { RunningWorker } from '../src/temporal/worker';
import { startWorker } from '../src/worker-runtime';
import { ContractChecker } from './contract';

export const API_KEY = 'hf_test_key_0123456789abcdef';
export const API_SECRET = 'test-secret-0123456789-abcdefghij';
export const BASE = '/wp-json/wu/v2';

export interface TestContext {
  app: AppWithRegistry;
  db: Db;
  config: Config;
  settings: SettingsStore;
  temporal: TemporalHandle;
  metrics: Metrics;
  dbUrl: string;
  /** Authorization header value for the test credentials. */
  basic: string;
  /** supertest agent */
  http: ReturnType<typeof request>;
  /** Where the context's server listens (http://127.0.0.1:port), for clients other than supertest (a browser). */
  url: string;
  /** Responses that did not match the OpenAPI document (close() fails when there are any). */
  contract: ContractChecker;
  close(): Promise<void>;
}

/** A fresh database cloned from the migrated template, and an app wired to it. */
export async function createTestContext(env: Record<string, string> = {}): Promise<TestContext> {
  const adminUrl = process.env.HF_TEST_ADMIN_DB_URL!;
  const template = process.env.HF_TEST_TEMPLATE_DB!;
  const name = `hft_${process.env.HF_TEST_RUN_ID ?? '0'}_${crypto.randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  for (let attempt = 0; ; attempt++) {
    try {
      await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
      break;
    } catch (err) {
      // Two files cloning the template at the same moment can collide; try again.
      if (attempt >= 10) throw err;
      await new Promise((r) => setTimeout(r, 200 + Math.random() * 300));
    }
  }
  // As the embedded server does for hostflow's database: tenant roles made by the tests may not connect.
  await revokePublicConnect(admin, [name]);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const dbUrl = url.toString();

  const config = loadConfig({
    DATABASE_URL: dbUrl,
    TEMPORAL_ADDRESS: process.env.HF_TEST_TEMPORAL_ADDRESS,
    TEMPORAL_TASK_QUEUE: `hostflow-test-${name}`,
    WU_API_KEY: API_KEY,
    WU_API_SECRET: API_SECRET,
    LOG_LEVEL: 'silent',
    // Every test talks from 127.0.0.1 and many start chat sessions anonymously: the per-address
    // creation limit is tested on its own (chat-limits.test.ts) with a low value.
    CHAT_SESSION_CREATE_LIMIT: '1000000',
    WORKER_METRICS_PORT: process.env.WORKER_METRICS_PORT ?? '0',
    ...env,
  });
  const db = createDb(dbUrl, 5);
  const settings = await prepareDatabase(db, config);
  const temporal = await connectTemporal(config.TEMPORAL_ADDRESS!, config.TEMPORAL_NAMESPACE, config.TEMPORAL_TASK_QUEUE, taskQueues(config).bulk);
  const metrics = new Metrics(db);
  let document: Record<string, unknown> | undefined;
  const contract = new ContractChecker(() => (document ??= buildOpenApiDocument(app.locals.registry, { version: 'test' })));
  const app = createApp({ config, db, settings, temporal, metrics, observeResponse: (r) => contract.check(r) });
  // One listening server for the context's requests: one Host, so absolute links (a record's _links) are the same in every answer.
  const served = await serve(app);
  return {
    app,
    db,
    config,
    settings,
    temporal,
    metrics,
    dbUrl,
    basic: `Basic ${Buffer.from(`${API_KEY}:${API_SECRET}`).toString('base64')}`,
    http: served.http,
    url: served.url,
    contract,
    async close() {
      await served.stop();
      await temporal.connection.close();
      await db.destroy();
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
      if (contract.violations.length > 0) {
        throw new Error(`Responses that do not match the OpenAPI document:\n${[...new Set(contract.violations)].join('\n')}`);
      }
    },
  };
}

export interface Replica {
  app: AppWithRegistry;
  db: Db;
  http: ReturnType<typeof request>;
  close(): Promise<void>;
}

/**
 * A second API replica on the context's database, as another process would be: its own app,
 * pool, settings cache, limiters and listening server, the same configuration (and Temporal
 * connection), with `config` changed where given (e.g. a DATA_DIR of its own). Close it before
 * the context (whose close drops the database).
 */
export async function createReplica(ctx: TestContext, config: Partial<Config> = {}): Promise<Replica> {
  const db = createDb(ctx.dbUrl, 5);
  const settings = new SettingsStore(db);
  const metrics = new Metrics(db);
  const app = createApp({ config: { ...ctx.config, ...config }, db, settings, temporal: ctx.temporal, metrics, observeResponse: (r) => ctx.contract.check(r) });
  const served = await serve(app);
  return {
    app,
    db,
    http: served.http,
    async close() {
      await served.stop();
      await db.destroy();
    },
  };
}

/** The app on a listening server of its own; stop() closes it and the app's own connections (chat, Temporal gateway). */
async function serve(app: AppWithRegistry): Promise<{ http: ReturnType<typeof request>; url: string; stop(): Promise<void> }> {
  const server = http.createServer(app);
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    http: request(server),
    url: `http://127.0.0.1:${(server.address() as import('node:net').AddressInfo).port}`,
    async stop() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await app.locals.chat.close();
      app.locals.storage.close();
      app.locals.temporal.close();
    },
  };
}

let seq = 0;
/** A unique, valid new-customer body. */
/**
 * The statements `fn` sends on `db` (its query log) and its round trips to PostgreSQL (the
 * ReadyForQuery messages on the pool's idle connections; one is made idle first, so a write
 * takes one of them).
 */
export async function statementsAndTrips(db: Db, fn: () => Promise<unknown>): Promise<{ sql: string[]; trips: number }> {
  await db.raw('SELECT 1');
  const pool = (db.client as { pool: { free: { resource: { connection: NodeJS.EventEmitter } }[] } }).pool;
  const conns = pool.free.map((f) => f.resource.connection);
  const sql: string[] = [];
  let trips = 0;
  const tick = () => trips++;
  const listen = (q: { sql: string }) => sql.push(q.sql);
  for (const c of conns) c.on('readyForQuery', tick);
  db.on('query', listen);
  try {
    await fn();
  } finally {
    db.off('query', listen);
    for (const c of conns) c.off('readyForQuery', tick);
  }
  return { sql, trips };
}

export function newCustomerBody(extra: Record<string, unknown> = {}) {
  seq += 1;
  const tag = `${process.pid}${seq}${crypto.randomBytes(2).toString('hex')}`;
  return { username: `user${tag}`, email: `user${tag}@example.com`, password: 'secret123', ...extra };
}

/** Temporal protos (a history, a description) as text with every payload decoded, as an operator reads them in the UI. */
export function decodedJson(value: unknown): string {
  return JSON.stringify(value, function (this: Record<string, unknown>, key, v) {
    // Protos serialize payload bytes as base64 next to their metadata.
    if (key === 'data' && typeof v === 'string' && this && 'metadata' in this) return Buffer.from(v, 'base64').toString('utf8');
    return v;
  });
}

/** A worker for the context's own task queue and database (its workflows, its activities). */
export function startTestWorker(ctx: Pick<TestContext, 'config' | 'db'>): Promise<RunningWorker> {
  return startWorker({ address: ctx.config.TEMPORAL_ADDRESS!, namespace: ctx.config.TEMPORAL_NAMESPACE, taskQueue: ctx.config.TEMPORAL_TASK_QUEUE, db: ctx.db, config: ctx.config });
}
