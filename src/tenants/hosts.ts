import type { Config } from '../config';
import type { Db } from '../db/knex';

/** A PostgreSQL server tenant databases can be placed on, with an admin connection URL. */
export interface TenantDbHost {
  name: string;
  /** Admin URL (a role that may create databases and roles), database part ignored. */
  url: string;
}

/** `name=url` pairs (or bare URLs, named host:port), comma-separated. */
export function parseTenantHosts(spec: string): TenantDbHost[] {
  const hosts: TenantDbHost[] = [];
  for (const part of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    const hasName = eq > 0 && !part.slice(0, eq).includes('://');
    const url = hasName ? part.slice(eq + 1).trim() : part;
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new Error(`TENANT_DATABASE_HOSTS: "${url}" is not a URL`);
    }
    if (!/^postgres(ql)?:$/.test(parsed.protocol)) throw new Error(`TENANT_DATABASE_HOSTS: "${url}" is not a postgres:// URL`);
    const name = hasName ? part.slice(0, eq).trim() : `${parsed.hostname}:${parsed.port || '5432'}`;
    if (!/^[A-Za-z0-9_.:-]{1,100}$/.test(name)) throw new Error(`TENANT_DATABASE_HOSTS: bad host name "${name}"`);
    if (hosts.some((h) => h.name === name)) throw new Error(`TENANT_DATABASE_HOSTS: host "${name}" is listed twice`);
    hosts.push({ name, url });
  }
  if (!hosts.length) throw new Error('TENANT_DATABASE_HOSTS lists no host');
  return hosts;
}

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
