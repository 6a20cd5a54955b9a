import type { ChatApi, Message, Realtime, Session } from './api';

export type Mode = 'connecting' | 'live' | 'polling';

export interface LiveHandlers {
  message(m: Message): void;
  status(status: Session['status'], ticketId?: number | null): void;
  mode(mode: Mode): void;
}

/** How long a socket may take to say `ready` before the widget polls instead. */
const READY_TIMEOUT_MS = 5000;
const PING_MS = 25_000;
const MAX_RETRY_MS = 60_000;

/**
 * A session's messages as they arrive: over the realtime WebSocket when it connects, otherwise
 * by polling the messages route every poll_interval_seconds (the API's rule: polling always
 * works). A dropped socket is retried with a fresh realtime token (backoff up to a minute),
 * polling meanwhile; every (re)connection first catches up by one poll, so nothing sent while
 * the socket was down is missed. Messages are handed out by id; the caller drops repeats.
 */
export class Live {
  private after = 0;
  private socket: WebSocket | null = null;
  private pollTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private pingTimer: ReturnType<typeof setInterval> | undefined;
  private retryMs = 2000;
  private stopped = false;
  private polling = false;
  private lastStatus: Session['status'] | null = null;

  constructor(
    private readonly api: ChatApi,
    private readonly sessionId: number,
    private pollSeconds: number,
    private readonly handlers: LiveHandlers,
    private readonly useSocket: boolean,
  ) {}

  start(realtime: Realtime | null): void {
    if (this.useSocket && realtime && typeof WebSocket === 'function') this.connect(realtime);
    else this.startPolling();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.pollTimer);
    clearTimeout(this.retryTimer);
    clearInterval(this.pingTimer);
    this.socket?.close();
    this.socket = null;
  }

  /** Messages after the cursor, now (also after the customer posts, when polling). */
  async poll(): Promise<void> {
    let more = true;
    while (more && !this.stopped) {
      const page = await this.api.messages(this.sessionId, this.after);
      for (const m of page.messages) this.take(m);
      this.after = Math.max(this.after, page.next_after);
      this.pollSeconds = page.poll_interval_seconds || this.pollSeconds;
      this.statusIs(page.session_status);
      more = page.has_more;
    }
  }

  take(m: Message): void {
    this.after = Math.max(this.after, m.id);
    this.handlers.message(m);
  }

  private statusIs(status: Session['status'], ticketId?: number | null): void {
    if (status === this.lastStatus && ticketId === undefined) return;
    this.lastStatus = status;
    this.handlers.status(status, ticketId);
  }

  private connect(realtime: Realtime): void {
    this.handlers.mode('connecting');
    let ready = false;
    let ws: WebSocket;
    try {
      const url = new URL(realtime.url);
      url.searchParams.set('token', realtime.token);
      ws = new WebSocket(url.href);
    } catch {
      this.lost();
      return;
    }
    this.socket = ws;
    const readyTimer = setTimeout(() => {
      if (!ready) ws.close();
    }, READY_TIMEOUT_MS);
    ws.onmessage = (e) => {
      let event: { type?: string; message?: Message; status?: Session['status']; ticket_id?: number | null };
      try {
        event = JSON.parse(String(e.data));
      } catch {
        return;
      }
      if (event.type === 'ready') {
        ready = true;
        clearTimeout(readyTimer);
        this.retryMs = 2000;
        this.stopPolling();
        this.handlers.mode('live');
        this.pingTimer = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send('{"type":"ping"}'), PING_MS);
        void this.poll().catch(() => undefined);
      } else if (event.type === 'message' && event.message) this.take(event.message);
      else if (event.type === 'message_ref') void this.poll().catch(() => undefined);
      else if (event.type === 'session' && event.status) this.statusIs(event.status, event.ticket_id);
    };
    ws.onclose = () => {
      clearTimeout(readyTimer);
      clearInterval(this.pingTimer);
      if (this.socket === ws) this.socket = null;
      this.lost();
    };
  }

  /** The socket failed or dropped: poll, and try a new socket later (with a fresh token). */
  private lost(): void {
    if (this.stopped) return;
    this.startPolling();
    if (this.lastStatus === 'closed') return;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      this.api
        .realtimeToken(this.sessionId)
        .then((t) => {
          if (!this.stopped && t.realtime) this.connect(t.realtime);
        })
        .catch(() => this.lost());
    }, this.retryMs);
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
  }

  private startPolling(): void {
    if (this.polling || this.stopped) return;
    this.polling = true;
    this.handlers.mode('polling');
    const tick = () => {
      this.poll()
        .catch(() => undefined)
        .finally(() => {
          if (this.polling && !this.stopped && this.lastStatus !== 'closed') this.pollTimer = setTimeout(tick, this.pollSeconds * 1000);
        });
    };
    tick();
  }

  private stopPolling(): void {
    this.polling = false;
    clearTimeout(this.pollTimer);
  }
}
