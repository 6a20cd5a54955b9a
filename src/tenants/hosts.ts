import type { Config } from '../config';
import { parseTenantHosts, type TenantDbHost } from '../config/tenant-hosts';
import type { Db } from '../db/knex';

export type { TenantDbHost };

/** The connection string the service's own pool uses. */
export function mainDatabaseUrl(db: Db): string {
  const conn = (db.client as { config: { connection: unknown } }).config.connection;
  const url = typeof conn === 'string' ? conn : (conn as { connectionString?: string }).connectionString;
  if (!url) throw new Error('the main database connection has no connection string');
  return url;
}

/** The configured tenant hosts, or the main database's server. */
export function tenantHosts(config: Pick<Config, 'TENANT_DATABASE_HOSTS'>, db: Db): TenantDbHost[] {
  if (config.TENANT_DATABASE_HOSTS) return parseTenantHosts(config.TENANT_DATABASE_HOSTS);
  const main = new URL(mainDatabaseUrl(db));
  return [{ name: `${main.hostname}:${main.port || '5432'}`, url: main.toString() }];
}

/** The same server, another database (and optionally another role). */
export function databaseUrl(hostUrl: string, database: string, login?: { user: string; password: string }): string {
  const u = new URL(hostUrl);
  u.pathname = `/${database}`;
  if (login) {
    u.username = encodeURIComponent(login.user);
    u.password = encodeURIComponent(login.password);
  }
  return u.toString();
}
