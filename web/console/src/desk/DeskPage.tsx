import { CHAT, type Api, type Session } from '../api';
import { ErrorMessage, formatDate, Link, Notice, PageTitle, Pager, Progress, StatusBadge, Table } from '../components';
import { useLoad } from '../hooks';
import { href, navigate, type Location } from '../router';
import type { ChatSession } from './types';

/** The desk's tabs: each is one query of the agent queue (GET /chat/agent/sessions). */
const TABS = {
  waiting: { label: 'Waiting', query: 'status=waiting&orderby=id&order=asc', empty: 'Nobody is waiting.' },
  mine: { label: 'Mine', query: 'assignment=mine&status__in=assigned,active,resolved&orderby=last_message_at&order=desc', empty: 'No open chat is assigned to you.' },
  assigned: { label: 'Assigned', query: 'assignment=assigned&status__in=assigned,active,resolved&orderby=last_message_at&order=desc', empty: 'No chat is assigned.' },
  closed: { label: 'Closed', query: 'status=closed&orderby=date_modified&order=desc', empty: 'No chat was closed yet.' },
} as const;
type Tab = keyof typeof TABS;

/**
 * The agent's desk: chats waiting, assigned and closed, kept fresh by polling with backoff (the
 * API's WebSocket is per session). A chat arriving shows up without a reload, is announced
 * (live region) and counted in the tab's title and the navigation's badge.
 */
export function DeskPage({ api, session, loc, waiting }: { api: Api; session: Session; loc: Location; waiting: { count: number; newest: ChatSession | null } }) {
  const agent = session.credentials.role === 'agent';
  const tabs = (Object.keys(TABS) as Tab[]).filter((t) => agent || t !== 'mine');
  const tab: Tab = tabs.includes(loc.query.get('tab') as Tab) ? (loc.query.get('tab') as Tab) : 'waiting';
  const page = Math.max(1, Number(loc.query.get('page')) || 1);
  const search = loc.query.get('search') ?? '';
  const url = `/chat/agent/sessions?${TABS[tab].query}&per_page=20&page=${page}${search ? `&search=${encodeURIComponent(search)}` : ''}`;
  // The waiting count changing (a new chat) reloads the list at once.
  const list = useLoad((signal) => api.page<ChatSession>(`${CHAT}${url}`, { signal }), `${url}#${waiting.count}`, { minMs: 4000, maxMs: 30_000 });
  const items = list.data?.items ?? [];
  return (
    <section>
      <PageTitle>Desk</PageTitle>
      <p class="lead">
        {waiting.count === 0 ? 'No chat is waiting for an agent.' : `${waiting.count} chat${waiting.count === 1 ? '' : 's'} waiting for an agent.`}
      </p>
      <div aria-live="polite" role="status" class="visually-hidden">
        {waiting.newest ? `New chat from ${waiting.newest.customer_name || 'a visitor'}` : ''}
      </div>
      {waiting.newest && tab !== 'waiting' ? (
        <Notice>
          New chat from {waiting.newest.customer_name || 'a visitor'}. <Link to={`/desk/sessions/${waiting.newest.id}`}>Open it</Link>
        </Notice>
      ) : null}
      <nav class="tabs" aria-label="Chats">
        {tabs.map((t) => (
          <a key={t} class={`tab${t === tab ? ' tab-current' : ''}`} href={href('/desk', { tab: t })} aria-current={t === tab ? 'page' : undefined}>
            {TABS[t].label}
            {t === 'waiting' && waiting.count > 0 ? <span class="badge badge-wait count">{waiting.count}</span> : null}
          </a>
        ))}
      </nav>
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const value = (new FormData(e.currentTarget).get('search') as string) ?? '';
          navigate('/desk', { tab, search: value });
        }}
      >
        <div class="field">
          <label class="field-label" for="desk-search">
            Search by name, e-mail or page
          </label>
          <input id="desk-search" name="search" type="search" defaultValue={search} maxLength={200} />
        </div>
        <button type="submit">Search</button>
      </form>
      <ErrorMessage error={list.error} title="The chats could not be loaded" />
      {list.loading && !list.data ? <Progress label="Loading the chats…" /> : null}
      {list.data && items.length === 0 ? <p class="empty">{TABS[tab].empty}</p> : null}
      {items.length ? (
        <Table caption={`${TABS[tab].label} chats`} stacked>
          <thead>
            <tr>
              <th>Chat</th>
              <th>Customer</th>
              <th>Page</th>
              <th>Status</th>
              <th>Started</th>
              <th>Last message</th>
            </tr>
          </thead>
          <tbody>
            {items.map((s) => (
              <tr key={s.id}>
                <td data-label="Chat">
                  <Link to={`/desk/sessions/${s.id}`}>Chat #{s.id}</Link>
                </td>
                <td data-label="Customer">
                  {s.customer_name || 'Visitor'} <span class="muted small">{s.customer_email}</span>
                </td>
                <td data-label="Page">{s.context.page_title || s.context.page_url || '—'}</td>
                <td data-label="Status">
                  <StatusBadge status={s.status} />
                  {s.ticket_id !== null ? (
                    <>
                      {' '}
                      <Link to={`/tickets/${s.ticket_id}`}>ticket #{s.ticket_id}</Link>
                    </>
                  ) : null}
                </td>
                <td data-label="Started">{formatDate(s.date_created)}</td>
                <td data-label="Last message">{formatDate(s.last_message_at)}</td>
              </tr>
            ))}
          </tbody>
        </Table>
      ) : null}
      {list.data ? <Pager page={page} totalPages={list.data.totalPages} total={list.data.total} hasNext={!!list.data.next} onPage={(p) => navigate('/desk', { tab, search, page: p })} /> : null}
    </section>
  );
}
