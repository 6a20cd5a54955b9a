import { useState } from 'preact/hooks';
import { signIn, type Session } from './api';
import { ErrorMessage, Field, PageTitle, Progress } from './components';
import { useAction } from './hooks';

/**
 * Admins sign in with the API key and secret, agents with their agent token. The credentials
 * are checked against the API before anything is kept, and kept in sessionStorage only.
 */
export function SignInPage({ onSignedIn }: { onSignedIn: (session: Session) => void }) {
  const [role, setRole] = useState<'admin' | 'agent'>('admin');
  const action = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    void action.run(async () => {
      const session =
        role === 'admin'
          ? await signIn({ role: 'admin', key: String(form.get('key')).trim(), secret: String(form.get('secret')) })
          : await signIn({ role: 'agent', token: String(form.get('token')).trim() });
      onSignedIn(session);
    });
  };
  return (
    <main id="main" class="signin">
      <PageTitle>Sign in to the hostflow console</PageTitle>
      <form class="panel stack" onSubmit={submit} aria-describedby="signin-note">
        <fieldset class="inline">
          <legend>I am</legend>
          <label>
            <input type="radio" name="role" value="admin" checked={role === 'admin'} onChange={() => setRole('admin')} /> an admin (API key and secret)
          </label>
          <label>
            <input type="radio" name="role" value="agent" checked={role === 'agent'} onChange={() => setRole('agent')} /> a support agent (agent token)
          </label>
        </fieldset>
        {role === 'admin' ? (
          <>
            <Field label="API key">
              <input name="key" required autoComplete="username" spellcheck={false} />
            </Field>
            <Field label="API secret">
              <input name="secret" type="password" required autoComplete="current-password" />
            </Field>
          </>
        ) : (
          <Field label="Agent token" hint="hfa_…, given by an admin (npm run cli -- agents create).">
            <input name="token" type="password" required autoComplete="current-password" spellcheck={false} />
          </Field>
        )}
        <button type="submit" class="primary" disabled={action.busy}>
          {action.busy ? 'Signing in…' : 'Sign in'}
        </button>
        {action.busy ? <Progress label="Checking the credentials…" /> : null}
        <ErrorMessage error={action.error} title="Not signed in" />
        <p id="signin-note" class="muted small">
          The credentials stay in this browser tab only (session storage) and are sent to this server alone.
        </p>
      </form>
    </main>
  );
}
