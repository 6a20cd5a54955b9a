import type { ComponentChildren } from 'preact';
import { AgentHomePage } from './AgentHomePage';
import type { Api, Session } from './api';
import { Link, PageTitle } from './components';
import { ConversationPage } from './desk/ConversationPage';
import { DeskPage } from './desk/DeskPage';
import { LazyReports } from './desk/LazyReports';
import { TicketPage } from './desk/TicketPage';
import { TicketsPage } from './desk/TicketsPage';
import type { ChatSession } from './desk/types';
import { ListPage } from './records/ListPage';
import { RecordPage } from './records/RecordPage';
import { RESOURCE_NAMES, RESOURCES, type ResourceName } from './records/resources';
import type { Location } from './router';
import { JobPage } from './translations/JobPage';
import { QueuePage } from './translations/QueuePage';
import { RegisterPage } from './translations/RegisterPage';

export type Role = 'admin' | 'agent';

export interface Route {
  pattern: string;
  /** Who may open it: an agent opening an admin page is refused with a message. */
  roles: Role[];
  /** In the navigation, under this label. */
  nav?: string;
  /** Shows the count of chats waiting for an agent beside its navigation label. */
  badge?: boolean;
  render: (ctx: { api: Api; session: Session; params: Record<string, string>; loc: Location; waiting: Waiting }) => ComponentChildren;
}

export interface Waiting {
  count: number;
  newest: ChatSession | null;
}

/** The routes: one line each. The agent desk (chat sessions, tickets, reports) is for agents and admins. */
export const ROUTES: Route[] = [
  { pattern: '/translations', roles: ['admin'], nav: 'Translations', render: ({ api, loc }) => <QueuePage api={api} loc={loc} /> },
  { pattern: '/translations/register', roles: ['admin'], render: ({ api }) => <RegisterPage api={api} /> },
  { pattern: '/translations/jobs/:id', roles: ['admin'], render: ({ api, params, loc }) => <JobPage key={params.id} api={api} id={Number(params.id)} loc={loc} /> },
  ...RESOURCE_NAMES.map(
    (name): Route => ({ pattern: `/records/${name}`, roles: ['admin'], nav: RESOURCES[name].title, render: ({ api, loc }) => <ListPage key={name} api={api} name={name} loc={loc} /> }),
  ),
  {
    pattern: '/records/:resource/:id',
    roles: ['admin'],
    render: ({ api, params }) =>
      RESOURCE_NAMES.includes(params.resource as ResourceName) && /^\d{1,15}$/.test(params.id) ? (
        <RecordPage key={`${params.resource}/${params.id}`} api={api} name={params.resource as ResourceName} id={Number(params.id)} />
      ) : (
        <NotFound />
      ),
  },
  { pattern: '/desk', roles: ['agent', 'admin'], nav: 'Desk', badge: true, render: ({ api, session, loc, waiting }) => <DeskPage api={api} session={session} loc={loc} waiting={waiting} /> },
  { pattern: '/desk/sessions/:id', roles: ['agent', 'admin'], render: ({ api, session, params }) => (/^\d{1,15}$/.test(params.id) ? <ConversationPage key={params.id} api={api} session={session} id={Number(params.id)} /> : <NotFound />) },
  { pattern: '/tickets', roles: ['agent', 'admin'], nav: 'Tickets', render: ({ api, loc }) => <TicketsPage api={api} loc={loc} /> },
  { pattern: '/tickets/:id', roles: ['agent', 'admin'], render: ({ api, params }) => (/^\d{1,15}$/.test(params.id) ? <TicketPage key={params.id} api={api} id={Number(params.id)} /> : <NotFound />) },
  { pattern: '/reports', roles: ['agent', 'admin'], nav: 'Reports', render: ({ api, loc }) => <LazyReports api={api} loc={loc} /> },
  { pattern: '/agent', roles: ['agent'], nav: 'My availability', render: ({ api, session }) => <AgentHomePage api={api} session={session} /> },
];

export const HOME: Record<Role, string> = { admin: '/translations', agent: '/agent' };

export function NotFound() {
  return (
    <section>
      <PageTitle>Page not found</PageTitle>
      <p>
        There is no such page. <Link to="/">Go to the start page</Link>.
      </p>
    </section>
  );
}

