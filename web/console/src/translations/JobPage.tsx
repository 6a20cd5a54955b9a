import { useState } from 'preact/hooks';
import { localPath, type Api } from '../api';
import { ErrorMessage, Field, formatDate, Link, Notice, PageTitle, Pager, Progress, StatusBadge, Table, WorkflowLink } from '../components';
import { useAction, useLoad } from '../hooks';
import { navigate, type Location } from '../router';
import { IN_PROGRESS, type Job, type JobString } from './types';

const STATES = [
  { id: '', label: 'All strings' },
  { id: 'missing', label: 'Missing' },
  { id: 'human', label: 'Human' },
  { id: 'ai', label: 'AI' },
];

/** One job: its counts, its decision (approve, reject with a reason, retry), its download, its strings and its logs. */
export function JobPage({ api, id, loc }: { api: Api; id: number; loc: Location }) {
  // Polled while the pipeline works or waits; a finished job (ready, failed) stops polling.
  const job = useLoad((signal) => api.wu<Job>(`/translations/jobs/${id}`, { signal }), `job-${id}`, { minMs: 1500, maxMs: 20_000, while: (j) => (j as Job).status !== 'ready' });
  const [notice, setNotice] = useState<string | null>(null);

  if (!job.data) {
    return (
      <section>
        <PageTitle>Translation job #{id}</PageTitle>
        <ErrorMessage error={job.error} title="The job could not be loaded" />
        {job.loading ? <Progress label="Loading the job…" /> : null}
      </section>
    );
  }
  const j = job.data;
  const done = j.total_strings - j.remaining_strings;
  return (
    <section>
      <p>
        <Link to="/translations">← Back to the queue</Link>
      </p>
      <PageTitle>
        {j.slug} {j.version} · {j.locale}
      </PageTitle>
      <dl class="facts">
        <div>
          <dt>State</dt>
          <dd data-testid="job-status">
            <StatusBadge status={j.status} />
            {j.approved_at ? (
              <span class="muted">
                {' '}
                approved {formatDate(j.approved_at)} by {j.approved_by}
              </span>
            ) : null}
          </dd>
        </div>
        <div>
          <dt>Package</dt>
          <dd>
            {j.type} {j.slug}, version {j.version}
          </dd>
        </div>
        <div>
          <dt>Strings</dt>
          <dd>
            {j.total_strings} in all: {j.human_strings} human, {j.ai_strings} AI, {j.remaining_strings} missing
          </dd>
        </div>
        <div>
          <dt>Workflow</dt>
          <dd>
            <WorkflowLink workflowId={j.workflow_id}>Open the pipeline in the Temporal UI</WorkflowLink>
          </dd>
        </div>
      </dl>
      <ErrorMessage error={job.error} title="The job could not be refreshed" />
      {notice && j.status !== 'ready' ? <Notice>{notice}</Notice> : null}
      {IN_PROGRESS.includes(j.status) ? (
        j.status === 'processing' && j.total_strings > 0 ? (
          <Progress label={`Translating: ${done} of ${j.total_strings} strings`} value={done} max={j.total_strings} />
        ) : (
          <Progress label={j.status === 'importing' ? 'Importing the strings…' : j.status === 'packaging' ? 'Building the language pack…' : 'Working…'} />
        )
      ) : null}
      {j.status === 'pending_approval' && !j.approved_at ? <Decision api={api} job={j} onDone={(message) => (setNotice(message), job.reload())} /> : null}
      {j.status === 'pending_approval' && j.approved_at ? <Progress label="Approved: the pipeline goes on…" /> : null}
      {j.status === 'failed' || j.status === 'expired' ? <Failure api={api} job={j} onDone={(message) => (setNotice(message), job.reload())} /> : null}
      {j.status === 'ready' && j.download_url ? (
        <p class="panel">
          <a class="button" href={localPath(j.download_url)} download data-testid="download">
            Download the language pack ({j.slug}-{j.locale}.zip{j.package_size ? `, ${Math.ceil(j.package_size / 1024)} KB` : ''})
          </a>
        </p>
      ) : null}
      <Strings api={api} job={j} loc={loc} />
      <Logs job={j} />
    </section>
  );
}

function Decision({ api, job, onDone }: { api: Api; job: Job; onDone: (message: string) => void }) {
  const action = useAction();
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState('');
  const approve = () =>
    void action.run(async () => {
      await api.wu<Job>(`/translations/jobs/${job.id}/approve`, { method: 'POST', body: {} });
      onDone('Approved. The pipeline fills the missing strings and builds the pack; this page follows it.');
    });
  const reject = (e: Event) => {
    e.preventDefault();
    void action.run(async () => {
      await api.wu<Job>(`/translations/jobs/${job.id}/reject`, { method: 'POST', body: { reason } });
      setRejecting(false);
      onDone('Rejected: the job ends failed with your reason.');
    });
  };
  return (
    <div class="panel" role="group" aria-labelledby="decision-title">
      <h2 id="decision-title">Waiting for your approval</h2>
      <p>Check the strings below, then approve the job or reject it with a reason.</p>
      <div class="actions">
        <button type="button" class="primary" onClick={approve} disabled={action.busy}>
          {action.busy && !rejecting ? 'Approving…' : 'Approve'}
        </button>
        <button type="button" onClick={() => setRejecting(!rejecting)} aria-expanded={rejecting} disabled={action.busy}>
          Reject…
        </button>
      </div>
      {rejecting ? (
        <form onSubmit={reject} class="stack">
          <Field label="Why is it rejected?" hint="Kept in the job's logs; at most 1000 characters.">
            <textarea value={reason} onInput={(e) => setReason(e.currentTarget.value)} required maxLength={1000} rows={3} />
          </Field>
          <button type="submit" class="danger" disabled={action.busy || reason.trim() === ''}>
            Reject the job
          </button>
        </form>
      ) : null}
      <ErrorMessage error={action.error} title="The decision was not recorded" />
    </div>
  );
}

/** A failed or expired job: the step it stopped at and why, and a retry from there (a rejected or expired one waits for approval again). */
function Failure({ api, job, onDone }: { api: Api; job: Job; onDone: (message: string) => void }) {
  const action = useAction();
  const step = job.failure_step ?? 'importing';
  const waitsAgain = job.status === 'expired' || job.failure_kind === 'rejected';
  const retry = () =>
    void action.run(async () => {
      await api.wu<Job>(`/translations/jobs/${job.id}/retry`, { method: 'POST', body: {} });
      onDone(waitsAgain ? 'The job waits for approval again.' : `Retrying from ${step.replace(/_/g, ' ')}.`);
    });
  const title = job.status === 'expired' ? 'Expired: nobody approved it in time' : job.failure_kind === 'rejected' ? 'Rejected' : `Failed while ${step.replace(/_/g, ' ')}`;
  return (
    <div class="alert alert-error" role="alert" data-testid="failure">
      <strong>{title}</strong>
      <p>
        Step: {step.replace(/_/g, ' ')}
        {job.failure_kind ? ` (${job.failure_kind})` : ''}
      </p>
      <p>Why: {job.rejection_reason ?? job.failure_reason ?? 'no reason was recorded.'}</p>
      <button type="button" onClick={retry} disabled={action.busy}>
        {action.busy ? 'Retrying…' : waitsAgain ? 'Ask for approval again' : `Retry from ${step.replace(/_/g, ' ')}`}
      </button>
      <ErrorMessage error={action.error} title="The retry was refused" />
    </div>
  );
}

function Strings({ api, job, loc }: { api: Api; job: Job; loc: Location }) {
  const search = loc.query.get('search') ?? '';
  const state = loc.query.get('state') ?? '';
  const page = Math.max(1, Number(loc.query.get('page')) || 1);
  const go = (changes: Record<string, string | number>) => navigate(`/translations/jobs/${job.id}`, { search, state, page, ...changes });
  const params = new URLSearchParams({ page: String(page), per_page: '25' });
  if (search) params.set('search', search);
  if (state) params.set('state', state);
  // Reloaded when the job's counts change (an AI batch landed).
  const key = `${params.toString()}|${job.remaining_strings}|${job.ai_strings}`;
  const list = useLoad((signal) => api.page<JobString>(`/wp-json/wu/v2/translations/jobs/${job.id}/strings?${params.toString()}`, { signal }), key);
  return (
    <section aria-labelledby="strings-title">
      <h2 id="strings-title">Strings</h2>
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          const form = new FormData(e.currentTarget);
          go({ search: String(form.get('search') ?? ''), state: String(form.get('state') ?? ''), page: 1 });
        }}
      >
        <Field label="Search the strings">
          <input name="search" type="search" defaultValue={search} maxLength={200} />
        </Field>
        <Field label="Show">
          <select name="state">
            {STATES.map((s) => (
              <option key={s.id} value={s.id} selected={s.id === state}>
                {s.label}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit">Filter</button>
      </form>
      <ErrorMessage error={list.error} title="The strings could not be loaded" />
      {list.data === undefined && list.loading ? <Progress label="Loading strings…" /> : null}
      {list.data ? (
        list.data.items.length === 0 ? (
          <p class="empty">{job.total_strings === 0 ? 'No strings yet: the job is still importing.' : 'No string matches.'}</p>
        ) : (
          <>
            <Table caption="Strings of the job" stacked>
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">Source</th>
                  <th scope="col">Translation</th>
                  <th scope="col">From</th>
                </tr>
              </thead>
              <tbody>
                {list.data.items.map((s) => (
                  <tr key={s.index} class={`string-${s.state}`}>
                    <td class="num" data-label="#">
                      {s.index + 1}
                    </td>
                    <td data-label="Source">
                      {s.context ? <span class="context">{s.context}</span> : null}
                      <span lang="en">{s.source}</span>
                      {s.plural ? <span class="plural"> / {s.plural}</span> : null}
                      {s.note ? <span class="note">{s.note}</span> : null}
                    </td>
                    <td data-label="Translation" lang={job.locale.replace('_', '-')}>{s.translation ? s.translation.join(' / ') : <em class="missing">missing (falls back to English)</em>}</td>
                    <td data-label="From">
                      <span class={`badge badge-${s.state === 'missing' ? 'bad' : s.state === 'ai' ? 'busy' : 'ok'}`}>{s.state === 'ai' ? 'AI' : s.state}</span>
                    </td>
                  </tr>
                ))}
              </tbody>
            </Table>
            <Pager page={page} total={list.data.total} totalPages={list.data.totalPages} hasNext={list.data.next !== null} onPage={(p) => go({ page: p })} />
          </>
        )
      ) : null}
    </section>
  );
}

function Logs({ job }: { job: Job }) {
  const logs = job.logs ?? [];
  return (
    <section aria-labelledby="logs-title">
      <h2 id="logs-title">Logs</h2>
      {logs.length === 0 ? (
        <p class="empty">No log lines yet.</p>
      ) : (
        <ol class="logs">
          {logs.map((line, i) => (
            <li key={i} class={`log-${line.level}`}>
              <time dateTime={line.at}>{formatDate(line.at)}</time> <span class="badge badge-plain">{line.step}</span> {line.message}
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
