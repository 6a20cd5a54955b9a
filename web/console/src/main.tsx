import type { ComponentChildren } from 'preact';
import { render } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import { AgentHomePage } from './AgentHomePage';
import { Api, loadSession, saveSession, type Session } from './api';
import { Link, PageTitle } from './components';
import { ListPage } from './records/ListPage';
import { RecordPage } from './records/RecordPage';
import { RESOURCE_NAMES, RESOURCES, type ResourceName } from './records/resources';
import { match, navigate, useLocation, type Location } from './router';
import { SignInPage } from './SignInPage';
import { JobPage } from './translations/JobPage';
import { QueuePage } from './translations/QueuePage';
import { RegisterPage } from './translations/RegisterPage';
import './styles.css';

type Role = 'admin' | 'agent';

interface Route {
  pattern: string;
  /** Who may open it: an agent opening an admin page is refused with a message. */
  roles: Role[];
  /** In the navigation, under this label. */
  nav?: string;
  render: (ctx: { api: Api; session: Session; params: Record<string, string>; loc: Location }) => ComponentChildren;
}

/**
 * The routes: one line each. The agent desk (chat sessions, tickets, reports) adds its own here,
 * with roles ['agent', 'admin'].
 */
const ROUTES: Route[] = [
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
  { pattern: '/agent', roles: ['agent'], nav: 'My availability', render: ({ api, session }) => <AgentHomePage api={api} session={session} /> },
];

const HOME: Record<Role, string> = { admin: '/translations', agent: '/agent' };

function NotFound() {
  return (
    <section>
      <PageTitle>Page not found</PageTitle>
      <p>
        There is no such page. <Link to="/">Go to the start page</Link>.
      </p>
    </section>
  );
}

function Refused({ session, route }: { session: Session; route: Route }) {
  return (
    <section>
      <PageTitle>Not for agents</PageTitle>
      <div class="alert alert-error" role="alert">
        <strong>This page is for admins.</strong>
        <p>
          You are signed in as {session.name}, a support agent. Agents cannot use {route.nav ?? 'this page'}: it needs the API key and secret.
        </p>
      </div>
      <p>
        <Link to={HOME.agent}>Go to your page</Link>
      </p>
    </section>
  );
}

function App() {
  const [session, setSession] = useState<Session | null>(loadSession);
  const loc = useLocation();
  const api = useMemo(() => (session ? new Api(session.credentials) : null), [session]);

  if (!session || !api) {
    return (
      <SignInPage
        onSignedIn={(s) => {
          saveSession(s);
          setSession(s);
          if (loc.path === '/') navigate(HOME[s.credentials.role]);
        }}
      />
    );
  }
  const role = session.credentials.role;
  if (loc.path === '/') navigate(HOME[role]);
  let page: ComponentChildren = <NotFound />;
  for (const route of ROUTES) {
    const params = match(route.pattern, loc.path);
    if (!params) continue;
    page = route.roles.includes(role) ? route.render({ api, session, params, loc }) : <Refused session={session} route={route} />;
    break;
  }
  const signOut = () => {
    saveSession(null);
    setSession(null);
    navigate('/');
  };
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to the content
      </a>
      <header class="top">
        <span class="brand">hostflow console</span>
        <nav aria-label="Main">
          <ul>
            {ROUTES.filter((r) => r.nav && r.roles.includes(role)).map((r) => (
              <li key={r.pattern}>
                <Link to={r.pattern} aria-current={loc.path.startsWith(r.pattern) ? 'page' : undefined}>
                  {r.nav}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          {session.name} ({role})
          <button type="button" class="link" onClick={signOut}>
            Sign out
          </button>
        </span>
      </header>
      <main id="main" tabIndex={-1}>
        {page}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
