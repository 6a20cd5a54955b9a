import type { ComponentChildren } from 'preact';
import { render } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import { Api, loadSession, saveSession, type Session } from './api';
import { Link, PageTitle } from './components';
import { useWaitingChats } from './desk/waiting';
import { match, navigate, useLocation } from './router';
import { HOME, NotFound, ROUTES, type Route } from './routes';
import { SignInPage } from './SignInPage';
import './styles.css';

/** A page for the other role, opened by its address: refused, saying why. */
function Refused({ session, route }: { session: Session; route: Route }) {
  const agent = session.credentials.role === 'agent';
  return (
    <section>
      <PageTitle>{agent ? 'Not for agents' : 'For support agents'}</PageTitle>
      <div class="alert alert-error" role="alert">
        <strong>{agent ? 'This page is for admins.' : 'This page is for support agents.'}</strong>
        <p>
          {agent
            ? `You are signed in as ${session.name}, a support agent. Agents cannot use ${route.nav ?? 'this page'}: it needs the API key and secret.`
            : `You are signed in with the API key and secret. ${route.nav ?? 'This page'} belongs to a signed-in agent: sign in with an agent token to use it.`}
        </p>
      </div>
      <p>
        <Link to={HOME[session.credentials.role]}>Go to your start page</Link>
      </p>
    </section>
  );
}

/** The shell: sign-in, the navigation of the caller's pages, and the page the address names (routes.tsx). */
function App() {
  const [session, setSession] = useState<Session | null>(loadSession);
  const loc = useLocation();
  const api = useMemo(() => (session ? new Api(session.credentials) : null), [session]);
  // Agents and admins both work the desk: the waiting chats are counted on every page.
  const waiting = useWaitingChats(api);

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
    page = route.roles.includes(role) ? route.render({ api, session, params, loc, waiting }) : <Refused session={session} route={route} />;
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
                  {r.badge && waiting.count > 0 ? ' ' : null}
                  {r.badge && waiting.count > 0 ? (
                    <span class="badge badge-wait count">
                      {waiting.count}
                      <span class="visually-hidden"> waiting</span>
                    </span>
                  ) : null}
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
