import type http from 'node:http';
import type { Duplex } from 'node:stream';
import pg from 'pg';
import { WebSocketServer, WebSocket } from 'ws';
import type { Db } from '../db/knex';
import { logger } from '../logger';
import type { ChatSecret, RealtimeClaims } from './tokens';

/**
 * The realtime channel: one WebSocket per client and session, fed through PostgreSQL
 * LISTEN/NOTIFY, so an event published by any process (an API replica, a worker activity)
 * reaches the sockets of every process. Each process keeps one LISTEN connection; while it is
 * down the channel counts as unavailable (new sessions then fall back to a ticket) and events
 * are still delivered to this process' own sockets. Polling the messages route always works.
 */
export const CHANNEL = 'hostflow_chat_events';
/** NOTIFY payloads must stay under 8000 bytes; larger events travel as a reference. */
const MAX_INLINE = 7000;

export interface ChatEvent {
  type: 'message' | 'session';
  session_id: number;
  [k: string]: unknown;
}

/** Publish from anywhere with a database handle (the worker's activities use this too). */
export async function notifyChatEvent(db: Db, event: ChatEvent, ref?: { message_id: number }): Promise<void> {
  let payload = JSON.stringify(event);
  if (Buffer.byteLength(payload) > MAX_INLINE && ref) payload = JSON.stringify({ type: 'message_ref', session_id: event.session_id, message_id: ref.message_id });
  await db.raw('select pg_notify(?, ?)', [CHANNEL, payload]);
}

export class ChatRealtime {
  private readonly sockets = new Map<number, Set<WebSocket>>();
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  private listener: pg.Client | null = null;
  private listening = false;
  private closing = false;
  private retry: NodeJS.Timeout | null = null;
  private started = false;
  /** Wait before reconnecting a dropped LISTEN connection. */
  retryMs = 1000;

  constructor(
    private readonly opts: {
      db: Db;
      connectionString: string | undefined;
      enabled: boolean;
      /** Path of the WebSocket endpoint, e.g. /wp-json/ultimate-multisite-support-tickets/v1/chat/realtime */
      path: string;
      /**
       * Browser origins allowed to open the socket (CHAT_ALLOWED_ORIGINS; `*` for any). A request
       * without an Origin header (not a browser) is let through: the signed token authenticates it.
       */
      allowedOrigins: string[];
      /** Whether a Host header names this server (PUBLIC_URL's host, else ALLOWED_HOSTS): its own pages may open the socket. */
      ownHost: (host: string) => boolean;
      secret: ChatSecret;
      /** Loads a message (for events too large to travel inline). */
      loadMessage: (id: number) => Promise<unknown>;
    },
  ) {}

  /** Starts the LISTEN connection (idempotent). */
  start(): void {
    if (this.started || !this.opts.enabled) return;
    this.started = true;
    void this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closing || !this.opts.connectionString) return;
    const client = new pg.Client({ connectionString: this.opts.connectionString, application_name: 'hostflow-chat-listen' });
    this.listener = client;
    const down = (err?: Error) => {
      if (this.listener !== client) return;
      this.listening = false;
      this.listener = null;
      client.removeAllListeners('notification');
      client.end().catch(() => undefined);
      if (this.closing) return;
      if (err) logger.warn({ err: err.message }, 'chat realtime listener down; retrying');
      this.retry = setTimeout(() => void this.connect(), this.retryMs);
      this.retry.unref();
    };
    client.on('error', down);
    client.on('end', () => down());
    client.on('notification', (msg) => {
      if (msg.channel !== CHANNEL || !msg.payload) return;
      void this.onPayload(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      if (this.listener === client) this.listening = true;
    } catch (err) {
      down(err as Error);
    }
  }

  /** True when messages reach every process' sockets (the channel is on and LISTEN is up). */
  available(): boolean {
    return this.opts.enabled && this.listening;
  }

  /** Waits (up to `ms`) for the LISTEN connection; for startup and tests. */
  async ready(ms = 5000): Promise<boolean> {
    this.start();
    const until = Date.now() + ms;
    while (!this.available() && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return this.available();
  }

  private async onPayload(payload: string): Promise<void> {
    try {
      let event = JSON.parse(payload) as ChatEvent | { type: 'message_ref'; session_id: number; message_id: number };
      if (event.type === 'message_ref') {
        const ref = event as { session_id: number; message_id: number };
        if (!this.sockets.has(ref.session_id)) return;
        event = { type: 'message', session_id: ref.session_id, message: await this.opts.loadMessage(ref.message_id) };
      }
      this.deliver(event as ChatEvent);
    } catch (err) {
      logger.warn({ err }, 'bad chat event');
    }
  }

  private deliver(event: ChatEvent): void {
    const set = this.sockets.get(event.session_id);
    if (!set) return;
    const data = JSON.stringify(event);
    for (const ws of set) if (ws.readyState === WebSocket.OPEN) ws.send(data);
  }

  /** Publishes an event of a session to every connected client, in every process. */
  async publish(event: ChatEvent, ref?: { message_id: number }): Promise<void> {
    if (!this.opts.enabled) return;
    if (this.listening) {
      try {
        await notifyChatEvent(this.opts.db, event, ref);
        return;
      } catch (err) {
        logger.warn({ err }, 'chat NOTIFY failed; delivering locally');
      }
    }
    this.deliver(event);
  }

  connections(sessionId?: number): number {
    if (sessionId !== undefined) return this.sockets.get(sessionId)?.size ?? 0;
    let n = 0;
    for (const s of this.sockets.values()) n += s.size;
    return n;
  }

  /** Serves the WebSocket endpoint on `server` (upgrade requests to opts.path, ?token=<realtime token>). */
  attach(server: http.Server): void {
    this.start();
    server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (url.pathname !== this.opts.path && url.pathname !== `${this.opts.path}/`) {
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        return;
      }
      const refuse = (status: string) => socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      if (!this.opts.enabled) return refuse('503 Service Unavailable');
      // Cross-site WebSocket hijacking: browsers send Origin on every WebSocket handshake and
      // CORS does not apply to it, so a page of another site is refused here, before the token
      // is even looked at.
      if (!this.originAllowed(req.headers.origin, req.headers.host)) return refuse('403 Forbidden');
      const token = url.searchParams.get('token') ?? '';
      this.opts.secret
        .verifyRealtime(token)
        .then((claims) => {
          if (!claims) return refuse('401 Unauthorized');
          this.wss.handleUpgrade(req, socket, head, (ws) => this.register(ws, claims));
        })
        .catch(() => refuse('500 Internal Server Error'));
    });
  }

  /**
   * No Origin (a non-browser client), `*` in the list, an origin of the list (case-insensitive),
   * or a page of this very server: the Origin's host is the Host the browser connected to, and
   * that Host is ours (PUBLIC_URL's, or in ALLOWED_HOSTS, so a rebound DNS name does not count).
   * So the chat's demo page and the console need no entry of their own, as refuseCrossSite lets
   * same-origin requests through. A page elsewhere cannot make its Origin name our host.
   */
  originAllowed(origin: string | undefined, host?: string): boolean {
    if (origin === undefined) return true;
    const list = this.opts.allowedOrigins;
    if (list.includes('*')) return true;
    const o = origin.trim().replace(/\/$/, '').toLowerCase();
    const h = host?.trim().toLowerCase();
    if (h && URL.canParse(o) && new URL(o).host === h && this.opts.ownHost(h)) return true;
    return list.some((allowed) => allowed.toLowerCase() === o);
  }

  private register(ws: WebSocket, claims: RealtimeClaims): void {
    const id = claims.session_id;
    let set = this.sockets.get(id);
    if (!set) this.sockets.set(id, (set = new Set()));
    set.add(ws);
    const remove = () => {
      set!.delete(ws);
      if (set!.size === 0 && this.sockets.get(id) === set) this.sockets.delete(id);
    };
    ws.on('close', remove);
    ws.on('error', remove);
    ws.on('message', (data) => {
      // Clients only ping; messages are posted through the REST route.
      if (String(data) === '{"type":"ping"}' || String(data) === 'ping') ws.send(JSON.stringify({ type: 'pong' }));
    });
    ws.send(JSON.stringify({ type: 'ready', session_id: id, role: claims.role }));
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.retry) clearTimeout(this.retry);
    for (const set of this.sockets.values()) for (const ws of set) ws.terminate();
    this.sockets.clear();
    this.wss.close();
    const l = this.listener;
    this.listener = null;
    this.listening = false;
    if (l) await l.end().catch(() => undefined);
  }
}
