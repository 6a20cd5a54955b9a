// TENANT_DATABASE_HOSTS, parsed when the config loads (src/tenants/hosts.ts places tenants on them).

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
