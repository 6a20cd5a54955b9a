import { WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, type UpdateDefinition } from '@temporalio/common';
import { DECISION_REFUSED, translationApproveUpdate, translationPipeline, translationRejectUpdate } from '../../workflows/translationPipeline';
import type { Config } from '../config';
import { isPgError, PG_UNIQUE_VIOLATION } from '../db/errors';
import { preparedRows, type Db } from '../db/knex';
import { ApiError, conflict, invalidParams, notFoundItem, temporalUnavailable as temporalUnavailableError } from '../http/errors';
import { runList, type ListQuery, type ListSpec } from '../http/list';
import { isoDate, zodParams } from '../http/validation';
import { OutboundPolicy, urlRefusal } from '../infra/outbound-http';
import { logger, type Logger } from '../logger';
import type { TemporalGateway } from '../temporal/gateway';
import { enqueueStart, startPending, WorkflowStarts, type OutboxStart } from '../temporal/starts';
import { CHECK_SQL } from './check-query';
import { assertParsable, GettextError } from './gettext';
import { glotpressUrl, WORDPRESS_LOCALES } from './locales';
import { packageKey } from './package';
import { checkSchema, type CheckInput, type CreateProject, type UpdateProject } from './schema';
import {
  decisionUpdateId,
  FAILURE_KIND,
  JOB_STATUSES,
  PACKAGE_TYPES,
  type DecisionRefusal,
  type JobStatus,
  type PipelineInput,
  type PipelineStep,
} from './types';

const IN_FLIGHT: JobStatus[] = ['importing', 'pending_approval', 'processing', 'packaging'];

export const projectListSpec: ListSpec = {
  idColumn: 'translation_projects.id',
  dateCreatedColumn: 'translation_projects.date_created',
  searchable: ['translation_projects.slug', 'translation_projects.name'],
  sortable: {
    id: 'translation_projects.id',
    slug: 'translation_projects.slug',
    name: 'translation_projects.name',
    date_created: 'translation_projects.date_created',
    date_modified: 'translation_projects.date_modified',
  },
  filters: {
    slug: { column: 'translation_projects.slug', type: 'string' },
    type: { column: 'translation_projects.type', type: { enum: PACKAGE_TYPES } },
    auto_approve: { column: 'translation_projects.auto_approve', type: 'bool' },
  },
};

export const jobListSpec: ListSpec = {
  idColumn: 'translation_jobs.id',
  dateCreatedColumn: 'translation_jobs.date_created',
  searchable: ['translation_jobs.slug', 'translation_jobs.locale'],
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
].map((c) => `translation_jobs.${c}`);

export function temporalUnavailable(detail?: string): ApiError {
  return temporalUnavailableError('The translation pipeline cannot be reached right now', detail);
}

/** An approve or reject whose answer did not come: it may or may not have been recorded, and asking again is safe. */
function decisionUnconfirmed(detail?: string): ApiError {
  return temporalUnavailableError(
    'The decision could not be confirmed',
    detail,
    'Sending the same request again is safe: it is the same decision (update approve-<job id> or reject-<job id>), which the pipeline records at most once.',
  );
}

/** Why the pipeline refused a decision, or null when the update failed for another reason. */
function refusalOf(err: WorkflowUpdateFailedError): DecisionRefusal | null {
  const cause = err.cause;
  if (!(cause instanceof ApplicationFailure) || cause.type !== DECISION_REFUSED) return null;
  return (cause.details?.[0] as DecisionRefusal | undefined) ?? { state: 'not_pending' };
}

/**
 * Suggested poll delay (contract rule 1: clients poll with increasing delay). It grows with the
 * time the package has spent in its state: a fresh job is polled again soon, an old one less
 * often; waiting for an administrator grows the slowest to the longest delay.
 */
export function retryAfterSeconds(status: JobStatus, statusChangedAt: Date, now = Date.now()): number {
  const age = Math.max(0, (now - statusChangedAt.getTime()) / 1000);
  const [base, cap] = status === 'pending_approval' ? [60, 3600] : status === 'processing' ? [10, 300] : [5, 300];
  return Math.min(cap, Math.round(base + age / 4));
}

export interface PackageStatus {
  slug: string;
  type: string;
  locale: string;
  version?: string;
  status: string;
  source: string;
  remaining_strings: number;
  total_strings: number;
  translated_strings: number;
  download_url?: string;
  retry_after?: number;
  failure_step?: PipelineStep;
  failure_reason?: string;
  job_id?: number;
}

export interface BatchError {
  index: number;
  error: { code: string; message: string; data: { status: number; params?: Record<string, string> } };
}

interface CheckRow {
  ord: number;
  project_id: number | null;
  project_version: string | null;
  job_id: number | null;
  version: string | null;
  status: JobStatus | null;
  source: string | null;
  total_strings: number | null;
  remaining_strings: number | null;
  failure_step: PipelineStep | null;
  failure_reason: string | null;
  status_changed_at: Date | null;
}

function projectRecord(row: Record<string, any>) {
  return {
    id: Number(row.id),
    model: 'translation_project' as const,
    slug: row.slug,
    type: row.type,
    name: row.name,
    version: row.version,
    pot_url: row.pot_url ?? null,
    pot_size: row.pot_size === null || row.pot_size === undefined ? null : Number(row.pot_size),
    glotpress_url_template: row.glotpress_url_template ?? null,
    po_locales: (row.po_locales ?? []).slice().sort(),
    auto_approve: row.auto_approve,
    date_created: isoDate(row.date_created)!,
    date_modified: isoDate(row.date_modified)!,
  };
}

const PROJECT_COLUMNS = [
  'translation_projects.id', 'slug', 'type', 'name', 'version', 'pot_url', 'glotpress_url_template', 'auto_approve', 'date_created', 'date_modified',
].map((c) => (c.includes('.') ? c : `translation_projects.${c}`));

export class TranslationService {
  private readonly outbound: OutboundPolicy;

  constructor(
    private readonly db: Db,
    private readonly temporal: TemporalGateway,
    private readonly config: Pick<
      Config,
      'TRANSLATION_GLOTPRESS_URL_TEMPLATE' | 'TRANSLATION_AI_MAX_TRIES' | 'TRANSLATION_APPROVAL_TIMEOUT_DAYS' | 'TRANSLATION_BATCHES_PER_RUN' | 'OUTBOUND_ALLOWED_HOSTS'
    >,
  ) {
    this.outbound = new OutboundPolicy(config.OUTBOUND_ALLOWED_HOSTS);
  }

  /** URL of a package; `base` is the namespace URL (…/wp-json/wu/v2). */
  static downloadUrl(base: string, j: { type: string; slug: string; version: string; locale: string }): string {
    return `${base}/translations/packages/${j.type}/${j.slug}/${encodeURIComponent(j.version)}/${j.locale}.zip`;
  }

  // ---- projects ----------------------------------------------------------------------------

  private projectQuery() {
    return this.db('translation_projects').select([
      ...PROJECT_COLUMNS,
      this.db.raw('octet_length(translation_projects.pot) as pot_size'),
      this.db.raw('array(select jsonb_object_keys(translation_projects.po_files)) as po_locales'),
    ]);
  }

  async listProjects(q: ListQuery) {
    const page = await runList<Record<string, any>>(this.db, () => this.projectQuery(), q, projectListSpec);
    return { ...page, rows: page.rows.map(projectRecord) };
  }

  async getProject(id: number) {
    const row = await this.projectQuery().where('translation_projects.id', id).first();
    return row ? projectRecord(row) : null;
  }

  /**
   * What create and update can tell before anything runs: the POT and PO texts parse, and the
   * URLs do not name an address the server refuses to fetch from (names are checked after DNS,
   * at fetch time). All problems at once, naming each field.
   */
  private checkInput(input: { pot?: string | null; po_files?: Record<string, string>; pot_url?: string | null; glotpress_url_template?: string | null }): void {
    const params: Record<string, string> = {};
    const url = (raw: string | null | undefined, name: string) => {
      const refusal = raw ? urlRefusal(this.outbound, raw) : null;
      if (refusal) params[name] = refusal.kind === 'invalid_url' ? `${name} ${refusal.message}` : `${name}: ${refusal.message}`;
    };
    url(input.pot_url, 'pot_url');
    // A sample package stands in for the placeholders.
    if (input.glotpress_url_template) url(glotpressUrl(input.glotpress_url_template, 'example', 'plugin', 'de_DE'), 'glotpress_url_template');
    const check = (text: string, name: string, what: string) => {
      try {
        assertParsable(text, what);
      } catch (err) {
        if (err instanceof GettextError) params[name] = `${name}: ${err.message}`;
        else throw err;
      }
    };
    if (input.pot) check(input.pot, 'pot', 'The POT file');
    for (const [loc, text] of Object.entries(input.po_files ?? {})) check(text, `po_files.${loc}`, `The PO file for ${loc}`);
    if (Object.keys(params).length) throw invalidParams(params);
  }

  private taken(err: unknown): never {
    if (isPgError(err, PG_UNIQUE_VIOLATION)) throw invalidParams({ slug: 'slug: a translation project with this slug and type already exists.' });
    throw err;
  }

  async createProject(input: CreateProject) {
    this.checkInput(input);
    const row = {
      slug: input.slug,
      type: input.type,
      name: input.name,
      version: input.version,
      pot: input.pot ?? null,
      pot_url: input.pot_url ?? null,
      glotpress_url_template: input.glotpress_url_template === undefined ? this.config.TRANSLATION_GLOTPRESS_URL_TEMPLATE : input.glotpress_url_template,
      po_files: JSON.stringify(input.po_files ?? {}),
      auto_approve: input.auto_approve ?? false,
    };
    const [created] = await this.db('translation_projects').insert(row).returning('id').catch((err) => this.taken(err));
    return (await this.getProject(Number(created.id)))!;
  }

  async updateProject(id: number, input: UpdateProject) {
    this.checkInput(input);
    return this.db.transaction(async (trx) => {
      const current = await trx('translation_projects').where({ id }).forUpdate().first('pot', 'pot_url', 'po_files');
      if (!current) return null;
      const pot = input.pot === undefined ? current.pot : input.pot;
      const potUrl = input.pot_url === undefined ? current.pot_url : input.pot_url;
      if (!pot && !potUrl) throw invalidParams({ pot: 'pot (the POT file as text) or pot_url is required: a project cannot have neither.' });
      const patch: Record<string, unknown> = { date_modified: trx.fn.now() };
      for (const k of ['slug', 'type', 'name', 'version', 'glotpress_url_template', 'auto_approve', 'pot', 'pot_url'] as const) {
        if (input[k] !== undefined) patch[k] = input[k];
      }
      // Uploaded PO files are merged by locale (send a locale again to replace its file).
      if (input.po_files) patch.po_files = JSON.stringify({ ...(current.po_files ?? {}), ...input.po_files });
      await trx('translation_projects').where({ id }).update(patch).catch((err) => this.taken(err));
      return true;
    }).then(async (ok) => (ok ? this.getProject(id) : null));
  }

  /** Refused while a job of the project is in flight; finished packages stay downloadable. */
  async removeProject(id: number): Promise<boolean> {
    return this.db.transaction(async (trx) => {
      const p = await trx('translation_projects').where({ id }).forUpdate().first('id');
      if (!p) return false;
      const busy = await trx('translation_jobs').where({ project_id: id }).whereIn('status', IN_FLIGHT).count({ n: '*' });
      if (Number(busy[0].n) > 0) {
        throw conflict('wu_rest_translation_project_in_use', `This project has ${busy[0].n} translation job(s) in progress; wait for them, or reject them, before deleting it.`, {
          referenced_by: 'translation_jobs',
        });
      }
      await trx('translation_projects').where({ id }).delete();
      return true;
    });
  }

  // ---- status checks -----------------------------------------------------------------------

  /**
   * Status of each package, in request order. The answer comes from one query (the packages
   * as an unnested array joined to projects and jobs); packages of a project with no job yet
   * get their job inserted (one statement; the unique key lets one concurrent check win) and
   * their pipeline started.
   */
  async check(items: (CheckInput | BatchError)[], base: string, log: Logger): Promise<(PackageStatus | BatchError)[]> {
    const valid = items.map((it, i) => ({ it, i })).filter((x): x is { it: CheckInput; i: number } => !('error' in x.it));
    // Every valid item is replaced by its status below.
    const out = items.slice() as (PackageStatus | BatchError)[];
    if (valid.length === 0) return out;
    // The hottest read of the service (WordPress sites check their packages in batches): a
    // prepared statement, planned once per connection (see preparedRows).
    const rows = await preparedRows<CheckRow>(this.db, 'translations_check_v1', CHECK_SQL, [
      valid.map((v) => v.it.slug),
      valid.map((v) => v.it.type),
      valid.map((v) => v.it.locale),
    ]);
    const toStart = new Map<string, { project_id: number; slug: string; type: string; version: string; locale: string; idx: number[] }>();
    for (const row of rows) {
      const { it, i } = valid[row.ord - 1];
      if (row.project_id === null) {
        out[i] = { slug: it.slug, type: it.type, locale: it.locale, status: 'missing', source: 'none', remaining_strings: 0, total_strings: 0, translated_strings: 0 };
        continue;
      }
      if (row.job_id === null) {
        const key = `${it.slug}\u0000${it.type}\u0000${it.locale}`;
        const entry = toStart.get(key) ?? { project_id: row.project_id, slug: it.slug, type: it.type, version: row.project_version!, locale: it.locale, idx: [] };
        entry.idx.push(i);
        toStart.set(key, entry);
        continue;
      }
      out[i] = this.statusOf(it, row, base);
    }
    if (toStart.size > 0) await this.startPipelines([...toStart.values()], out, log);
    return out;
  }

  private statusOf(it: CheckInput, row: CheckRow, base: string): PackageStatus {
    const status = row.status!;
    const s: PackageStatus = {
      slug: it.slug,
      type: it.type,
      locale: it.locale,
      version: row.version!,
      status,
      source: row.source ?? 'none',
      remaining_strings: row.remaining_strings ?? 0,
      total_strings: row.total_strings ?? 0,
      translated_strings: (row.total_strings ?? 0) - (row.remaining_strings ?? 0),
      job_id: Number(row.job_id),
    };
    if (status === 'ready') s.download_url = TranslationService.downloadUrl(base, { ...it, version: row.version! });
    else if (status === 'failed' || status === 'expired') {
      if (row.failure_step) s.failure_step = row.failure_step;
      if (row.failure_reason) s.failure_reason = row.failure_reason;
    } else s.retry_after = retryAfterSeconds(status, new Date(row.status_changed_at ?? Date.now()));
    return s;
  }

  /**
   * Inserts the jobs and their pipelines' starts in one transaction (the workflow start
   * outbox: a job and its start exist together or not at all), then starts them at once (the
   * fast path). A start that fails here stays in the outbox: the relay starts it with the same
   * workflow id (joining a run the failed try may have started), so the job never stays
   * `importing` without its pipeline, and never gets two.
   */
  private async startPipelines(
    jobs: { project_id: number; slug: string; type: string; version: string; locale: string; idx: number[] }[],
    out: (PackageStatus | BatchError)[],
    log: Logger,
  ): Promise<void> {
    try {
      this.temporal.check(temporalUnavailable);
    } catch (err) {
      // Known unreachable (or not configured): nothing is written, each new package answers 503.
      const body = (err as ApiError).toBody() as BatchError['error'];
      for (const j of jobs) for (const i of j.idx) out[i] = { index: i, error: body };
      return;
    }
    const withIds = await Promise.all(jobs.map(async (j) => ({ ...j, workflowId: await this.temporal.ids.build('translation', j.slug, j.type, j.version, j.locale) })));
    const { inserted, startIds } = await this.db.transaction(async (trx) => {
      const rows: { id: number; slug: string; type: string; version: string; locale: string; workflow_id: string }[] = await trx('translation_jobs')
        .insert(
          withIds.map((j) => ({
            project_id: j.project_id,
            slug: j.slug,
            type: j.type,
            version: j.version,
            locale: j.locale,
            workflow_id: j.workflowId,
            logs: JSON.stringify([{ at: new Date().toISOString(), step: 'importing', level: 'info', message: 'First status check: pipeline started.' }]),
          })),
        )
        .onConflict(['slug', 'type', 'version', 'locale'])
        .ignore()
        .returning(['id', 'slug', 'type', 'version', 'locale', 'workflow_id']);
      const ids: number[] = [];
      for (const r of rows) ids.push(await enqueueStart(trx, this.pipelineStart(Number(r.id), r.workflow_id, r, undefined, WorkflowIdConflictPolicy.USE_EXISTING)));
      return { inserted: rows, startIds: ids };
    });
    const mine = new Map(inserted.map((r) => [`${r.slug}\u0000${r.type}\u0000${r.locale}`, r]));
    // A job another check (on any replica) inserted first: its insert has committed once ours
    // was ignored, so its id can be read and answered too.
    const lost = jobs.filter((j) => !mine.has(`${j.slug}\u0000${j.type}\u0000${j.locale}`));
    const theirs = new Map<string, number>();
    if (lost.length > 0) {
      const rows: { id: number; slug: string; type: string; locale: string }[] = await this.db('translation_jobs')
        .whereIn(['slug', 'type', 'version', 'locale'], lost.map((j) => [j.slug, j.type, j.version, j.locale]))
        .select('id', 'slug', 'type', 'locale');
      for (const r of rows) theirs.set(`${r.slug}\u0000${r.type}\u0000${r.locale}`, Number(r.id));
    }
    const outcomes = await new WorkflowStarts(this.db, this.temporal).startNow(startIds, temporalUnavailable);
    outcomes.forEach((o, k) => {
      if (o instanceof Error) log.warn({ err: o, jobId: Number(inserted[k].id) }, 'translation pipeline not started yet; the start relay tries again');
    });
    for (const j of jobs) {
      const key = `${j.slug}\u0000${j.type}\u0000${j.locale}`;
      const row = mine.get(key);
      const status: PackageStatus = {
        slug: j.slug,
        type: j.type,
        locale: j.locale,
        version: j.version,
        status: 'importing',
        source: 'none',
        remaining_strings: 0,
        total_strings: 0,
        translated_strings: 0,
        retry_after: retryAfterSeconds('importing', new Date()),
        ...(row ? { job_id: Number(row.id) } : theirs.has(key) ? { job_id: theirs.get(key) } : {}),
      };
      for (const i of j.idx) out[i] = status;
    }
  }

  /** The outbox entry of a job's pipeline (its workflow id is the one stored on the job). */
  private pipelineStart(
    jobId: number,
    workflowId: string,
    j: { slug: string; type: string; version: string; locale: string },
    fromStep: PipelineStep | undefined,
    conflictPolicy: WorkflowIdConflictPolicy,
  ): OutboxStart<typeof translationPipeline> {
    const input: PipelineInput = {
      jobId,
      slug: j.slug,
      type: j.type as PipelineInput['type'],
      version: j.version,
      locale: j.locale,
      aiMaxTries: this.config.TRANSLATION_AI_MAX_TRIES,
      approvalTimeoutSeconds: Math.max(1, Math.round(this.config.TRANSLATION_APPROVAL_TIMEOUT_DAYS * 86_400)),
      batchesPerRun: this.config.TRANSLATION_BATCHES_PER_RUN,
      ...(fromStep ? { fromStep } : {}),
    };
    return {
      workflow: translationPipeline,
      workflowId,
      args: [input],
      conflictPolicy,
      // A retry (or a package built again after its job was removed) reuses the id.
      reusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      memo: { job_id: jobId, slug: j.slug, type: j.type, version: j.version, locale: j.locale, ...(fromStep ? { from_step: fromStep } : {}) },
      summary: `Translation pipeline, ${j.type} ${j.slug} ${j.version} ${j.locale} (job ${jobId})${fromStep ? `, retry from ${fromStep}` : ''}`,
    };
  }

  // ---- jobs --------------------------------------------------------------------------------

  jobRecord(row: Record<string, any>, base: string, withLogs = false) {
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
      download_url: row.status === 'ready' && row.package_path ? TranslationService.downloadUrl(base, row as { type: string; slug: string; version: string; locale: string }) : null,
      package_size: row.package_size === null ? null : Number(row.package_size),
      package_sha256: row.package_sha256,
      package_files: row.package_files,
      ...(withLogs ? { logs: row.logs } : {}),
      date_created: isoDate(row.date_created)!,
      date_modified: isoDate(row.date_modified)!,
    };
  }

  async listJobs(q: ListQuery, base: string) {
    const page = await runList<Record<string, any>>(this.db, () => this.db('translation_jobs').select(JOB_COLUMNS), q, jobListSpec);
    return { ...page, rows: page.rows.map((r) => this.jobRecord(r, base)) };
  }

  async getJob(id: number, base: string) {
    const row = await this.db('translation_jobs').where({ id }).first([...JOB_COLUMNS, 'translation_jobs.logs']);
    return row ? this.jobRecord(row, base, true) : null;
  }

  private async requireJob(id: number) {
    const row = await this.db('translation_jobs').where({ id }).first('id', 'status', 'approved_at', 'slug', 'type', 'version', 'locale', 'workflow_id', 'failure_step');
    if (!row) throw notFoundItem('translation_job');
    return row;
  }

  private notPending(status: string, action: string): ApiError {
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
   * Asks the job's pipeline to decide (an update, README "Decisions: updates and signals"): its
   * answer, or its refusal (the DecisionRefusal), or the 409 for a run that has ended. The
   * update id makes a retried call, here or by the client, decide at most once.
   */
  private async decide<Ret, A>(job: { id: number; workflow_id: string }, update: UpdateDefinition<Ret, [A]>, decision: 'approve' | 'reject', arg: A): Promise<Ret | DecisionRefusal> {
    try {
      return await this.temporal.update(job.workflow_id, update, [arg], decisionUpdateId(decision, Number(job.id)), decisionUnconfirmed);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) {
        throw conflict('wu_rest_translation_workflow_not_running', 'The pipeline of this job is not running (it was terminated or lost); POST .../retry restarts it from its step.');
      }
      if (err instanceof WorkflowUpdateFailedError) {
        const refusal = refusalOf(err);
        if (refusal) return refusal;
        // A worker of the code from before decisions were updates took it (a rolling deploy).
        if (/No registered handler for update/.test((err.cause as Error | undefined)?.message ?? '')) {
          throw decisionUnconfirmed('a worker of older code, without decision updates, answered; the new workers take over within the deploy');
        }
      }
      throw err;
    }
  }

  /** The 409 for a refused decision, from what the row says now (the refusal's reason while the row still shows the job waiting). */
  private async refusedDecision(id: number, refusal: DecisionRefusal, action: 'approved' | 'rejected'): Promise<ApiError> {
    const row = await this.requireJob(id);
    if (row.status !== 'pending_approval') return this.notPending(row.status, action);
    if (row.approved_at) return this.notPending('approved', action);
    if (refusal.state === 'deciding') {
      return conflict('wu_rest_translation_job_not_pending', `Another decision on this job is being recorded, so it was not ${action}.`, { job_status: row.status });
    }
    return this.notPending(refusal.state === 'not_pending' ? row.status : refusal.state, action);
  }

  private logEntry(step: string, message: string) {
    return this.db.raw('logs || ?::jsonb', [JSON.stringify([{ at: new Date().toISOString(), step, level: 'info', message }])]);
  }

  /**
   * Approves a pending job (again: no-op) through the pipeline's update, which records the
   * approval (translationDecide) and goes on. Nothing is written here: no rollback to get wrong.
   */
  async approve(id: number, by: string): Promise<void> {
    const job = await this.requireJob(id);
    if (job.status !== 'pending_approval') throw this.notPending(job.status, 'approved');
    if (job.approved_at) return;
    const answer = await this.decide(job, translationApproveUpdate, 'approve', { by });
    // Approved before this call (another request, auto_approve): approving again changes nothing.
    if (answer.state === 'approved') return;
    throw await this.refusedDecision(id, answer, 'approved');
  }

  /** Rejects a pending job through the pipeline's update, which records the rejection: the job ends failed with the reason. */
  async reject(id: number, reason: string, by: string): Promise<void> {
    const job = await this.requireJob(id);
    if (job.status !== 'pending_approval' || job.approved_at) throw this.notPending(job.approved_at ? 'approved' : job.status, 'rejected');
    const answer = await this.decide(job, translationRejectUpdate, 'reject', { by, reason });
    if (answer.state === 'rejected' && 'reason' in answer) return;
    throw await this.refusedDecision(id, answer, 'rejected');
  }

  /** Approves every pending, not yet approved job matching the filters, a few updates at a time. */
  async approveMany(filter: { locale?: string; slug?: string; type?: string; version?: string }, by: string): Promise<{ approved: number[]; failed: { id: number; error: string }[] }> {
    const where: Record<string, string> = {};
    for (const k of ['locale', 'slug', 'type', 'version'] as const) if (filter[k] !== undefined) where[k] = filter[k]!;
    const rows: { id: number; workflow_id: string }[] = await this.db('translation_jobs')
      .where({ ...where, status: 'pending_approval' })
      .whereNull('approved_at')
      .orderBy('id')
      .select('id', 'workflow_id');
    const approved: number[] = [];
    const failed: { id: number; error: string }[] = [];
    for (let i = 0; i < rows.length; i += 10) {
      await Promise.all(
        rows.slice(i, i + 10).map(async (r) => {
          try {
            const answer = await this.decide(r, translationApproveUpdate, 'approve', { by, bulk: true });
            if (answer.state === 'approved') approved.push(Number(r.id));
            else failed.push({ id: Number(r.id), error: (await this.refusedDecision(Number(r.id), answer, 'approved')).message });
          } catch (err) {
            failed.push({ id: Number(r.id), error: (err as Error).message });
          }
        }),
      );
    }
    return { approved: approved.sort((a, b) => a - b), failed };
  }

  /** Whether the job's workflow is running (null: there is no such workflow). */
  private async workflowRunning(workflowId: string): Promise<string | null> {
    try {
      const d = await this.temporal.call(temporalUnavailable, (c) => c.workflow.getHandle(workflowId).describe());
      return d.status.name;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return null;
      throw err;
    }
  }

  /**
   * Starts a failed job again from the step it failed in (an expired one: waiting for approval). A job shown in progress whose
   * workflow no longer runs (terminated by an operator, history lost) is restarted from its
   * current step the same way; one whose workflow runs is refused.
   */
  async retry(id: number): Promise<void> {
    const job = await this.requireJob(id);
    let from: PipelineStep;
    let note: string;
    if (job.status === 'failed' || job.status === 'expired') {
      from = job.failure_step ?? 'importing';
      note = job.status === 'expired' ? 'Retry of an expired job: waiting for approval again.' : `Retry from ${from}.`;
    } else if (IN_FLIGHT.includes(job.status)) {
      if (await startPending(this.db, job.workflow_id)) {
        throw conflict('wu_rest_translation_job_not_failed', `This job's pipeline is waiting to be started (the workflow service was unreachable); it starts by itself.`, { job_status: job.status });
      }
      const state = await this.workflowRunning(job.workflow_id);
      if (state === 'RUNNING') {
        throw conflict('wu_rest_translation_job_not_failed', `Only a failed job can be retried; this one is ${job.status} and its workflow is running.`, { job_status: job.status });
      }
      from = job.status as PipelineStep;
      note = `Restarted from ${from}: its workflow was ${state === null ? 'not found' : state.toLowerCase()}.`;
    } else {
      throw conflict('wu_rest_translation_job_not_failed', `Only a failed job can be retried; this one is ${job.status}.`, { job_status: job.status });
    }
    this.temporal.check(temporalUnavailable);
    // The status and the new run's start in one transaction (the outbox); the failed run has
    // finished (or is finishing): the new run replaces it, under the job's stored workflow id.
    const startId = await this.db.transaction(async (trx) => {
      const n = await trx('translation_jobs')
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
          logs: this.logEntry(from, note),
        });
      if (n === 0) throw conflict('wu_rest_translation_job_not_failed', 'The job changed meanwhile; try again.');
      return enqueueStart(trx, this.pipelineStart(id, job.workflow_id, job, from, WorkflowIdConflictPolicy.TERMINATE_EXISTING));
    });
    const [outcome] = await new WorkflowStarts(this.db, this.temporal).startNow([startId], temporalUnavailable);
    // Not started now: the start relay tries again (the job shows its step meanwhile).
    if (outcome instanceof Error) logger.warn({ err: outcome, jobId: id }, 'translation retry not started yet; the start relay tries again');
  }

  // ---- downloads ---------------------------------------------------------------------------

  /** The object key of a ready package's zip, or null. */
  async packageFile(p: { type: string; slug: string; version: string; locale: string }): Promise<{ key: string; size: number; sha256: string } | null> {
    const row = await this.db('translation_jobs').where({ ...p, status: 'ready' }).whereNotNull('package_path').first('package_path', 'package_size', 'package_sha256');
    if (!row) return null;
    return { key: packageKey(row.package_path), size: Number(row.package_size), sha256: row.package_sha256 };
  }
}

/** One batch item: the status of a valid package or its own error (index = its position). */
export function parseBatchItem(raw: unknown, index: number): CheckInput | BatchError {
  let params: Record<string, string>;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) {
    params = { [`packages.${index}`]: `packages.${index} must be an object with slug, type and locale.` };
  } else {
    const parsed = checkSchema.safeParse(raw);
    if (parsed.success) return parsed.data;
    params = zodParams(parsed.error, raw, `packages.${index}`);
  }
  const names = Object.keys(params);
  return { index, error: { code: 'wu_rest_invalid_parameter', message: `Invalid parameter(s): ${names.join(', ')}`, data: { status: 400, params } } };
}
