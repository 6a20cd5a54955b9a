import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiFailure, type Attachment, type Availability, type ChatApi, type Message, type Session } from './api';
import { Live, type Mode } from './live';
import type { Settings } from './settings';
import type { Strings } from './strings';

type View = 'loading' | 'start' | 'chat' | 'rate' | 'thanks';

interface Stored {
  id: number;
  token: string;
  /** The newest message the customer has had on screen: later ones from the agent count as unread. */
  seen?: number;
}

/** The session survives page changes on the site (same tab): its id and token in sessionStorage. */
function storage(key: string) {
  return {
    load(): Stored | null {
      try {
        const v = JSON.parse(sessionStorage.getItem(key) ?? 'null');
        return v && typeof v.id === 'number' && typeof v.token === 'string' ? { id: v.id, token: v.token, seen: Number(v.seen) || 0 } : null;
      } catch {
        return null;
      }
    },
    save(v: Stored | null): void {
      try {
        if (v) sessionStorage.setItem(key, JSON.stringify(v));
        else sessionStorage.removeItem(key);
      } catch {
        // Storage refused (private mode, sandbox): the chat lasts as long as the page.
      }
    },
  };
}

/** The conversation shows its newest message (also once a thumbnail has loaded and grown it). */
function scrollToEnd(inside: HTMLElement): void {
  const body = inside.closest('.body');
  if (body) body.scrollTop = body.scrollHeight;
}

const httpUrl = (u: string): boolean => u.length <= 2000 && /^https?:\/\/\S+$/.test(u);

const errorText = (err: unknown, t: Strings): string => (err instanceof ApiFailure && err.status !== 0 && err.status < 500 ? err.message : t.failed);

export function App({ api, settings, t }: { api: ChatApi; settings: Settings; t: Strings }) {
  const store = useRef(storage(`hostflow-chat:${settings.api}`)).current;
  const [open, setOpen] = useState(settings.open);
  const [view, setView] = useState<View>('loading');
  const [availability, setAvailability] = useState<Availability | null>(null);
  const [session, setSession] = useState<Session | null>(null);
  const [messages, setMessages] = useState<Message[]>([]);
  const [mode, setMode] = useState<Mode>('connecting');
  const [error, setError] = useState<string | null>(null);
  const [unread, setUnread] = useState(0);
  const live = useRef<Live | null>(null);
  const bubble = useRef<HTMLButtonElement>(null);
  const panel = useRef<HTMLDivElement>(null);
  const openRef = useRef(open);
  openRef.current = open;
  const seen = useRef(0);

  const addMessage = (m: Message) => {
    setMessages((list) => {
      if (list.some((x) => x.id === m.id)) return list;
      if (!openRef.current && m.sender_type !== 'customer' && m.id > seen.current) setUnread((n) => n + 1);
      return [...list, m].sort((a, b) => a.id - b.id);
    });
  };

  const follow = (s: Session, realtime: Parameters<Live['start']>[0], pollSeconds: number) => {
    live.current?.stop();
    const l = new Live(api, s.id, pollSeconds, {
      message: addMessage,
      status: (status, ticketId) => setSession((cur) => (cur ? { ...cur, status, ticket_id: ticketId ?? cur.ticket_id } : cur)),
      mode: setMode,
    }, settings.realtime);
    live.current = l;
    l.start(realtime);
  };

  // On load when this tab has a session (so the bubble counts new answers), else on first open:
  // resume the session, or ask whether anyone can answer.
  const started = useRef(false);
  useEffect(() => {
    if (started.current || (!open && !store.load())) return;
    started.current = true;
    void (async () => {
      const saved = store.load();
      if (saved) {
        api.token = saved.token;
        seen.current = saved.seen ?? 0;
        try {
          const s = await api.session(saved.id);
          setSession(s);
          if (s.status === 'closed') {
            store.save(null);
            api.token = null;
          } else {
            const t = await api.realtimeToken(s.id).catch(() => null);
            follow(s, t?.realtime ?? null, t?.poll_interval_seconds ?? 15);
            setView('chat');
            return;
          }
        } catch {
          store.save(null);
          api.token = null;
        }
      }
      try {
        setAvailability(await api.availability());
      } catch (err) {
        setError(errorText(err, t));
      }
      setView('start');
    })();
  }, [open]);

  useEffect(() => () => live.current?.stop(), []);
  // What is on screen counts as seen (kept with the session, for the next page of the site).
  useEffect(() => {
    if (!open || !session || messages.length === 0) return;
    const newest = messages[messages.length - 1].id;
    if (newest > seen.current) {
      seen.current = newest;
      if (api.token) store.save({ id: session.id, token: api.token, seen: newest });
    }
  }, [open, messages, session?.id]);
  useEffect(() => {
    if (open) {
      setUnread(0);
      panel.current?.querySelector<HTMLElement>('.body textarea, .body input, .composer textarea, .body button')?.focus();
    }
  }, [open, view]);
  // The agent resolved or closed the conversation: offer the rating.
  useEffect(() => {
    if (view === 'chat' && session?.status === 'closed') setView('rate');
  }, [session?.status]);

  const close = () => {
    setOpen(false);
    bubble.current?.focus();
  };

  const begin = async (form: { name: string; email: string; message: string }) => {
    setError(null);
    const body: Record<string, unknown> = { message: form.message, locale: settings.locale.replace('-', '_') };
    // The page's context, only as the API takes it (an http(s) URL of at most 2000 characters),
    // so a page opened from a file or with a huge URL can still start a chat.
    if (httpUrl(location.href)) body.page_url = location.href;
    if (httpUrl(document.referrer)) body.referrer = document.referrer;
    const title = Array.from(document.title.trim()).slice(0, 500).join('');
    if (title) body.page_title = title;
    if (form.name) body.customer_name = form.name;
    if (form.email) body.customer_email = form.email;
    if (settings.siteId) body.site_id = settings.siteId;
    if (settings.customerId && settings.customerHash) Object.assign(body, { customer_id: settings.customerId, customer_hash: settings.customerHash });
    if (!settings.realtime) body.realtime = false;
    try {
      const out = await api.start(body);
      api.token = out.token;
      store.save({ id: out.session.id, token: out.token });
      setSession(out.session);
      setMessages([]);
      out.messages.forEach(addMessage);
      follow(out.session, out.realtime, out.poll_interval_seconds);
      setView('chat');
    } catch (err) {
      setError(errorText(err, t));
    }
  };

  const endChat = async () => {
    if (!session) return;
    try {
      if (session.status !== 'closed') await api.close(session.id);
      setSession({ ...session, status: 'closed' });
      setView('rate');
    } catch (err) {
      setError(errorText(err, t));
    }
  };

  const finish = () => {
    live.current?.stop();
    live.current = null;
    store.save(null);
    api.token = null;
  };

  const restart = async () => {
    setSession(null);
    setMessages([]);
    setError(null);
    setView('loading');
    try {
      setAvailability(await api.availability());
    } catch (err) {
      setError(errorText(err, t));
    }
    setView('start');
  };

  const offline = availability ? !availability.online : false;
  const state = session?.ticket_id ? t.ticket(session.ticket_id) : offline ? t.offline : availability?.expected_wait_seconds ? t.wait(availability.expected_wait_seconds) : t.online;

  return (
    <div class={`root ${settings.position} ${open ? 'open' : ''}`} lang={settings.locale.replace('_', '-')} style={{ '--accent': settings.color }} onKeyDown={(e) => e.key === 'Escape' && open && close()}>
      <button ref={bubble} type="button" class="bubble" aria-label={unread > 0 ? t.openUnread(unread) : t.open} aria-expanded={open} aria-controls="hf-panel" onClick={() => (open ? close() : setOpen(true))}>
        <svg viewBox="0 0 24 24" aria-hidden="true">
          <path d="M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H8l-5 4V5a2 2 0 0 1 1-2zm3 6v2h10V9H7zm0 4v2h7v-2H7z" />
        </svg>
        {unread > 0 && <span class="badge" aria-hidden="true">{unread}</span>}
      </button>
      {open && (
        <div ref={panel} id="hf-panel" class="panel" role="dialog" aria-labelledby="hf-title">
          <div class="head">
            <h2 id="hf-title">
              {settings.title}
              <span class="state">{state}</span>
            </h2>
            <button type="button" class="icon" aria-label={t.close} onClick={close}>
              ×
            </button>
          </div>
          {view === 'loading' && (
            <div class="body">
              <p class="note">{t.loading}</p>
            </div>
          )}
          {view === 'start' && <StartForm t={t} settings={settings} offline={offline} availability={availability} error={error} onSubmit={begin} />}
          {view === 'chat' && session && (
            <Conversation t={t} api={api} session={session} messages={messages} mode={mode} error={error} setError={setError} live={live.current} onEnd={endChat} onRate={() => setView('rate')} />
          )}
          {view === 'rate' && session && (
            <Rating
              t={t}
              error={error}
              onSkip={() => {
                finish();
                setView('thanks');
              }}
              onSubmit={async (rating, comment) => {
                try {
                  setError(null);
                  await api.rate(session.id, rating, comment);
                  finish();
                  setView('thanks');
                } catch (err) {
                  setError(errorText(err, t));
                }
              }}
            />
          )}
          {view === 'thanks' && (
            <div class="body">
              <p class="note" role="status">
                {t.thanks}
              </p>
              <button type="button" class="secondary" onClick={() => void restart()}>
                {t.newChat}
              </button>
            </div>
          )}
        </div>
      )}
    </div>
  );
}

function StartForm(props: { t: Strings; settings: Settings; offline: boolean; availability: Availability | null; error: string | null; onSubmit(f: { name: string; email: string; message: string }): Promise<void> }) {
  const { t, settings, offline } = props;
  const signedIn = settings.customerId !== undefined && settings.customerHash !== undefined;
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget as HTMLFormElement);
    setBusy(true);
    await props.onSubmit({ name: String(data.get('name') ?? '').trim(), email: String(data.get('email') ?? '').trim(), message: String(data.get('message') ?? '').trim() });
    setBusy(false);
  };
  return (
    <div class="body">
      <form class="stack" onSubmit={(e) => void submit(e)} aria-labelledby="hf-start">
        <h3 id="hf-start" class="heading">
          {offline ? t.ticketHeading : t.startHeading}
        </h3>
        {offline && <p class="note">{props.availability?.message || t.ticketHint}</p>}
        {/* A signed-in customer (id and hash from the site): the API knows their name and email. */}
        {!signedIn && (
          <>
            <label class="field">
              {t.name}
              <input type="text" name="name" autocomplete="name" maxLength={200} required={offline} value={settings.customerName ?? ''} />
            </label>
            <label class="field">
              {t.email}
              <input type="email" name="email" autocomplete="email" maxLength={254} required={offline} value={settings.customerEmail ?? ''} />
            </label>
          </>
        )}
        <label class="field">
          {t.message}
          <textarea name="message" required maxLength={10000} rows={4} />
        </label>
        {props.error && (
          <p class="error" role="alert">
            {props.error}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          {offline ? t.sendTicket : t.start}
        </button>
      </form>
    </div>
  );
}

function Conversation(props: {
  t: Strings;
  api: ChatApi;
  session: Session;
  messages: Message[];
  mode: Mode;
  error: string | null;
  setError(e: string | null): void;
  live: Live | null;
  onEnd(): Promise<void>;
  onRate(): void;
}) {
  const { t, api, session, live } = props;
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [uploading, setUploading] = useState(false);
  const logRef = useRef<HTMLOListElement>(null);
  useEffect(() => {
    if (logRef.current) scrollToEnd(logRef.current);
  }, [props.messages.length]);

  const closed = session.status === 'closed';
  const send = async (e: Event) => {
    e.preventDefault();
    const body = text.trim();
    if (!body || busy) return;
    setBusy(true);
    props.setError(null);
    try {
      const m = await api.send(session.id, body);
      live?.take(m);
      setText('');
    } catch (err) {
      props.setError(err instanceof ApiFailure && err.status > 0 && err.status < 500 ? err.message : t.failed);
    }
    setBusy(false);
  };
  const upload = async (e: Event) => {
    const input = e.currentTarget as HTMLInputElement;
    const file = input.files?.[0];
    if (!file) return;
    setUploading(true);
    props.setError(null);
    try {
      await api.upload(session.id, file);
      await live?.poll();
    } catch (err) {
      props.setError(err instanceof ApiFailure && err.status > 0 && err.status < 500 ? err.message : t.failed);
    }
    input.value = '';
    setUploading(false);
  };

  return (
    <>
      <div class="body">
        {props.mode === 'polling' && !closed && <p class="note">{t.polling}</p>}
        <div role="log" aria-live="polite" aria-label={t.conversation}>
          <ol class="log" ref={logRef}>
            {props.messages.map((m) => (
              <MessageItem key={m.id} m={m} api={api} t={t} />
            ))}
          </ol>
        </div>
        {closed && (
          <div class="note">
            {t.rateInvite}{' '}
            <button type="button" class="secondary" onClick={props.onRate}>
              {t.rateThis}
            </button>
          </div>
        )}
      </div>
      {!closed && (
        <form class="composer" onSubmit={(e) => void send(e)}>
          {props.error && (
            <p class="error" role="alert">
              {props.error}
            </p>
          )}
          <label class="hidden" for="hf-text">
            {t.message}
          </label>
          <textarea
            id="hf-text"
            value={text}
            maxLength={10000}
            onInput={(e) => setText((e.currentTarget as HTMLTextAreaElement).value)}
            onKeyDown={(e) => {
              // Not while an input method composes a word (Enter then picks it).
              if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) void send(e);
            }}
          />
          <div class="row">
            <label class="attach">
              {uploading ? t.uploading : t.attach}
              <input class="hidden" type="file" accept="image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain" disabled={uploading} onChange={(e) => void upload(e)} />
            </label>
            <span class="grow" />
            <button type="button" class="secondary" onClick={() => void props.onEnd()}>
              {t.end}
            </button>
            <button type="submit" class="primary" disabled={busy || !text.trim()}>
              {t.send}
            </button>
          </div>
        </form>
      )}
    </>
  );
}

function MessageItem({ m, api, t }: { m: Message; api: ChatApi; t: Strings }) {
  const who = m.sender_type === 'customer' ? t.you : m.sender_name;
  return (
    <li class={`msg ${m.sender_type}`}>
      {m.sender_type !== 'system' && <span class="who">{who}</span>}
      {m.body && <p class="text">{m.body}</p>}
      {m.attachment && <AttachmentView a={m.attachment} api={api} t={t} />}
    </li>
  );
}

/** A thumbnail (fetched with the session's token) and a download button; files without one get the button only. */
function AttachmentView({ a, api, t }: { a: Attachment; api: ChatApi; t: Strings }) {
  const [thumb, setThumb] = useState<string | null>(null);
  const abs = (u: string) => new URL(u, api.base).href;
  useEffect(() => {
    if (!a.thumbnail_url) return;
    let url: string | null = null;
    api
      .blobUrl(abs(a.thumbnail_url))
      .then((u) => setThumb((url = u)))
      .catch(() => undefined);
    return () => {
      if (url) URL.revokeObjectURL(url);
    };
  }, [a.id]);
  const download = async () => {
    const url = await api.blobUrl(abs(a.download_url));
    const link = document.createElement('a');
    link.href = url;
    link.download = a.name;
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  };
  return (
    <>
      {thumb && <img src={thumb} alt={a.name} onLoad={(e) => scrollToEnd(e.currentTarget as HTMLElement)} />}
      <button type="button" class="file" onClick={() => void download().catch(() => undefined)}>
        {t.download(a.name)}
      </button>
    </>
  );
}

function Rating(props: { t: Strings; error: string | null; onSubmit(rating: number, comment: string): Promise<void>; onSkip(): void }) {
  const { t } = props;
  const [rating, setRating] = useState(0);
  const [comment, setComment] = useState('');
  const [busy, setBusy] = useState(false);
  return (
    <div class="body">
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          if (!rating) return;
          setBusy(true);
          void props.onSubmit(rating, comment.trim()).finally(() => setBusy(false));
        }}
      >
        <p class="note">{t.rateInvite}</p>
        <fieldset class="stars">
          <legend>{t.rateLegend}</legend>
          {[1, 2, 3, 4, 5].map((n) => (
            <label class={`star ${n <= rating ? 'on' : ''}`} key={n}>
              <input type="radio" name="rating" value={n} checked={rating === n} onChange={() => setRating(n)} aria-label={t.star(n)} />
              <span aria-hidden="true">★</span>
            </label>
          ))}
        </fieldset>
        <label class="field">
          {t.comment}
          <textarea name="comment" maxLength={1000} value={comment} onInput={(e) => setComment((e.currentTarget as HTMLTextAreaElement).value)} />
        </label>
        {props.error && (
          <p class="error" role="alert">
            {props.error}
          </p>
        )}
        <div class="row">
          <button type="submit" class="primary" disabled={busy || !rating}>
            {t.rate}
          </button>
          <button type="button" class="secondary" onClick={props.onSkip}>
            {t.skip}
          </button>
        </div>
      </form>
    </div>
  );
}
