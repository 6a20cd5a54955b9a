import type { Express, Request } from 'express';
import type { Config } from '../config';
import { logger } from '../logger';

type PublicUrlConfig = Pick<Config, 'PUBLIC_URL' | 'ALLOWED_HOSTS' | 'HOST' | 'PORT'>;
type Resolver = (req: Request) => string;

/** A Host header that is a host name or an IP literal, with an optional port (linear: no nested quantifiers). */
const HOST_HEADER = /^([a-z0-9._-]+|\[[0-9a-f:.]+\])(:\d{1,5})?$/i;

/** Whether `host` (name[:port], lower-case) is in the allow-list; an entry without a port allows any port. */
export function hostAllowed(host: string, allowed: readonly string[]): boolean {
  if (host.length > 260 || !HOST_HEADER.test(host)) return false;
  const h = host.toLowerCase();
  const name = h.replace(/:\d+$/, '');
  return allowed.some((entry) => {
    const hasPort = /:\d+$/.test(entry);
    const subject = hasPort ? h : name;
    if (entry.startsWith('*.')) return subject.endsWith(entry.slice(1)) && subject.length > entry.length - 1;
    return subject === entry;
  });
}

/** Where links point when PUBLIC_URL is unset and the Host is not allowed: the listening address. */
export function defaultPublicBase(config: Pick<Config, 'HOST' | 'PORT'>): string {
  const wildcard = config.HOST === '0.0.0.0' || config.HOST === '::' || config.HOST === '[::]';
  const host = wildcard ? '127.0.0.1' : config.HOST.includes(':') && !config.HOST.startsWith('[') ? `[${config.HOST}]` : config.HOST;
  return `http://${host}:${config.PORT}`;
}

/**
 * The one place absolute links (Link headers, index url/home, paging, status and realtime
 * URLs) get their scheme and host: PUBLIC_URL when set; otherwise the request's Host (or
 * X-Forwarded-Host behind a trusted proxy) only when ALLOWED_HOSTS lists it, so a forged Host
 * never reaches a link a cache or a client could keep; otherwise the listening address.
 */
export function publicBaseResolver(config: PublicUrlConfig): Resolver {
  if (config.PUBLIC_URL) {
    const fixed = config.PUBLIC_URL.replace(/\/+$/, '');
    return () => fixed;
  }
  const fallback = defaultPublicBase(config);
  let warned = false;
  // The allow-list's answer for each Host seen (a few regular expressions per entry), bounded: a
  // client sending ever new Hosts only makes the check run again.
  const allowed = new Map<string, boolean>();
  const isAllowed = (host: string) => {
    let ok = allowed.get(host);
    if (ok === undefined) {
      ok = hostAllowed(host, config.ALLOWED_HOSTS);
      if (allowed.size < 1000) allowed.set(host, ok);
    }
    return ok;
  };
  return (req) => {
    const host = req.host;
    if (host && isAllowed(host)) return `${req.protocol}://${host.toLowerCase()}`;
    if (!warned) {
      warned = true;
      logger.warn({ host: String(host ?? '').slice(0, 100), links_use: fallback }, 'Host header not in ALLOWED_HOSTS: links use the default address (set PUBLIC_URL or ALLOWED_HOSTS)');
    }
    return fallback;
  };
}

/** Installs the app's resolver (createApp does, once). */
export function setPublicBase(app: Express, config: PublicUrlConfig): void {
  app.locals.publicBase = publicBaseResolver(config);
}

/** The public base URL (scheme://host[:port], no trailing slash) for links in this request's answer. */
export function publicBase(req: Request): string {
  const resolve = req.app.locals.publicBase as Resolver | undefined;
  if (!resolve) throw new Error('publicBase: the app has no resolver (setPublicBase)');
  return resolve(req);
}

/** The origin (scheme://host[:port]) of the public base URL, as browsers send it in Origin. */
export function publicOrigin(req: Request): string {
  return new URL(publicBase(req)).origin;
}
