/**
 * The console's only way to the server: the public APIs, wu/v2 (admins, HTTP Basic with the API
 * key and secret) and the support chat (agents, their Bearer token; admins with Basic too).
 * Errors come back in the contract's shape ({code, message, data:{status}}) and are turned
 * into sentences a person can act on.
 */

export const WU = '/wp-json/wu/v2';
export const CHAT = '/wp-json/ultimate-multisite-support-tickets/v1';

export type Credentials = { role: 'admin'; key: string; secret: string } | { role: 'agent'; token: string };

/** Who is signed in: their credentials and what the server said about them. */
export interface Session {
  credentials: Credentials;
  /** The site's name (admins) or the agent's name. */
  name: string;
  /** An agent's id and whether they are an admin agent (may use the chat's admin routes). */
  agentId?: number;
  isAdminAgent?: boolean;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly data: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** A failure in words: what went wrong and, where the API says, which fields. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError && err.status === 401 && err.code === 'rest_forbidden') {
    return 'The server no longer accepts your credentials (they were changed, revoked or the agent disabled): sign out and sign in again.';
  }
  if (err instanceof ApiError) {
    const params = err.data.params;
    const details = params && typeof params === 'object' ? Object.entries(params as Record<string, string>).map(([k, v]) => `${k}: ${v}`) : [];
    const retry = typeof err.data.retry_after === 'number' ? ` Try again in ${err.data.retry_after} s.` : '';
    return [err.message + retry, ...details].join('\n');
  }
  if (err instanceof TypeError) return 'The server could not be reached. Check your connection and try again.';
  return err instanceof Error ? err.message : String(err);
}

function authorization(credentials: Credentials): string {
  if (credentials.role === 'agent') return `Bearer ${credentials.token}`;
  // btoa takes Latin-1 only: encode the UTF-8 bytes first.
  const bytes = new TextEncoder().encode(`${credentials.key}:${credentials.secret}`);
  return `Basic ${btoa(String.fromCharCode(...bytes))}`;
}

export interface Page<T> {
  items: T[];
  total: number | null;
  totalPages: number | null;
  /** The API's own rel="next" link (with its cursor), or null on the last page. */
  next: string | null;
  prev: string | null;
}

function links(header: string | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of header?.split(',') ?? []) {
    const m = /<([^>]+)>\s*;\s*rel="([^"]+)"/.exec(part);
    if (m) out[m[2]] = m[1];
  }
  return out;
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  /** A multipart body (a file upload) instead of JSON. */
  form?: FormData;
  signal?: AbortSignal;
  /** Sent as Idempotency-Key on writes (wu/v2 takes one; a retried click then does not act twice). */
  idempotencyKey?: string;
}

export class Api {
  constructor(readonly credentials: Credentials) {}

  private async send(url: string, options: RequestOptions = {}): Promise<globalThis.Response> {
    const headers: Record<string, string> = { Accept: 'application/json', Authorization: authorization(this.credentials) };
    let body: string | FormData | undefined;
    if (options.form) body = options.form;
    else if (options.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    if (options.idempotencyKey) headers['Idempotency-Key'] = options.idempotencyKey;
    const res = await fetch(url, { method: options.method ?? 'GET', headers, body, signal: options.signal, credentials: 'omit', cache: 'no-store' });
    if (!res.ok) throw await errorOf(res);
    return res;
  }

  async json<T>(url: string, options?: RequestOptions): Promise<T> {
    return (await (await this.send(url, options)).json()) as T;
  }

  /** A page of a list: the items and what the paging headers say. */
  async page<T>(url: string, options?: RequestOptions): Promise<Page<T>> {
    const res = await this.send(url, options);
    const total = res.headers.get('X-WP-Total');
    const pages = res.headers.get('X-WP-TotalPages');
    const rel = links(res.headers.get('Link'));
    return {
      items: (await res.json()) as T[],
      total: total === null ? null : Number(total),
      totalPages: pages === null ? null : Number(pages),
      next: rel.next ?? null,
      prev: rel.prev ?? null,
    };
  }

  /** A file the API serves (an attachment, downloaded with the caller's credentials). */
  async blob(url: string, signal?: AbortSignal): Promise<Blob> {
    return (await this.send(url, { signal })).blob();
  }

  wu<T>(path: string, options?: RequestOptions): Promise<T> {
    return this.json<T>(`${WU}${path}`, options);
  }

  chat<T>(path: string, options?: RequestOptions): Promise<T> {
    return this.json<T>(`${CHAT}${path}`, options);
  }
}

async function errorOf(res: globalThis.Response): Promise<ApiError> {
  let body: { code?: string; message?: string; data?: Record<string, unknown> } = {};
  try {
    body = (await res.json()) as typeof body;
  } catch {
    // Not JSON (a proxy's page): the status says enough.
  }
  const message = body.message ?? `The server answered ${res.status} ${res.statusText}.`;
  return new ApiError(res.status, body.code ?? `http_${res.status}`, message, body.data ?? {});
}

/** Same-origin path of an absolute URL the API gave (links carry the public base). */
export function localPath(url: string): string {
  const u = new URL(url, location.href);
  return u.origin === location.origin ? `${u.pathname}${u.search}` : url;
}

/**
 * Signs in: the credentials are tried against the API (admins: GET /auth; agents: the chat's
 * agent list, which names the caller), and nothing is kept unless they work.
 */
export async function signIn(credentials: Credentials): Promise<Session> {
  const api = new Api(credentials);
  try {
    if (credentials.role === 'admin') {
      const auth = await api.wu<{ label: string | null }>('/auth');
      return { credentials, name: auth.label || 'Administrator' };
    }
    const id = /^hfa_(\d+)_/.exec(credentials.token)?.[1];
    const availability = await api.chat<{ agents: { id: number; name: string; is_admin?: boolean }[] }>('/chat/agent/availability');
    const me = availability.agents.find((a) => String(a.id) === id);
    return { credentials, name: me?.name ?? 'Agent', agentId: me ? me.id : undefined, isAdminAgent: me?.is_admin ?? false };
  } catch (err) {
    // 401: wrong credentials; 403 for a token that is no agent's (a customer's). Other refusals
    // (the API switched off: 403 wu_rest_api_disabled; throttled: 429) keep the API's own words.
    if (err instanceof ApiError && (err.status === 401 || (credentials.role === 'agent' && err.status === 403))) {
      // A plain Error: its message is the whole story (describeError words ApiErrors for signed-in callers).
      throw new Error(
        credentials.role === 'admin'
          ? 'These credentials were refused: check the API key and secret (npm run cli -- credentials refresh makes new ones).'
          : 'This agent token was refused: it is wrong, replaced or the agent is disabled. Ask an admin for a new token.',
      );
    }
    throw err;
  }
}

const STORAGE_KEY = 'hostflow.console.session';

/** The session lives in sessionStorage only: closing the browser tab forgets the credentials. */
export function loadSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as Session) : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session | null): void {
  if (session) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
  else sessionStorage.removeItem(STORAGE_KEY);
}

/** A key for one user action (the same action retried keeps it). */
export function newIdempotencyKey(): string {
  return `console-${crypto.randomUUID()}`;
}
