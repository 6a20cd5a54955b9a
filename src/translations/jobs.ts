import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { Knex } from 'knex';
import type { Db } from '../db/knex';
import { runList, type ListQuery, type ListSpec } from '../db/list';
import { isoDate } from '../db/timestamps';
import { recordEvent } from '../events/record';
import { conflict, notFoundItem, type ApiError } from '../http/errors';
import { logger } from '../logger';
import type { TemporalGateway } from '../temporal/gateway';
import { downloadUrl } from './downloads';
import type { Entry } from './gettext';
import { WORDPRESS_LOCALES } from './locales';
import { TranslationPipeline, type PipelineConfig } from './pipeline';
import { FAILURE_KIND, IN_FLIGHT_STATUSES, JOB_STATUSES, logLine, PACKAGE_TYPES, type DecisionRefusal, type PipelineStep, type TranslationPackage } from './types';

export const jobListSpec: ListSpec = {
  idColumn: 'translation_jobs.id',
  dateCreatedColumn: 'translation_jobs.date_created',
  searchable: ['translation_jobs.slug', 'translation_jobs.locale'],
  searchTable: 'translation_jobs',
  sortable: {
    id: 'translation_jobs.id',
    slug: 'translation_jobs.slug',
    locale: 'translation_jobs.locale',
    status: 'translation_jobs.status',
    remaining_strings: 'translation_jobs.remaining_strings',
    date_created: 'translation_jobs.date_created',
    date_modified: 'translation_jobs.date_modified',
  },
  filters: {
    status: { column: 'translation_jobs.status', type: { enum: JOB_STATUSES } },
    slug: { column: 'translation_jobs.slug', type: 'string' },
    type: { column: 'translation_jobs.type', type: { enum: PACKAGE_TYPES } },
    // Known WordPress locales only: routes.ts checks them (checkLocaleFilters).
    locale: { column: 'translation_jobs.locale', type: 'string', known: WORDPRESS_LOCALES },
    version: { column: 'translation_jobs.version', type: 'string' },
    project_id: { column: 'translation_jobs.project_id', type: 'int' },
  },
};

/** Columns of a job without its strings (and, for lists, its logs). */
const JOB_COLUMNS = [
  'id', 'project_id', 'slug', 'type', 'version', 'locale', 'status', 'source', 'total_strings', 'remaining_strings', 'human_strings', 'ai_strings',
  'batches_done', 'workflow_id', 'failure_step', 'failure_reason', 'rejection_reason', 'approved_at', 'approved_by', 'package_path', 'package_size',
  'package_sha256', 'package_files', 'date_created', 'date_modified',
].map((column) => `translation_jobs.${column}`);

export function jobRecord(row: Record<string, any>, base: string, withLogs = false) {
  const step = row.failure_step as PipelineStep | null;
  return {
    id: Number(row.id),
    model: 'translation_job' as const,
    project_id: row.project_id === null ? null : Number(row.project_id),
    slug: row.slug,
    type: row.type,
    version: row.version,
    locale: row.locale,
    status: row.status,
    source: row.source,
    total_strings: row.total_strings,
    remaining_strings: row.remaining_strings,
    human_strings: row.human_strings,
    ai_strings: row.ai_strings,
    batches_done: row.batches_done,
    workflow_id: row.workflow_id,
    failure_step: step,
    failure_kind: row.status === 'expired' ? 'expired' : row.status === 'failed' && step ? FAILURE_KIND[step] : null,
    failure_reason: row.failure_reason,
    rejection_reason: row.rejection_reason,
    approved_at: isoDate(row.approved_at),
    approved_by: row.approved_by,
    download_url: row.status === 'ready' && row.package_path ? downloadUrl(base, row as TranslationPackage) : null,
    package_size: row.package_size === null ? null : Number(row.package_size),
    package_sha256: row.package_sha256,
    package_files: row.package_files,
    ...(withLogs ? { logs: row.logs } : {}),
    date_created: isoDate(row.date_created)!,
    date_modified: isoDate(row.date_modified)!,
  };
}

export const STRING_STATES = ['human', 'ai', 'missing'] as const;
export interface StringsQuery {
  page: number;
  perPage: number;
  search?: string;
  origin?: (typeof STRING_STATES)[number];
}

/** One string of a job as the API answers it. */
export interface JobString {
  index: number;
  context: string | null;
  source: string;
  plural: string | null;
  references: string[];
  note: string | null;
  translation: string[] | null;
  state: (typeof STRING_STATES)[number];
}

function jobString(index: number, e: Entry): JobString {
  const translated = Array.isArray(e.str);
  return {
    index,
    context: e.ctx ?? null,
    source: e.id,
    plural: e.plural ?? null,
    references: e.refs ?? [],
    note: e.note ?? null,
    translation: translated ? e.str : null,
    state: translated ? (e.origin === 'ai' ? 'ai' : 'human') : 'missing',
  };
}

/** The slug of the event a job's new status makes (failed and expired both end it unfinished), or null. */
const EVENT_OF_STATUS: Partial<Record<string, string>> = {
  pending_approval: 'translation_job_awaiting_approval',
  ready: 'translation_job_ready',
  failed: 'translation_job_failed',
  expired: 'translation_job_failed',
};

/**
 * After a job's status changed in `trx` (from `previous`, when the caller read it): its event,
 * with the job as the API answers it (links under `base`); none when the status stayed. The
 * workflow's activities call it in the transaction of the change.
 */
export async function recordJobStatusEvent(trx: Knex, jobId: number, base: string, previous?: string): Promise<void> {
  const row = await trx('translation_jobs').where({ id: jobId }).first(JOB_COLUMNS);
  const slug = row && row.status !== previous && EVENT_OF_STATUS[row.status];
  if (slug) await recordEvent(trx, { slug, objectId: jobId, payload: jobRecord(row, base) });
}

function notPending(status: string, action: string): ApiError {
  if (status === 'expired') {
    return conflict(
      'wu_rest_translation_job_expired',
      `This job waited for approval longer than TRANSLATION_APPROVAL_TIMEOUT_DAYS and expired, so it can no longer be ${action}; POST .../retry makes it wait for approval again.`,
      { job_status: status },
    );
  }
  return conflict('wu_rest_translation_job_not_pending', `Only a job waiting for approval (pending_approval) can be ${action}; this one is ${status}.`, { job_status: status });
}

/**
 * The jobs (one per package): reading them, and their lifecycle: approve, reject (decided by
 * the job's pipeline), retry. Which state allows what is decided here.
 */
export class TranslationJobs {
  private readonly pipeline: TranslationPipeline;

  constructor(
    private readonly db: Db,
    temporal: TemporalGateway,
    config: PipelineConfig,
  ) {
    this.pipeline = new TranslationPipeline(db, temporal, config);
  }

  async list(q: ListQuery, base: string) {
    const page = await runList<Record<string, any>>(this.db, () => this.db('translation_jobs').select(JOB_COLUMNS), q, jobListSpec);
    return { ...page, rows: page.rows.map((row) => jobRecord(row, base)) };
  }

  async get(id: number, base: string) {
    const row = await this.db('translation_jobs').where({ id }).first([...JOB_COLUMNS, 'translation_jobs.logs']);
    return row ? jobRecord(row, base, true) : null;
  }

  /**
   * A page of the job's strings in their stored order (`index`: the position among them), read from its
   * `entries` in SQL: `origin` keeps the human, AI or missing (untranslated) ones; `search` finds
   * a text in the source, plural, context or translation (case-insensitive). Null for an
   * unknown job; a job still importing has none yet.
   */
  async strings(id: number, q: StringsQuery): Promise<{ total: number; rows: JobString[] } | null> {
    const job = await this.db('translation_jobs').where({ id }).first('id');
    if (!job) return null;
    const matching = () => {
      const query = this.db
        .from('translation_jobs as j')
        .joinRaw("cross join lateral jsonb_array_elements(coalesce(j.entries, '[]'::jsonb)) with ordinality as e(value, ord)")
        .where('j.id', id);
      if (q.origin === 'missing') query.whereRaw("jsonb_typeof(e.value->'str') is distinct from 'array'");
      else if (q.origin === 'ai') query.whereRaw("jsonb_typeof(e.value->'str') = 'array' and e.value->>'origin' = 'ai'");
      else if (q.origin === 'human') query.whereRaw("jsonb_typeof(e.value->'str') = 'array' and e.value->>'origin' is distinct from 'ai'");
      if (q.search) {
        query.whereRaw(
          "strpos(lower(concat_ws(' ', e.value->>'id', e.value->>'plural', e.value->>'ctx', (select string_agg(s, ' ') from jsonb_array_elements_text(case when jsonb_typeof(e.value->'str') = 'array' then e.value->'str' else '[]'::jsonb end) as s))), lower(?)) > 0",
          [q.search],
        );
      }
      return query;
    };
    // One pass over the entries for the page and the count; past the last page, a count alone.
    const rows: { ord: string; value: Entry; total: string }[] = await matching()
      .orderBy('e.ord')
      .limit(q.perPage)
      .offset((q.page - 1) * q.perPage)
      .select('e.ord', 'e.value', this.db.raw('count(*) over () as total'));
    const total = rows.length ? Number(rows[0].total) : q.page === 1 ? 0 : Number((await matching().count<{ count: string }[]>('* as count'))[0].count);
    return { total, rows: rows.map((r) => jobString(Number(r.ord) - 1, r.value)) };
  }

  private async requireJob(id: number) {
    const row = await this.db('translation_jobs').where({ id }).first('id', 'status', 'approved_at', 'slug', 'type', 'version', 'locale', 'workflow_id', 'failure_step');
    if (!row) throw notFoundItem('translation_job');
    return row;
  }

  /** The 409 for a refused decision, from what the row says now (the refusal's reason while the row still shows the job waiting). */
  private async refusedDecision(id: number, refusal: DecisionRefusal, action: 'approved' | 'rejected'): Promise<ApiError> {
    const row = await this.requireJob(id);
    if (row.status !== 'pending_approval') return notPending(row.status, action);
    if (row.approved_at) return notPending('approved', action);
    if (refusal.state === 'deciding') {
      return conflict('wu_rest_translation_job_not_pending', `Another decision on this job is being recorded, so it was not ${action}.`, { job_status: row.status });
    }
    return notPending(refusal.state === 'not_pending' ? row.status : refusal.state, action);
  }

  /**
   * Approves a pending job (again: no-op) through the pipeline's update, which records the
   * approval (translationDecide) and goes on. Nothing is written here: no rollback to get wrong.
   */
  async approve(id: number, by: string): Promise<void> {
    const job = await this.requireJob(id);
    if (job.status !== 'pending_approval') throw notPending(job.status, 'approved');
    if (job.approved_at) return;
    const answer = await this.pipeline.approve(job, { by });
    // Approved before this call (another request, auto_approve): approving again changes nothing.
    if (answer.state === 'approved') return;
    throw await this.refusedDecision(id, answer, 'approved');
  }

  /** Rejects a pending job through the pipeline's update, which records the rejection: the job ends failed with the reason. */
  async reject(id: number, reason: string, by: string): Promise<void> {
    const job = await this.requireJob(id);
    if (job.status !== 'pending_approval' || job.approved_at) throw notPending(job.approved_at ? 'approved' : job.status, 'rejected');
    const answer = await this.pipeline.reject(job, { by, reason });
    if (answer.state === 'rejected' && 'reason' in answer) return;
    throw await this.refusedDecision(id, answer, 'rejected');
  }

  /** Approves every pending, not yet approved job matching the filters, a few updates at a time. */
  async approveMany(filter: { locale?: string; slug?: string; type?: string; version?: string }, by: string): Promise<{ approved: number[]; failed: { id: number; error: string }[] }> {
    const where: Record<string, string> = {};
    for (const field of ['locale', 'slug', 'type', 'version'] as const) if (filter[field] !== undefined) where[field] = filter[field]!;
    const rows: { id: number; workflow_id: string }[] = await this.db('translation_jobs')
      .where({ ...where, status: 'pending_approval' })
      .whereNull('approved_at')
      .orderBy('id')
      .select('id', 'workflow_id');
    const approved: number[] = [];
    const failed: { id: number; error: string }[] = [];
    for (let i = 0; i < rows.length; i += 10) {
      await Promise.all(
        rows.slice(i, i + 10).map(async (job) => {
          try {
            const answer = await this.pipeline.approve(job, { by, bulk: true });
            if (answer.state === 'approved') approved.push(Number(job.id));
            else failed.push({ id: Number(job.id), error: (await this.refusedDecision(Number(job.id), answer, 'approved')).message });
          } catch (err) {
            failed.push({ id: Number(job.id), error: (err as Error).message });
          }
        }),
      );
    }
    return { approved: approved.sort((a, b) => a - b), failed };
  }

  /**
   * Starts a failed job again from the step it failed in (an expired one: waiting for approval). A job shown in progress whose
   * workflow no longer runs (terminated by an operator, history lost) is restarted from its
   * current step the same way; one whose workflow runs is refused.
   */
  /** `base`: where the job's links point (the event a retry to pending_approval writes carries them). */
  async retry(id: number, base: string): Promise<void> {
    const job = await this.requireJob(id);
    let from: PipelineStep;
    let note: string;
    if (job.status === 'failed' || job.status === 'expired') {
      from = job.failure_step ?? 'importing';
      note = job.status === 'expired' ? 'Retry of an expired job: waiting for approval again.' : `Retry from ${from}.`;
    } else if (IN_FLIGHT_STATUSES.includes(job.status)) {
      if (await this.pipeline.startWaiting(job.workflow_id)) {
        throw conflict('wu_rest_translation_job_not_failed', `This job's pipeline is waiting to be started (the workflow service was unreachable); it starts by itself.`, { job_status: job.status });
      }
      const state = await this.pipeline.runStatus(job.workflow_id);
      if (state === 'RUNNING') {
        throw conflict('wu_rest_translation_job_not_failed', `Only a failed job can be retried; this one is ${job.status} and its workflow is running.`, { job_status: job.status });
      }
      from = job.status as PipelineStep;
      note = `Restarted from ${from}: its workflow was ${state === null ? 'not found' : state.toLowerCase()}.`;
    } else {
      throw conflict('wu_rest_translation_job_not_failed', `Only a failed job can be retried; this one is ${job.status}.`, { job_status: job.status });
    }
    this.pipeline.assertAvailable();
    // The status and the new run's start in one transaction (the outbox); the failed run has
    // finished (or is finishing): the new run replaces it, under the job's stored workflow id.
    const startId = await this.db.transaction(async (trx) => {
      const updated = await trx('translation_jobs')
        .where({ id, status: job.status })
        .update({
          status: from,
          failure_step: null,
          failure_reason: null,
          // A retry gives the AI provider a fresh error budget (TRANSLATION_AI_ERROR_BUDGET).
          provider_failures: 0,
          batch_provider_failures: 0,
          ...(from === 'pending_approval' ? { rejection_reason: null, approved_at: null, approved_by: null } : {}),
          status_changed_at: trx.fn.now(),
          date_modified: trx.fn.now(),
          logs: trx.raw('logs || ?::jsonb', [logLine(from, note)]),
        });
      if (updated === 0) throw conflict('wu_rest_translation_job_not_failed', 'The job changed meanwhile; try again.');
      await recordJobStatusEvent(trx, id, base);
      return this.pipeline.enqueue(trx, id, job.workflow_id, job, from, WorkflowIdConflictPolicy.TERMINATE_EXISTING);
    });
    const [outcome] = await this.pipeline.startNow([startId]);
    // Not started now: the start relay tries again (the job shows its step meanwhile).
    if (outcome instanceof Error) logger.warn({ err: outcome, jobId: id }, 'translation retry not started yet; the start relay tries again');
  }
}
