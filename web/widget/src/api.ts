/** The chat API as the widget uses it: the public routes, then the session's token. */

export interface Attachment {
  id: number;
  name: string;
  type: string;
  size: number;
  width: number | null;
  height: number | null;
  download_url: string;
  thumbnail_url: string | null;
}

export interface Message {
  id: number;
  sender_type: 'customer' | 'agent' | 'system';
  sender_name: string;
  body: string;
  attachment: Attachment | null;
  date_created: string;
}

export interface Session {
  id: number;
  status: 'waiting' | 'assigned' | 'active' | 'resolved' | 'closed';
  ticket_id: number | null;
  fallback_reason: string | null;
}

export interface Availability {
  online: boolean;
  reason: string;
  message?: string;
  expected_wait_seconds?: number | null;
  poll_interval_seconds: number;
}

export interface Realtime {
  token: string;
  url: string;
  expires_at: string;
}

export interface Started {
  session: Session;
  token: string;
  realtime: Realtime | null;
  poll_interval_seconds: number;
  messages: Message[];
}

export interface MessagePage {
  messages: Message[];
  next_after: number;
  has_more: boolean;
  session_status: Session['status'];
  poll_interval_seconds: number;
}

/** An answer in the API's error shape ({code, message, data:{status}}), or a network failure (status 0). */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export class ChatApi {
  token: string | null = null;

  constructor(readonly base: string) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {};
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    let payload: BodyInit | undefined;
    if (body instanceof FormData) payload = body;
    else if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    let res: Response;
    try {
      res = await fetch(`${this.base}${path}`, { method, headers, body: payload, credentials: 'omit', mode: 'cors' });
    } catch {
      throw new ApiFailure(0, 'network', 'The chat server cannot be reached.');
    }
    const data = await res.json().catch(() => null);
    if (!res.ok) throw new ApiFailure(res.status, data?.code ?? 'http_error', typeof data?.message === 'string' ? data.message : `HTTP ${res.status}`);
    return data as T;
  }

  /** A file of the session (thumbnail or download) as an object URL: downloads need the token, so no plain <img src>. */
  async blobUrl(url: string): Promise<string> {
    const res = await fetch(url, { headers: this.token ? { Authorization: `Bearer ${this.token}` } : {}, credentials: 'omit', mode: 'cors' });
    if (!res.ok) throw new ApiFailure(res.status, 'download_failed', `HTTP ${res.status}`);
    return URL.createObjectURL(await res.blob());
  }

  availability = () => this.call<Availability>('GET', '/chat/availability');
  start = (body: Record<string, unknown>) => this.call<Started>('POST', '/chat/sessions', body);
  session = (id: number) => this.call<Session>('GET', `/chat/sessions/${id}`);
  messages = (id: number, after: number) => this.call<MessagePage>('GET', `/chat/sessions/${id}/messages?after=${after}&limit=100`);
  send = (id: number, body: string) => this.call<Message>('POST', `/chat/sessions/${id}/messages`, { body });
  realtimeToken = (id: number) => this.call<{ realtime: Realtime | null; poll_interval_seconds: number }>('POST', `/chat/sessions/${id}/token`, {});
  close = (id: number) => this.call<Session>('POST', `/chat/sessions/${id}/status`, { status: 'closed' });
  rate = (id: number, rating: number, comment: string) => this.call<unknown>('POST', `/chat/sessions/${id}/satisfaction`, comment ? { rating, comment } : { rating });

  upload(id: number, file: File): Promise<unknown> {
    const form = new FormData();
    form.append('file', file, file.name);
    return this.call('POST', `/chat/sessions/${id}/attachments`, form);
  }
}
