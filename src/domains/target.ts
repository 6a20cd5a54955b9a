import { isIP, isIPv4 } from 'node:net';
import type { SettingsStore } from '../settings/store';

/** The DNS record a mapped domain needs. */
export interface DnsRecord {
  type: 'A' | 'AAAA' | 'CNAME';
  name: string;
  value: string;
}

/** An IP address in the text resolvers answer (IPv6 compressed, lower case); null for a host name. */
export function canonicalIp(value: string): string | null {
  if (isIPv4(value)) return value;
  if (isIP(value) === 6) return new URL(`http://[${value}]`).hostname.slice(1, -1);
  return null;
}

/**
 * What mapped domains must point to: DOMAIN_MAPPING_TARGET when set, else the network's host
 * name (the setting network_domain), read when asked so a changed setting counts at once.
 */
export class MappingTarget {
  constructor(
    private readonly configured: string | undefined,
    private readonly settings: SettingsStore,
  ) {}

  async value(): Promise<string> {
    return this.configured ?? String((await this.settings.get<string>('network_domain')) ?? 'localhost').toLowerCase();
  }
}

/** An IP address target is an A or AAAA record of that address; a host name, a CNAME to it. */
export function requiredRecord(domain: string, target: string): DnsRecord {
  const ip = canonicalIp(target);
  if (ip === null) return { type: 'CNAME', name: domain, value: target };
  return { type: isIPv4(ip) ? 'A' : 'AAAA', name: domain, value: ip };
}

export const recordText = (r: DnsRecord) => `${r.name} ${r.type} ${r.value}`;
