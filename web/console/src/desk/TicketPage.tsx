import { useState } from 'preact/hooks';
import type { Api } from '../api';
import { ErrorMessage, Field, formatDate, Link, Notice, PageTitle, Progress, StatusBadge } from '../components';
import { useAction, useLoad } from '../hooks';
import { TICKET_PRIORITIES, TICKET_STATUSES, type Ticket } from './types';

/** One ticket: its conversation and private notes; work it (status, priority, subject, category) and add notes. */
export function TicketPage({ api, id }: { api: Api; id: number }) {
  const ticket = useLoad((signal) => api.chat<Ticket>(`/chat/agent/tickets/${id}`, { signal }), `ticket-${id}`);
  const action = useAction();
  const [saved, setSaved] = useState<string | null>(null);
  const [note, setNote] = useState('');
  const t = ticket.data;
  return (
    <section>
      <p>
        <Link to="/tickets">← Back to the tickets</Link>
      </p>
      <PageTitle>
        Ticket #{id}
        {t ? <span class="subtitle"> {t.subject}</span> : null}
      </PageTitle>
      <ErrorMessage error={ticket.error} title="The ticket could not be loaded" />
      {ticket.loading && !t ? <Progress label="Loading the ticket…" /> : null}
      {t ? (
        <div class="conversation">
          <div class="conversation-main">
            <p class="actions">
              <StatusBadge status={t.status} /> <span>priority {t.priority}</span>
              {t.chat_session_ids.map((sid) => (
                <Link key={sid} to={`/desk/sessions/${sid}`}>
                  Chat #{sid}
                </Link>
              ))}
            </p>
            <h2>Conversation</h2>
            <ol class="messages" aria-label="Conversation of the ticket" tabIndex={0}>
              {t.messages.map((m) => (
                <li key={m.id} class={`message message-${m.sender_type}`}>
                  <span class="message-meta">
                    <strong>{m.sender_name}</strong> <time dateTime={m.date_created}>{formatDate(m.date_created)}</time>
                  </span>
                  <p>{m.body}</p>
                </li>
              ))}
            </ol>
            <h2>Private notes</h2>
            {t.notes.length === 0 ? <p class="empty">No notes yet.</p> : null}
            <ul class="logs">
              {t.notes.map((n) => (
                <li key={n.id}>
                  <time dateTime={n.date_created}>{formatDate(n.date_created)}</time>
                  {n.note}
                </li>
              ))}
            </ul>
            <form
              class="stack"
              onSubmit={(e) => {
                e.preventDefault();
                if (!note.trim()) return;
                void action.run(async () => {
                  await api.chat(`/chat/agent/tickets/${id}/notes`, { method: 'POST', body: { note } });
                  setNote('');
                  ticket.reload();
                });
              }}
            >
              <Field label="New private note" hint="Staff only: customers never see notes.">
                <textarea rows={3} maxLength={10_000} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
              </Field>
              <button type="submit" disabled={action.busy || !note.trim()}>
                Add the note
              </button>
            </form>
          </div>
          <aside class="conversation-side" aria-label="Work the ticket">
            <form
              key={t.date_modified}
              class="panel stack"
              onSubmit={(e) => {
                e.preventDefault();
                const f = new FormData(e.currentTarget);
                const category = String(f.get('category')).trim();
                const body = { status: f.get('status'), priority: f.get('priority'), subject: String(f.get('subject')).trim(), category: category === '' ? null : category };
                setSaved(null);
                void action.run(async () => {
                  await api.chat(`/chat/agent/tickets/${id}`, { method: 'PATCH', body });
                  ticket.reload();
                  setSaved('The ticket was saved.');
                });
              }}
            >
              <h2>Work the ticket</h2>
              <Field label="Status">
                <select name="status">
                  {TICKET_STATUSES.map((s) => (
                    <option key={s} value={s} selected={s === t.status}>
                      {s}
                    </option>
                  ))}
                </select>
              </Field>
              <Field label="Priority">
                <select name="priority">
                  {TICKET_PRIORITIES.map((p) => (
                    <option key={p} value={p} selected={p === t.priority}>
                      {p}
                    </option>
                  ))}
                </select>
              </Field>
              <Field label="Subject">
                <input name="subject" required maxLength={200} defaultValue={t.subject} />
              </Field>
              <Field label="Category" hint="Empty: no category.">
                <input name="category" maxLength={100} defaultValue={t.category ?? ''} />
              </Field>
              <button type="submit" class="primary" disabled={action.busy}>
                Save
              </button>
              {saved ? <Notice>{saved}</Notice> : null}
            </form>
            <ErrorMessage error={action.error} title="The ticket was not changed" />
            <div class="panel">
              <h2>Customer</h2>
              <dl class="facts narrow">
                <dt>Name</dt>
                <dd>{t.customer_name || '—'}</dd>
                <dt>E-mail</dt>
                <dd>{t.customer_email || '—'}</dd>
                <dt>Identity</dt>
                <dd>{t.identity_verified ? 'verified by the site' : 'not verified'}</dd>
                <dt>Created</dt>
                <dd>{formatDate(t.date_created)}</dd>
              </dl>
            </div>
          </aside>
        </div>
      ) : null}
    </section>
  );
}
