import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { OutboundAllowList } from '../config';

/**
 * The one HTTP client for URLs the server fetches on someone's behalf (POT files, GlotPress
 * exports, the AI provider). It refuses addresses inside the network (loopback, private,
 * link-local, metadata services...) unless allow-listed, checks them on the address actually
 * connected to (the check runs inside the connection's DNS lookup, so a name cannot resolve
 * to a public address for a check and to a private one for the connection), follows redirects
 * itself re-checking every hop, caps the body while it streams and bounds the whole exchange
 * in time. node:http(s) and not fetch/undici: their `lookup` option is the hook that binds the
 * check to the connection, and undici is not a dependency.
 *
 * Error messages never quote what the other side sent: they say what failed (refused address,
 * DNS, connection, size, time, redirect), so nothing read from an internal service can reach
 * an API answer.
 */

export type OutboundErrorKind = 'invalid_url' | 'refused' | 'dns' | 'connect' | 'timeout' | 'too_large' | 'redirect' | 'aborted';

export class OutboundError extends Error {
  constructor(
    readonly kind: OutboundErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'OutboundError';
  }

  /** Whether asking again later may succeed (network trouble) or not (the target is refused or too big). */
  get retryable(): boolean {
    return this.kind === 'dns' || this.kind === 'connect' || this.kind === 'timeout';
  }
}

// ---- address classification --------------------------------------------------------------------

type Range = { bytes: number[]; prefix: number; label: string };

function range(cidr: string, label: string): Range {
  const [address, prefix] = cidr.split('/');
  return { bytes: addressBytes(address)!, prefix: Number(prefix), label };
}

/** Special-purpose IPv4 blocks (IANA registry) that are not public destinations. */
const V4_REFUSED: Range[] = [
  range('0.0.0.0/8', 'unspecified'),
  range('10.0.0.0/8', 'private'),
  range('100.64.0.0/10', 'shared (CGNAT)'),
  range('127.0.0.0/8', 'loopback'),
  range('169.254.0.0/16', 'link-local'),
  range('172.16.0.0/12', 'private'),
  range('192.0.0.0/24', 'reserved'),
  range('192.0.2.0/24', 'documentation'),
  range('192.88.99.0/24', 'reserved'),
  range('192.168.0.0/16', 'private'),
  range('198.18.0.0/15', 'benchmarking'),
  range('198.51.100.0/24', 'documentation'),
  range('203.0.113.0/24', 'documentation'),
  range('224.0.0.0/4', 'multicast'),
  range('240.0.0.0/4', 'reserved'),
];

/** IPv6 forms that carry an IPv4 address the packet ends up at: the IPv4 address decides. */
const V6_EMBEDDING: { range: Range; at: number }[] = [
  { range: range('::ffff:0:0/96', 'IPv4-mapped'), at: 12 },
  { range: range('::ffff:0:0:0/96', 'IPv4-translated'), at: 12 },
  { range: range('64:ff9b::/96', 'NAT64'), at: 12 },
  { range: range('2002::/16', '6to4'), at: 2 },
];

const V6_REFUSED: Range[] = [
  range('::/128', 'unspecified'),
  range('::1/128', 'loopback'),
  range('::/96', 'reserved'), // IPv4-compatible (deprecated)
  range('64:ff9b:1::/48', 'private'), // local-use NAT64
  range('100::/64', 'reserved'), // discard-only
  range('2001::/32', 'reserved'), // Teredo
  range('2001:2::/48', 'benchmarking'),
  range('2001:10::/28', 'reserved'),
  range('2001:db8::/32', 'documentation'),
  range('3fff::/20', 'documentation'),
  range('5f00::/16', 'reserved'),
  range('fc00::/7', 'unique-local'),
  range('fe80::/10', 'link-local'),
  range('fec0::/10', 'site-local'),
  range('ff00::/8', 'multicast'),
];
/** Global unicast: anything outside it (and not listed above) is reserved. */
const V6_GLOBAL = range('2000::/3', 'global');

/** 4 or 16 bytes of an IP address, or null when it is not one. */
export function addressBytes(ip: string): number[] | null {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = net.isIP(bare);
  if (family === 4) return bare.split('.').map(Number);
  if (family !== 6) return null;
  let text = bare;
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    tail.push(...dotted[1].split('.').map(Number));
    text = `${text.slice(0, -dotted[1].length)}0:0`;
  }
  const [head, rest] = text.split('::');
  const groups = (s: string | undefined) => (s ? s.split(':').filter((g) => g !== '') : []);
  const left = groups(head);
  const right = rest === undefined ? [] : groups(rest);
  const fill = rest === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  const bytes = [...left, ...fill, ...right].flatMap((g) => {
    const n = Number.parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

function inRange(bytes: number[], r: Range): boolean {
  if (bytes.length !== r.bytes.length) return false;
  let bits = r.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((bytes[i] & mask) !== (r.bytes[i] & mask)) return false;
  }
  return true;
}

/**
 * Why an address is not a public destination ("loopback", "private", "link-local",
 * "loopback via IPv4-mapped"...), or null when it is one.
 */
export function refusedAddressKind(ip: string): string | null {
  const bytes = addressBytes(ip);
  if (!bytes) return 'not an IP address';
  if (bytes.length === 4) return V4_REFUSED.find((r) => inRange(bytes, r))?.label ?? null;
  for (const { range: r, at } of V6_EMBEDDING) {
    if (!inRange(bytes, r)) continue;
    const inner = refusedAddressKind(bytes.slice(at, at + 4).join('.'));
    return inner ? `${inner} via ${r.label}` : null;
  }
  const listed = V6_REFUSED.find((r) => inRange(bytes, r));
  if (listed) return listed.label;
  return inRange(bytes, V6_GLOBAL) ? null : 'reserved';
}

// ---- the allow-list ------------------------------------------------------------------------------

/** OUTBOUND_ALLOWED_HOSTS, ready to ask: host names (and *.suffix) and networks. */
export class OutboundPolicy {
  private readonly nets = new net.BlockList();

  constructor(private readonly allow: OutboundAllowList = { hosts: [], networks: [] }) {
    for (const n of allow.networks) this.nets.addSubnet(n.address, n.prefix, n.family);
  }

  hostAllowed(host: string): boolean {
    const h = host.toLowerCase().replace(/\.$/, '');
    return this.allow.hosts.some((a) => (a.startsWith('*.') ? h.endsWith(a.slice(1)) : h === a));
  }

  /** Why the address is refused (null: it may be connected to). */
  addressRefusal(ip: string): string | null {
    const kind = refusedAddressKind(ip);
    if (!kind) return null;
    const bare = ip.replace(/%.*$/, '');
    return this.nets.check(bare, net.isIP(bare) === 6 ? 'ipv6' : 'ipv4') ? null : kind;
  }
}

/** A URL as error messages may show it: without user name and password. */
export function urlForMessages(raw: string): string {
  try {
    const u = new URL(raw);
    u.username = '';
    u.password = '';
    return u.href;
  } catch {
    return raw;
  }
}

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
}

function refused(host: string, kind: string, resolved = false): OutboundError {
  const what = resolved ? `${host} resolves to a ${kind} address` : `${host} is a ${kind} address`;
  return new OutboundError('refused', `${what}, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).`);
}

/**
 * What is wrong with a URL before any DNS: not http(s), or a literal address (or a
 * `localhost` name) that is refused. Null when it may be fetched (names are checked when
 * they are resolved, at fetch time).
 */
export function urlRefusal(policy: OutboundPolicy, raw: string): OutboundError | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return new OutboundError('invalid_url', 'is not a valid URL.');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return new OutboundError('invalid_url', 'must be an http or https URL.');
  const host = hostOf(url);
  if (policy.hostAllowed(host)) return null;
  if (net.isIP(host)) {
    const kind = policy.addressRefusal(host);
    return kind ? refused(host, kind) : null;
  }
  // RFC 6761: localhost names are loopback whatever DNS says.
  if (host === 'localhost' || host.endsWith('.localhost')) return policy.addressRefusal('127.0.0.1') ? refused(host, 'loopback') : null;
  return null;
}

// ---- the fetch -------------------------------------------------------------------------------------

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;
/** dns.lookup's shape (a test passes one that asks its own DNS server). */
export type Lookup = (hostname: string, options: dns.LookupOptions, callback: LookupCallback) => void;

export interface OutboundRequest {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** Largest body read; more is an OutboundError('too_large'). */
  maxBytes: number;
  /** The whole exchange, redirects and body included. */
  timeoutMs: number;
  maxRedirects?: number;
  signal?: AbortSignal;
  lookup?: Lookup;
}

export interface OutboundResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Headers that must not follow a redirect to another origin. */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];

/** The connection's lookup: every address a name resolves to is checked before one is used. */
/**
 * A `lookup` for a connection (http, https, tls, net) that refuses the addresses the policy
 * refuses, so the check binds to the address actually connected to.
 */
export function checkedLookup(policy: OutboundPolicy, host: string, base: Lookup = dns.lookup as unknown as Lookup): Lookup {
  const skip = policy.hostAllowed(host);
  return (hostname, options, callback) => {
    base(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const list = addresses as dns.LookupAddress[];
      const bad = skip ? undefined : list.map((a) => policy.addressRefusal(a.address)).find(Boolean);
      if (bad) return callback(refused(host, bad, true), []);
      if (options.all) return callback(null, list);
      callback(null, list[0].address, list[0].family);
    });
  };
}

function networkError(err: NodeJS.ErrnoException): OutboundError {
  const code = err.code ?? err.name;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'ENODATA') return new OutboundError('dns', `the host name could not be resolved (${code}).`);
  return new OutboundError('connect', `the connection failed (${code}).`);
}

/**
 * Fetches a URL under the policy. Any status is answered (the caller decides what a 404 means);
 * a refused address, a redirect loop, a body over the cap or the deadline throw OutboundError.
 */
export async function outboundFetch(policy: OutboundPolicy, rawUrl: string, req: OutboundRequest): Promise<OutboundResponse> {
  const early = urlRefusal(policy, rawUrl);
  if (early) throw early;
  const maxRedirects = req.maxRedirects ?? 5;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new OutboundError('timeout', `no complete answer within ${Math.round(req.timeoutMs / 100) / 10} s.`)), req.timeoutMs);
  const onCancel = () => deadline.abort(new OutboundError('aborted', 'the request was cancelled.'));
  req.signal?.addEventListener('abort', onCancel, { once: true });

  let url = new URL(rawUrl);
  let method = req.method ?? 'GET';
  let body = req.body;
  const headers: Record<string, string> = { 'accept-encoding': 'identity', 'user-agent': 'hostflow', ...lowerKeys(req.headers ?? {}) };
  const lookup = req.lookup ?? (dns.lookup as unknown as Lookup);
  try {
    for (let hop = 0; ; hop++) {
      const res = await send(policy, url, method, headers, body, lookup, deadline.signal);
      const location = res.headers.location;
      if (!REDIRECTS.has(res.statusCode ?? 0) || !location) return { status: res.statusCode ?? 0, headers: res.headers, body: await readCapped(res, req.maxBytes) };
      res.destroy();
      if (hop >= maxRedirects) throw new OutboundError('redirect', `more than ${maxRedirects} redirects.`);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new OutboundError('redirect', 'a redirect pointed to an invalid URL.');
      }
      const refusal = urlRefusal(policy, next.href);
      if (refusal) throw new OutboundError(refusal.kind === 'invalid_url' ? 'redirect' : refusal.kind, `a redirect was refused: ${refusal.message}`);
      if (next.origin !== url.origin) for (const h of CREDENTIAL_HEADERS) delete headers[h];
      if (res.statusCode === 303 || ((res.statusCode === 301 || res.statusCode === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      url = next;
    }
  } catch (err) {
    // Aborting surfaces as a socket error: the deadline (or the cancellation) is the real reason.
    if (deadline.signal.aborted) throw deadline.signal.reason;
    throw err instanceof OutboundError ? err : networkError(err as NodeJS.ErrnoException);
  } finally {
    clearTimeout(timer);
    req.signal?.removeEventListener('abort', onCancel);
  }
}

function lowerKeys(h: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
}

function send(policy: OutboundPolicy, url: URL, method: string, headers: Record<string, string>, body: string | undefined, lookup: Lookup, signal: AbortSignal): Promise<http.IncomingMessage> {
  const host = hostOf(url);
  const mod = url.protocol === 'https:' ? https : http;
  const h = { ...headers };
  if (body !== undefined) h['content-length'] = String(Buffer.byteLength(body));
  else delete h['content-type'];
  return new Promise((resolve, reject) => {
    // agent: false: a fresh connection per request, so no pooled socket skips the lookup.
    const r = mod.request(url, { method, headers: h, agent: false, lookup: checkedLookup(policy, host, lookup) as net.LookupFunction, signal }, resolve);
    r.on('error', reject);
    r.end(body);
  });
}

async function readCapped(res: http.IncomingMessage, maxBytes: number): Promise<Buffer> {
  const tooLarge = () => new OutboundError('too_large', `the answer is larger than ${maxBytes} bytes.`);
  if (Number(res.headers['content-length']) > maxBytes) {
    res.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      res.destroy();
      throw tooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
