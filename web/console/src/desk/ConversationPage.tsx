import { useEffect, useRef, useState } from 'preact/hooks';
import type { Api, Session } from '../api';
import { ErrorMessage, Field, formatDate, Link, PageTitle, Progress, StatusBadge } from '../components';
import { useAction, useLoad } from '../hooks';
import { navigate } from '../router';
import { AttachmentView } from './Attachment';
import { useLiveMessages } from './live';
import { TICKET_PRIORITIES, type CannedReply, type ChatSession } from './types';

const MODE_TEXT = { connecting: 'Connecting…', live: 'Live', polling: 'Live connection unavailable: checking for messages regularly' };

/**
 * One conversation: its messages live over the session's WebSocket (both directions: the
 * customer's arrive as they are written, the agent's are posted and come back on the channel),
 * attachments with thumbnails, canned replies with their placeholders filled, and the actions:
 * assign to me, close, convert to a ticket. Beside it, the customer's context.
 */
export function ConversationPage({ api, session: me, id }: { api: Api; session: Session; id: number }) {
  const chat = useLoad((signal) => api.chat<ChatSession>(`/chat/sessions/${id}`, { signal }), `session-${id}`);
  const live = useLiveMessages(api, id, chat.reload);
  const canned = useLoad((signal) => api.chat<CannedReply[]>(`/chat/agent/canned-replies?session_id=${id}`, { signal }), `canned-${id}`);
  const action = useAction();
  const [draft, setDraft] = useState('');
  const [cannedId, setCannedId] = useState('');
  const [converting, setConverting] = useState(false);
  const logRef = useRef<HTMLDivElement>(null);
  const s = chat.data;
  const closed = s?.status === 'closed';
  const isAgent = me.credentials.role === 'agent';
  const isAdmin = me.credentials.role === 'admin';

  useEffect(() => {
    const el = logRef.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [live.messages.length]);

  const post = (body: Record<string, unknown>) =>
    action.run(async () => {
      await api.chat(`/chat/sessions/${id}/messages`, { method: 'POST', body });
      // The socket brings it back too; a catch-up covers a socket that is down.
      await live.catchUp();
      chat.reload();
    });
  const act = (path: string, body: Record<string, unknown>) =>
    action.run(async () => {
      await api.chat(`/chat/sessions/${id}/${path}`, { method: 'POST', body });
      chat.reload();
    });
  const chosen = canned.data?.find((c) => String(c.id) === cannedId);

  return (
    <section>
      <p>
        <Link to="/desk">← Back to the desk</Link>
      </p>
      <PageTitle>
        Chat #{id}
        {s ? <span class="subtitle"> with {s.customer_name || 'a visitor'}</span> : null}
      </PageTitle>
      <ErrorMessage error={chat.error} title="The chat could not be loaded" />
      {chat.loading && !s ? <Progress label="Loading the chat…" /> : null}
      {s ? (
        <div class="conversation">
          <div class="conversation-main">
            <p class="actions">
              <StatusBadge status={s.status} />
              <span class={`live live-${live.mode}`} role="status">
                {MODE_TEXT[live.mode]}
              </span>
            </p>
            <ErrorMessage error={live.error} title="The messages could not be loaded" />
            <div class="messages" role="log" aria-label="Messages" tabIndex={0} ref={logRef}>
              <ol class="plain">
              {live.messages.map((m) => (
                <li key={m.id} class={`message message-${m.sender_type}`}>
                  <span class="message-meta">
                    <strong>{m.sender_name}</strong> <time dateTime={m.date_created}>{formatDate(m.date_created)}</time>
                  </span>
                  {m.body ? <p>{m.body}</p> : null}
                  {m.attachment ? <AttachmentView api={api} attachment={m.attachment} /> : null}
                </li>
              ))}
              </ol>
            </div>
            {closed ? (
              <p class="muted">This chat is closed: no more messages.</p>
            ) : (
              <>
                <form
                  class="stack panel"
                  onSubmit={(e) => {
                    e.preventDefault();
                    if (!draft.trim()) return;
                    void post({ body: draft }).then((ok) => ok && setDraft(''));
                  }}
                >
                  <Field label="Your answer" hint="Enter sends; Shift+Enter starts a new line.">
                    <textarea
                      rows={3}
                      maxLength={10_000}
                      value={draft}
                      onInput={(e) => setDraft(e.currentTarget.value)}
                      onKeyDown={(e) => {
                        if (e.key === 'Enter' && !e.shiftKey) {
                          e.preventDefault();
                          e.currentTarget.form?.requestSubmit();
                        }
                      }}
                    />
                  </Field>
                  <button type="submit" class="primary" disabled={action.busy || !draft.trim()}>
                    Send
                  </button>
                </form>
                <div class="panel">
                  <Field label="Send a file" hint="An image, a PDF or a text file; images reach the customer with a thumbnail.">
                    <input
                      type="file"
                      accept="image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain"
                      disabled={action.busy}
                      onChange={(e) => {
                        const input = e.currentTarget;
                        const file = input.files?.[0];
                        if (!file) return;
                        const form = new FormData();
                        form.append('file', file, file.name);
                        void action.run(async () => {
                          await api.chat(`/chat/sessions/${id}/attachments`, { method: 'POST', form });
                          input.value = '';
                          await live.catchUp();
                        });
                      }}
                    />
                  </Field>
                </div>
                <form
                  class="stack panel"
                  onSubmit={(e) => {
                    e.preventDefault();
                    if (chosen) void post({ canned_reply_id: chosen.id }).then((ok) => ok && setCannedId(''));
                  }}
                >
                  <Field label="Canned reply">
                    <select value={cannedId} onChange={(e) => setCannedId(e.currentTarget.value)}>
                      <option value="">Choose a reply…</option>
                      {(canned.data ?? []).map((c) => (
                        <option key={c.id} value={String(c.id)}>
                          {c.title} (/{c.shortcut})
                        </option>
                      ))}
                    </select>
                  </Field>
                  {chosen ? (
                    <blockquote class="preview" aria-label="The reply as the customer will read it">
                      {chosen.rendered ?? chosen.body}
                    </blockquote>
                  ) : null}
                  <ErrorMessage error={canned.error} title="The canned replies could not be loaded" />
                  <button type="submit" disabled={action.busy || !chosen}>
                    Send canned reply
                  </button>
                </form>
              </>
            )}
            <ErrorMessage error={action.error} title="That did not work" />
          </div>
          <aside class="conversation-side" aria-label="The customer and the chat">
            <div class="panel">
              <h2>Actions</h2>
              <div class="actions">
                {isAgent && s.assigned_agent_id !== me.agentId && !closed ? (
                  <button type="button" class="primary" disabled={action.busy} onClick={() => void act('assign', {})}>
                    Assign to me
                  </button>
                ) : null}
                {!closed ? (
                  <button type="button" disabled={action.busy} onClick={() => void act('status', { status: 'closed' })}>
                    Close the chat
                  </button>
                ) : null}
                {s.ticket_id === null && !converting ? (
                  <button type="button" disabled={action.busy} onClick={() => setConverting(true)}>
                    Convert to a ticket
                  </button>
                ) : null}
              </div>
              {s.assigned_agent_id !== null ? <p class="small">Assigned to {s.assigned_agent_id === me.agentId ? 'you' : `agent #${s.assigned_agent_id}`}.</p> : <p class="small">Not assigned.</p>}
              {s.ticket_id !== null ? (
                <p>
                  <Link to={`/tickets/${s.ticket_id}`}>Ticket #{s.ticket_id}</Link>
                  {s.fallback_reason ? <span class="muted small"> ({s.fallback_reason.replace(/_/g, ' ')})</span> : null}
                </p>
              ) : null}
              {converting && s.ticket_id === null ? (
                <form
                  class="stack"
                  onSubmit={(e) => {
                    e.preventDefault();
                    const form = new FormData(e.currentTarget);
                    void action.run(async () => {
                      const body: Record<string, unknown> = { priority: form.get('priority') };
                      if (String(form.get('subject')).trim()) body.subject = String(form.get('subject')).trim();
                      const out = await api.chat<{ ticket: { id: number } }>(`/chat/sessions/${id}/convert-ticket`, { method: 'POST', body });
                      navigate(`/tickets/${out.ticket.id}`);
                    });
                  }}
                >
                  <Field label="Ticket subject" hint="Empty: Chat #id with the customer's name.">
                    <input name="subject" maxLength={200} />
                  </Field>
                  <Field label="Ticket priority">
                    <select name="priority">
                      {TICKET_PRIORITIES.map((p) => (
                        <option key={p} value={p} selected={p === 'normal'}>
                          {p}
                        </option>
                      ))}
                    </select>
                  </Field>
                  <div class="actions">
                    <button type="submit" class="primary" disabled={action.busy}>
                      Create the ticket
                    </button>
                    <button type="button" onClick={() => setConverting(false)}>
                      Cancel
                    </button>
                  </div>
                </form>
              ) : null}
            </div>
            <div class="panel">
              <h2>Customer</h2>
              <dl class="facts narrow">
                <dt>Name</dt>
                <dd>{s.customer_name || '—'}</dd>
                <dt>E-mail</dt>
                <dd>{s.customer_email || '—'}</dd>
                <dt>Identity</dt>
                <dd>{s.identity_verified ? 'verified by the site' : 'as typed by the visitor (not verified)'}</dd>
                <dt>Customer record</dt>
                <dd>{s.customer_id === null ? '—' : isAdmin ? <Link to={`/records/customers/${s.customer_id}`}>Customer #{s.customer_id}</Link> : `Customer #${s.customer_id} (records are for admins)`}</dd>
                <dt>Site</dt>
                <dd>{s.site_id === null ? '—' : isAdmin ? <Link to={`/records/sites/${s.site_id}`}>Site #{s.site_id}</Link> : `Site #${s.site_id}`}</dd>
              </dl>
            </div>
            <div class="panel">
              <h2>Page</h2>
              <dl class="facts narrow">
                <dt>Page</dt>
                <dd>
                  {s.context.page_url && /^https?:\/\//i.test(s.context.page_url) ? (
                    <a href={s.context.page_url} target="_blank" rel="noopener noreferrer">
                      {s.context.page_title || s.context.page_url}
                      <span class="visually-hidden"> (opens in a new tab)</span>
                    </a>
                  ) : (
                    '—'
                  )}
                </dd>
                <dt>Address</dt>
                <dd>{s.context.page_url || '—'}</dd>
                <dt>Came from</dt>
                <dd>{s.context.referrer || '—'}</dd>
                <dt>Language</dt>
                <dd>{s.context.locale || '—'}</dd>
                <dt>Started</dt>
                <dd>{formatDate(s.date_created)}</dd>
                {Object.entries(s.metadata).map(([k, v]) => [<dt key={`k-${k}`}>{k}</dt>, <dd key={`v-${k}`}>{v}</dd>])}
              </dl>
            </div>
          </aside>
        </div>
      ) : null}
    </section>
  );
}
