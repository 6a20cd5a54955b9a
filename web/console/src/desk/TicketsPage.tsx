import { CHAT, type Api } from '../api';
import { ErrorMessage, formatDate, Link, PageTitle, Pager, Progress, StatusBadge, Table } from '../components';
import { useLoad } from '../hooks';
import { navigate, type Location } from '../router';
import { TICKET_PRIORITIES, TICKET_STATUSES, type TicketSummary } from './types';

/** The tickets chats fell back to (or were converted to): filter, search, page; polled so new ones appear. */
export function TicketsPage({ api, loc }: { api: Api; loc: Location }) {
  const status = loc.query.get('status') ?? 'open,pending';
  const priority = loc.query.get('priority') ?? '';
  const search = loc.query.get('search') ?? '';
  const page = Math.max(1, Number(loc.query.get('page')) || 1);
  const params = new URLSearchParams({ orderby: 'id', order: 'desc', per_page: '20', page: String(page) });
  if (status) params.set('status__in', status);
  if (priority) params.set('priority', priority);
  if (search) params.set('search', search);
  const url = `${CHAT}/chat/agent/tickets?${params}`;
  const list = useLoad((signal) => api.page<TicketSummary>(url, { signal }), url, { minMs: 5000, maxMs: 60_000 });
  const items = list.data?.items ?? [];
  const go = (q: Record<string, string | number>) => navigate('/tickets', { status, priority, search, ...q });
  return (
    <section>
      <PageTitle>Tickets</PageTitle>
      <p class="lead">Chats that fell back to a ticket (support offline, nobody answered in time) or that an agent converted.</p>
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const f = new FormData(e.currentTarget);
          go({ status: String(f.get('status')), priority: String(f.get('priority')), search: String(f.get('search')), page: 1 });
        }}
      >
        <div class="field">
          <label class="field-label" for="tickets-status">
            Status
          </label>
          <select id="tickets-status" name="status">
            <option value="open,pending" selected={status === 'open,pending'}>
              open or pending
            </option>
            <option value="" selected={status === ''}>
              any
            </option>
            {TICKET_STATUSES.map((s) => (
              <option key={s} value={s} selected={s === status}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label class="field-label" for="tickets-priority">
            Priority
          </label>
          <select id="tickets-priority" name="priority">
            <option value="" selected={priority === ''}>
              any
            </option>
            {TICKET_PRIORITIES.map((p) => (
              <option key={p} value={p} selected={p === priority}>
                {p}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label class="field-label" for="tickets-search">
            Search subject, name or e-mail
          </label>
          <input id="tickets-search" name="search" type="search" defaultValue={search} maxLength={200} />
        </div>
        <button type="submit">Filter</button>
      </form>
      <ErrorMessage error={list.error} title="The tickets could not be loaded" />
      {list.loading && !list.data ? <Progress label="Loading the tickets…" /> : null}
      {list.data && items.length === 0 ? <p class="empty">No ticket matches.</p> : null}
      {items.length ? (
        <Table caption="Tickets" stacked>
          <thead>
            <tr>
              <th>Ticket</th>
              <th>Subject</th>
              <th>Customer</th>
              <th>Status</th>
              <th>Priority</th>
              <th>Category</th>
              <th>Changed</th>
            </tr>
          </thead>
          <tbody>
            {items.map((t) => (
              <tr key={t.id}>
                <td data-label="Ticket">
                  <Link to={`/tickets/${t.id}`}>Ticket #{t.id}</Link>
                </td>
                <td data-label="Subject">{t.subject}</td>
                <td data-label="Customer">
                  {t.customer_name || '—'} <span class="muted small">{t.customer_email}</span>
                </td>
                <td data-label="Status">
                  <StatusBadge status={t.status} />
                </td>
                <td data-label="Priority">{t.priority}</td>
                <td data-label="Category">{t.category ?? '—'}</td>
                <td data-label="Changed">{formatDate(t.date_modified)}</td>
              </tr>
            ))}
          </tbody>
        </Table>
      ) : null}
      {list.data ? <Pager page={page} totalPages={list.data.totalPages} total={list.data.total} hasNext={!!list.data.next} onPage={(p) => go({ page: p })} /> : null}
    </section>
  );
}
