import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError, type Api } from '../api';
import type { ChatMessage, MessagesPage } from './types';

export type LiveMode = 'connecting' | 'live' | 'polling';

/**
 * A session's messages, live: the history first (paged by the `after` cursor), then the
 * session's WebSocket (a realtime token from POST …/token; the console is served by the API's
 * own host, so its Origin is allowed); while the socket is down, polling every
 * poll_interval_seconds, and the socket retried with backoff. `onSession` runs on every status,
 * assignment or ticket change the channel reports.
 */
export function useLiveMessages(api: Api, sessionId: number, onSession: () => void): { messages: ChatMessage[]; mode: LiveMode; error: string | null; catchUp: () => Promise<void> } {
  const [messages, setMessages] = useState<ChatMessage[]>([]);
  const [mode, setMode] = useState<LiveMode>('connecting');
  const [error, setError] = useState<string | null>(null);
  const lastId = useRef(0);
  const onSessionRef = useRef(onSession);
  onSessionRef.current = onSession;
  const catchUpRef = useRef<() => Promise<void>>(async () => undefined);

  useEffect(() => {
    let stopped = false;
    let socket: WebSocket | null = null;
    let pollTimer: number | undefined;
    let retryTimer: number | undefined;
    let pingTimer: number | undefined;
    let retryMs = 2000;
    let pollMs = 15_000;
    const controller = new AbortController();

    const add = (incoming: ChatMessage[]) => {
      const fresh = incoming.filter((m) => m.id > lastId.current);
      if (!fresh.length) return;
      lastId.current = Math.max(...fresh.map((m) => m.id));
      setMessages((old) => {
        const ids = new Set(old.map((m) => m.id));
        return [...old, ...fresh.filter((m) => !ids.has(m.id))].sort((a, b) => a.id - b.id);
      });
    };
    const catchUp = async () => {
      for (let i = 0; i < 50 && !stopped; i++) {
        const page = await api.chat<MessagesPage>(`/chat/sessions/${sessionId}/messages?after=${lastId.current}&limit=100`, { signal: controller.signal });
        pollMs = Math.max(page.poll_interval_seconds, 5) * 1000;
        add(page.messages);
        if (!page.has_more) break;
      }
    };
    catchUpRef.current = catchUp;
    const poll = () => {
      window.clearTimeout(pollTimer);
      pollTimer = window.setTimeout(async () => {
        if (stopped || socket?.readyState === WebSocket.OPEN) return;
        try {
          await catchUp();
          onSessionRef.current();
          setError(null);
        } catch (err) {
          if (!stopped) setError(describeError(err));
        }
        poll();
      }, pollMs);
    };
    const lost = () => {
      if (stopped) return;
      window.clearInterval(pingTimer);
      setMode('polling');
      poll();
      window.clearTimeout(retryTimer);
      retryTimer = window.setTimeout(() => void connect(), retryMs);
      retryMs = Math.min(retryMs * 2, 60_000);
    };
    const connect = async () => {
      if (stopped) return;
      let url: URL;
      try {
        const access = await api.chat<{ realtime: { token: string; url: string } | null }>(`/chat/sessions/${sessionId}/token`, { method: 'POST', body: {}, signal: controller.signal });
        if (!access.realtime) return lost();
        url = new URL(access.realtime.url, location.href);
        url.searchParams.set('token', access.realtime.token);
      } catch {
        return lost();
      }
      if (stopped) return;
      const ws = new WebSocket(url.href);
      socket = ws;
      ws.onmessage = (e) => {
        let event: { type?: string; message?: ChatMessage };
        try {
          event = JSON.parse(String(e.data));
        } catch {
          return;
        }
        if (event.type === 'ready') {
          retryMs = 2000;
          setMode('live');
          window.clearTimeout(pollTimer);
          pingTimer = window.setInterval(() => ws.readyState === WebSocket.OPEN && ws.send('{"type":"ping"}'), 25_000);
          // What arrived between the history and the socket.
          void catchUp().catch(() => undefined);
        } else if (event.type === 'message' && event.message) add([event.message]);
        else if (event.type === 'message_ref') void catchUp().catch(() => undefined);
        else if (event.type === 'session') onSessionRef.current();
      };
      ws.onclose = () => {
        if (socket === ws) lost();
      };
    };

    void (async () => {
      try {
        await catchUp();
      } catch (err) {
        if (!stopped) setError(describeError(err));
      }
      await connect();
    })();
    return () => {
      stopped = true;
      controller.abort();
      window.clearTimeout(pollTimer);
      window.clearTimeout(retryTimer);
      window.clearInterval(pingTimer);
      const ws = socket;
      socket = null;
      ws?.close();
    };
  }, [api, sessionId]);

  return { messages, mode, error, catchUp: () => catchUpRef.current() };
}
