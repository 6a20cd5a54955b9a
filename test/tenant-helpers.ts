import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { makeCustomer, waitFor } from './estate-helpers';
import { BASE, type TestContext } from './helpers';

/** Environment for a test file that isolates tenants: its own key, data and tenant folders. */
export function tenantEnv(extra: Record<string, string> = {}): Record<string, string> {
  const dir = path.resolve(__dirname, '..', '.tmp', `tenants-${process.pid}-${crypto.randomBytes(4).toString('hex')}`);
  fs.mkdirSync(dir, { recursive: true });
  return { TENANT_CREDENTIALS_KEY: crypto.randomBytes(32).toString('hex'), DATA_DIR: dir, TENANT_FILES_ROOT: path.join(dir, 'tenant-roots'), TENANT_WAIT_SECONDS: '30', ...extra };
}

/** A customer's site (its options and first posts are seeded by the site rules). */
export async function makeSite(ctx: TestContext): Promise<{ siteId: number; customerId: number; userId: number }> {
  const customerId = await makeCustomer(ctx);
  const domain = `t${crypto.randomBytes(5).toString('hex')}.example.com`;
  const res = await ctx.http.post(`${BASE}/sites`).set('Authorization', ctx.basic).send({ title: 'Tenant Site', domain, customer_id: customerId });
  if (res.status !== 200) throw new Error(`site: ${res.status} ${JSON.stringify(res.body)}`);
  const customer = await ctx.db('customers').where({ id: customerId }).first('user_id');
  return { siteId: res.body.id, customerId, userId: Number(customer.user_id) };
}

export async function status(ctx: TestContext, siteId: number) {
  return ctx.http.get(`${BASE}/tenants/${siteId}/migration-status`).set('Authorization', ctx.basic);
}

/** Polls migration-status until the tenant is no longer in `busyState`. */
export async function settled(ctx: TestContext, siteId: number, busyState = 'bootstrapping', timeoutMs = 60_000) {
  return waitFor(
    () => status(ctx, siteId),
    (r) => r.status !== 200 || r.body.state !== busyState,
    timeoutMs,
  );
}

/** The admin connection URL of the test server, for another database (or as another role). */
export function serverUrl(database: string, login?: { user: string; password: string }): string {
  const u = new URL(process.env.HF_TEST_ADMIN_DB_URL!);
  u.pathname = `/${database}`;
  if (login) {
    u.username = login.user;
    u.password = login.password;
  }
  return u.toString();
}

export async function onServer<T>(database: string, fn: (c: pg.Client) => Promise<T>, login?: { user: string; password: string }): Promise<T> {
  const c = new pg.Client({ connectionString: serverUrl(database, login) });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export async function serverHas(kind: 'database' | 'role', name: string): Promise<boolean> {
  const sql = kind === 'database' ? 'SELECT 1 FROM pg_database WHERE datname = $1' : 'SELECT 1 FROM pg_roles WHERE rolname = $1';
  return onServer('postgres', async (c) => (await c.query(sql, [name])).rowCount === 1);
}
