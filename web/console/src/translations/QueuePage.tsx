import { useEffect, useState } from 'preact/hooks';
import { localPath, newIdempotencyKey, type Api } from '../api';
import { ErrorMessage, Field, formatDate, Link, Notice, PageTitle, Pager, Progress, StatusBadge, Table } from '../components';
import { useAction, useLoad } from '../hooks';
import { navigate, type Location } from '../router';
import { IN_PROGRESS, VIEWS, type Job } from './types';

const PER_PAGE = 20;

/**
 * The admin's queue: jobs by state (waiting for approval first), polled with backoff so jobs
 * move between states on screen; bulk approval by locale or by project.
 */
export function QueuePage({ api, loc }: { api: Api; loc: Location }) {
  const viewId = loc.query.get('view') ?? 'pending';
  const view = VIEWS.find((v) => v.id === viewId) ?? VIEWS[0];
  const search = loc.query.get('search') ?? '';
  const page = Math.max(1, Number(loc.query.get('page')) || 1);
  const go = (changes: Record<string, string | number | undefined>) => navigate('/translations', { view: view.id, search, page, ...changes });

  const params = new URLSearchParams({ per_page: String(PER_PAGE), page: String(page), orderby: 'id', order: 'desc' });
  if (view.statuses.length === 1) params.set('status', view.statuses[0]);
  else if (view.statuses.length > 1) params.set('status__in', view.statuses.join(','));
  if (search) params.set('search', search);
  const [bulkResult, setBulkResult] = useState<string | null>(null);
  useEffect(() => setBulkResult(null), [view.id]);
  const list = useLoad((signal) => api.page<Job>(`/wp-json/wu/v2/translations/jobs?${params.toString()}`, { signal }), params.toString(), { minMs: 2000, maxMs: 30_000 });

  return (
    <section>
      <PageTitle>Translations</PageTitle>
      <p class="lead">
        Language packs of the registered plugins and themes. Approve the jobs waiting for approval; the pipeline then fills the gaps with AI and builds the pack.{' '}
        <Link to="/translations/register">Register a project</Link>
      </p>
      <nav class="tabs" aria-label="Job states">
        {VIEWS.map((v) => (
          <Link key={v.id} to="/translations" query={{ view: v.id, search }} aria-current={v.id === view.id ? 'page' : undefined} class={v.id === view.id ? 'tab tab-current' : 'tab'}>
            {v.label}
          </Link>
        ))}
      </nav>
      <form
        class="toolbar"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          go({ search: String(new FormData(e.currentTarget).get('search') ?? ''), page: 1 });
        }}
      >
        <Field label="Search slug or locale">
          <input name="search" type="search" defaultValue={search} maxLength={200} />
        </Field>
        <button type="submit">Search</button>
      </form>
      <ErrorMessage error={list.error} title="The jobs could not be loaded" />
      {list.data === undefined && list.loading ? <Progress label="Loading jobs…" /> : null}
      {list.data ? (
        <>
          {list.data.items.length === 0 ? (
            <p class="empty">No {view.id === 'all' ? '' : `${view.label.toLowerCase()} `}jobs{search ? ` matching “${search}”` : ''}.</p>
          ) : (
            <JobsTable jobs={list.data.items} />
          )}
          <Pager page={page} total={list.data.total} totalPages={list.data.totalPages} hasNext={list.data.next !== null} onPage={(p) => go({ page: p })} />
          <p class="muted small" aria-live="off">
            Updated {new Date().toLocaleTimeString()}; this list refreshes by itself.
          </p>
        </>
      ) : null}
      {/* Above the form: the approved jobs leave this view, and the form with them. */}
      {bulkResult ? <Notice>{bulkResult}</Notice> : null}
      {view.id === 'pending' && list.data && list.data.items.length > 0 ? (
        <BulkApprove
          api={api}
          jobs={list.data.items}
          onDone={(message) => {
            setBulkResult(message);
            list.reload();
          }}
        />
      ) : null}
    </section>
  );
}

function JobsTable({ jobs }: { jobs: Job[] }) {
  return (
    <Table caption="Translation jobs" stacked>
      <thead>
        <tr>
          <th scope="col">Job</th>
          <th scope="col">Package</th>
          <th scope="col">Version</th>
          <th scope="col">Locale</th>
          <th scope="col">State</th>
          <th scope="col" class="num">
            Strings
          </th>
          <th scope="col" class="num">
            Human
          </th>
          <th scope="col" class="num">
            Missing
          </th>
          <th scope="col">Updated</th>
          <th scope="col">Pack</th>
        </tr>
      </thead>
      <tbody>
        {jobs.map((job) => (
          <tr key={job.id} data-job={job.id}>
            <td data-label="Job">
              <Link to={`/translations/jobs/${job.id}`}>
                #{job.id}
                <span class="visually-hidden">
                  {' '}
                  {job.slug} {job.locale}
                </span>
              </Link>
            </td>
            <td data-label="Package">
              {job.slug} <span class="muted">({job.type})</span>
            </td>
            <td data-label="Version">{job.version}</td>
            <td data-label="Locale">{job.locale}</td>
            <td data-label="State">
              <StatusBadge status={job.status} />
              {job.approved_at && job.status === 'pending_approval' ? <span class="muted"> approved</span> : null}
              {IN_PROGRESS.includes(job.status) ? <span class="spinner" aria-hidden="true" /> : null}
            </td>
            <td class="num" data-label="Strings">
              {job.total_strings}
            </td>
            <td class="num" data-label="Human">
              {job.human_strings}
            </td>
            <td class="num" data-label="Missing">
              {job.remaining_strings}
            </td>
            <td data-label="Updated">{formatDate(job.date_modified)}</td>
            <td data-label="Pack">
              {job.download_url ? (
                <a href={localPath(job.download_url)} download>
                  Download<span class="visually-hidden"> the {job.locale} pack of {job.slug}</span>
                </a>
              ) : (
                '—'
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

/** Approves every waiting job of a locale, or of a project (slug and type), in one call. */
function BulkApprove({ api, jobs, onDone }: { api: Api; jobs: Job[]; onDone: (message: string) => void }) {
  const locales = [...new Set(jobs.map((j) => j.locale))].sort();
  const projects = [...new Set(jobs.map((j) => `${j.type}:${j.slug}`))].sort();
  const [by, setBy] = useState<'locale' | 'project'>('locale');
  const [value, setValue] = useState('');
  const action = useAction();
  const options = by === 'locale' ? locales : projects;
  const chosen = options.includes(value) ? value : options[0];

  const submit = async (e: Event) => {
    e.preventDefault();
    const [type, slug] = chosen.split(':');
    const body = by === 'locale' ? { locale: chosen } : { type, slug };
    await action.run(async () => {
      const out = await api.wu<{ approved: number[]; failed: { id: number; error: string }[] }>('/translations/jobs/approve', { method: 'POST', body, idempotencyKey: newIdempotencyKey() });
      onDone(
        `Approved ${out.approved.length} job${out.approved.length === 1 ? '' : 's'}.` +
          (out.failed.length ? ` Not approved: ${out.failed.map((f) => `#${f.id} (${f.error})`).join('; ')}` : ''),
      );
    });
  };

  return (
    <form class="panel panel-form" onSubmit={(e) => void submit(e)} aria-labelledby="bulk-title">
      <h2 id="bulk-title">Approve many at once</h2>
      <fieldset class="inline">
        <legend>Approve every waiting job of</legend>
        <label>
          <input type="radio" name="by" value="locale" checked={by === 'locale'} onChange={() => setBy('locale')} /> a locale
        </label>
        <label>
          <input type="radio" name="by" value="project" checked={by === 'project'} onChange={() => setBy('project')} /> a project
        </label>
      </fieldset>
      <Field label={by === 'locale' ? 'Locale' : 'Project'}>
        <select value={chosen} onChange={(e) => setValue(e.currentTarget.value)}>
          {options.map((o) => (
            <option key={o} value={o}>
              {by === 'project' ? o.replace(':', ' ') : o}
            </option>
          ))}
        </select>
      </Field>
      <button type="submit" disabled={action.busy}>
        {action.busy ? 'Approving…' : 'Approve all waiting'}
      </button>
      {action.busy ? <Progress label="Approving the jobs through their pipelines…" /> : null}
      <ErrorMessage error={action.error} title="Bulk approval failed" />
    </form>
  );
}
