import type { Api, Session } from './api';
import { ErrorMessage, formatDate, PageTitle, Progress, StatusBadge } from './components';
import { useAction, useLoad } from './hooks';

interface Availability {
  status: { online: boolean; reason: string; expected_wait_seconds?: number };
  agents: { id: number; name: string; presence: 'online' | 'away' | 'offline'; presence_changed_at: string | null; active: boolean }[];
}

const PRESENCES = ['online', 'away', 'offline'] as const;

/** An agent's start page: their own availability (presence) and who else is on, kept fresh by polling. */
export function AgentHomePage({ api, session }: { api: Api; session: Session }) {
  const data = useLoad((signal) => api.chat<Availability>('/chat/agent/availability', { signal }), 'availability', { minMs: 5000, maxMs: 60_000 });
  const action = useAction();
  const me = data.data?.agents.find((a) => a.id === session.agentId);
  const setPresence = (presence: string) =>
    void action.run(async () => {
      await api.chat('/chat/agent/availability', { method: 'POST', body: { presence } });
      data.reload();
    });
  return (
    <section>
      <PageTitle>Hello, {session.name}</PageTitle>
      <ErrorMessage error={data.error} title="The availability could not be loaded" />
      {data.loading && !data.data ? <Progress label="Loading…" /> : null}
      {data.data ? (
        <>
          <p class="lead">
            Support is {data.data.status.online ? 'online' : 'offline'} ({data.data.status.reason.replace(/_/g, ' ')}).
          </p>
          {me ? (
            <fieldset class="panel inline">
              <legend>My availability</legend>
              {PRESENCES.map((p) => (
                <label key={p}>
                  <input type="radio" name="presence" value={p} checked={me.presence === p} disabled={action.busy} onChange={() => setPresence(p)} /> {p}
                </label>
              ))}
            </fieldset>
          ) : null}
          <ErrorMessage error={action.error} title="The availability was not changed" />
          <h2>Agents</h2>
          <ul class="plain">
            {data.data.agents
              .filter((a) => a.active)
              .map((a) => (
                <li key={a.id}>
                  {a.name} <StatusBadge status={a.presence === 'online' ? 'active' : a.presence} /> <span class="muted small">since {formatDate(a.presence_changed_at)}</span>
                </li>
              ))}
          </ul>
        </>
      ) : null}
    </section>
  );
}
