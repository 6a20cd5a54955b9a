import crypto from 'node:crypto';
import pg from 'pg';
import { databaseUrl, type TenantDbHost } from './hosts';

/**
 * What a tenant database holds and how it is reached. Everything here talks to a tenant
 * database host directly (short-lived connections): as the host's admin to create, grant
 * and drop; as the tenant role for the tenant's own reads and writes.
 */

/** Tables of a tenant database and the privileges its role needs on each. */
export const TENANT_TABLES = ['users', 'site_options', 'site_posts', 'login_keys', 'push_probe', 'hostflow_tenant'] as const;
export const TENANT_PRIVILEGES: Record<(typeof TENANT_TABLES)[number], readonly string[]> = {
  users: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  site_options: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  site_posts: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  login_keys: ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
  push_probe: ['SELECT', 'INSERT', 'DELETE'],
  hostflow_tenant: ['SELECT'],
};
export const TENANT_SCHEMA_VERSION = '1';

/** The site's own data: shared table -> the columns moved (ids are the network's). */
export const SITE_DATA = {
  site_options: ['id', 'name', 'value'],
  site_posts: ['id', 'post_type', 'title', 'content', 'status', 'author_id', 'date_created', 'date_modified'],
} as const;
export type SiteDataTable = keyof typeof SITE_DATA;
export const SITE_DATA_TABLES = Object.keys(SITE_DATA) as SiteDataTable[];

const SCHEMA_DDL = `
CREATE TABLE IF NOT EXISTS users (
  id bigint PRIMARY KEY,
  username text NOT NULL,
  email text NOT NULL,
  display_name text NOT NULL DEFAULT '',
  password_hash text NOT NULL,
  role text NOT NULL,
  is_admin boolean NOT NULL DEFAULT false,
  date_provisioned timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS users_username_uq ON users (lower(username));
CREATE TABLE IF NOT EXISTS site_options (
  id bigint PRIMARY KEY,
  name text NOT NULL UNIQUE,
  value text NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS site_posts (
  id bigint PRIMARY KEY,
  post_type text NOT NULL DEFAULT 'post',
  title text NOT NULL DEFAULT '',
  content text NOT NULL DEFAULT '',
  status text NOT NULL DEFAULT 'publish',
  author_id bigint,
  date_created timestamptz NOT NULL DEFAULT now(),
  date_modified timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS login_keys (
  id uuid PRIMARY KEY,
  user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  key_sha256 bytea NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS push_probe (
  id uuid PRIMARY KEY,
  written_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS hostflow_tenant (
  key text PRIMARY KEY,
  value text NOT NULL
);
`;

export const ident = (name: string) => pg.escapeIdentifier(name);

/** Runs `fn` with a connection to `database` on `host` (as its admin, or as `login`). */
export async function withClient<T>(host: TenantDbHost, database: string, fn: (c: pg.Client) => Promise<T>, login?: { user: string; password: string }): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl(host.url, database, login), application_name: 'hostflow-tenants', connectionTimeoutMillis: 10_000 });
  // A connection that drops while idle must not crash the process.
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The admin database of a host (the one its URL names, `postgres` by default). */
export function adminDatabase(host: TenantDbHost): string {
  const name = decodeURIComponent(new URL(host.url).pathname.replace(/^\//, ''));
  return name || 'postgres';
}

export const withAdmin = <T>(host: TenantDbHost, fn: (c: pg.Client) => Promise<T>) => withClient(host, adminDatabase(host), fn);

/**
 * A SCRAM-SHA-256 verifier for `password`, so the plain password never travels in SQL
 * (PostgreSQL stores a pre-hashed secret as it is).
 */
export function scramVerifier(password: string): string {
  const salt = crypto.randomBytes(16);
  const iterations = 4096;
  const salted = crypto.pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = crypto.createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = crypto.createHash('sha256').update(clientKey).digest();
  const serverKey = crypto.createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

export async function roleExists(c: pg.Client, role: string): Promise<boolean> {
  return (await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role])).rowCount! > 0;
}

export async function databaseExists(c: pg.Client, database: string): Promise<boolean> {
  return (await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])).rowCount! > 0;
}

/**
 * The role (login, no other powers) and the database, which only that role (and the admin)
 * may connect to. Safe to run again: an existing role gets the password again.
 */
export async function createRoleAndDatabase(host: TenantDbHost, role: string, database: string, password: string): Promise<void> {
  await withAdmin(host, async (c) => {
    const verifier = pg.escapeLiteral(scramVerifier(password));
    if (await roleExists(c, role)) {
      await c.query(`ALTER ROLE ${ident(role)} WITH LOGIN PASSWORD ${verifier}`);
    } else {
      try {
        await c.query(`CREATE ROLE ${ident(role)} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION CONNECTION LIMIT 20 PASSWORD ${verifier}`);
      } catch (err) {
        // Another attempt created it in between: set the password again.
        if ((err as { code?: string }).code !== '42710') throw err;
        await c.query(`ALTER ROLE ${ident(role)} WITH LOGIN PASSWORD ${verifier}`);
      }
    }
    if (!(await databaseExists(c, database))) {
      try {
        await c.query(`CREATE DATABASE ${ident(database)} TEMPLATE template0 ENCODING 'UTF8'`);
      } catch (err) {
        if ((err as { code?: string }).code !== '42P04') throw err;
      }
    }
    // Every database lets PUBLIC connect by default; this one only its role.
    await c.query(`REVOKE ALL ON DATABASE ${ident(database)} FROM PUBLIC`);
    await c.query(`GRANT CONNECT, TEMPORARY ON DATABASE ${ident(database)} TO ${ident(role)}`);
  });
}

/** Tables, grants and the tenant's identity, in one transaction. Safe to run again. */
export async function createSchema(host: TenantDbHost, database: string, role: string, siteId: number): Promise<void> {
  await withClient(host, database, async (c) => {
    await c.query('BEGIN');
    try {
      await c.query(SCHEMA_DDL);
      await c.query('REVOKE ALL ON SCHEMA public FROM PUBLIC');
      await c.query(`GRANT USAGE ON SCHEMA public TO ${ident(role)}`);
      for (const table of TENANT_TABLES) {
        await c.query(`REVOKE ALL ON ${ident(table)} FROM PUBLIC`);
        await c.query(`GRANT ${TENANT_PRIVILEGES[table].join(', ')} ON ${ident(table)} TO ${ident(role)}`);
      }
      await c.query(
        `INSERT INTO hostflow_tenant (key, value) VALUES ('site_id', $1), ('schema_version', $2)
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
        [String(siteId), TENANT_SCHEMA_VERSION],
      );
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
}

/** Tables of the tenant schema that are missing. */
export async function missingTables(c: pg.Client): Promise<string[]> {
  const { rows } = await c.query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
  const present = new Set(rows.map((r) => r.table_name));
  return TENANT_TABLES.filter((t) => !present.has(t));
}

/** Privileges the role should have and lacks, as "INSERT on site_posts". */
export async function missingPrivileges(c: pg.Client, role: string): Promise<string[]> {
  const missing: string[] = [];
  const { rows } = await c.query<{ ok: boolean }>("SELECT has_schema_privilege($1, 'public', 'USAGE') AS ok", [role]);
  if (!rows[0]?.ok) missing.push('USAGE on schema public');
  for (const table of TENANT_TABLES) {
    for (const privilege of TENANT_PRIVILEGES[table]) {
      const r = await c.query<{ ok: boolean }>('SELECT has_table_privilege($1, $2, $3) AS ok', [role, `public.${table}`, privilege]);
      if (!r.rows[0]?.ok) missing.push(`${privilege} on ${table}`);
    }
  }
  return missing;
}

export interface TenantUser {
  id: number;
  username: string;
  email: string;
  display_name: string;
  password_hash: string;
  role: string;
  is_admin: boolean;
}

/** Makes the tenant's users exactly `users` (inserted, updated, others removed). */
export async function syncUsers(c: pg.Client, users: TenantUser[]): Promise<void> {
  await c.query('BEGIN');
  try {
    await c.query('DELETE FROM users WHERE NOT (id = ANY($1::bigint[]))', [users.map((u) => u.id)]);
    for (const u of users) {
      await c.query(
        `INSERT INTO users (id, username, email, display_name, password_hash, role, is_admin) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (id) DO UPDATE SET username = EXCLUDED.username, email = EXCLUDED.email, display_name = EXCLUDED.display_name,
           password_hash = EXCLUDED.password_hash, role = EXCLUDED.role, is_admin = EXCLUDED.is_admin, date_provisioned = now()`,
        [u.id, u.username, u.email, u.display_name, u.password_hash, u.role, u.is_admin],
      );
    }
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** Upserts rows of one of the site's tables (keyed by the network id). */
export async function upsertRows(c: pg.Client, table: SiteDataTable, rows: Record<string, unknown>[]): Promise<void> {
  if (!rows.length) return;
  const columns = SITE_DATA[table];
  const values: unknown[] = [];
  const tuples = rows.map((row) => `(${columns.map((col) => `$${values.push(row[col] ?? null)}`).join(', ')})`);
  const updates = columns.filter((c) => c !== 'id').map((col) => `${ident(col)} = EXCLUDED.${ident(col)}`);
  await c.query(`INSERT INTO ${ident(table)} (${columns.map(ident).join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT (id) DO UPDATE SET ${updates.join(', ')}`, values);
}

/**
 * Logs a tenant user in through the tenant role with a one-time login key: the key's hash
 * is stored, then looked up by user name and compared in constant time, then spent.
 */
export async function authenticateWithLoginKey(c: pg.Client, username: string): Promise<{ ok: true } | { ok: false; reason: string }> {
  const { rows } = await c.query<{ id: number; is_admin: boolean }>('SELECT id, is_admin FROM users WHERE lower(username) = lower($1)', [username]);
  if (!rows.length) return { ok: false, reason: `user ${username} is not in the tenant database` };
  if (!rows[0].is_admin) return { ok: false, reason: `user ${username} is not an administrator in the tenant database` };
  const key = crypto.randomBytes(24).toString('base64url');
  const keyId = crypto.randomUUID();
  const digest = crypto.createHash('sha256').update(key).digest();
  await c.query("INSERT INTO login_keys (id, user_id, key_sha256, expires_at) VALUES ($1, $2, $3, now() + interval '1 minute')", [keyId, rows[0].id, digest]);
  try {
    const found = await c.query<{ key_sha256: Buffer; live: boolean }>(
      'SELECT k.key_sha256, k.expires_at > now() AS live FROM login_keys k JOIN users u ON u.id = k.user_id WHERE k.id = $1 AND lower(u.username) = lower($2)',
      [keyId, username],
    );
    const stored = found.rows[0];
    const presented = crypto.createHash('sha256').update(key).digest();
    if (!stored || !stored.live || !crypto.timingSafeEqual(stored.key_sha256, presented)) return { ok: false, reason: `login of ${username} with a one-time key was refused` };
    return { ok: true };
  } finally {
    await c.query('DELETE FROM login_keys WHERE id = $1', [keyId]);
  }
}

/** Ends the sessions of a role (before it or its database is dropped). */
export async function terminateSessions(c: pg.Client, opts: { role?: string; database?: string }): Promise<void> {
  if (opts.role) await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()', [opts.role]);
  if (opts.database) await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [opts.database]);
}
