import { WorkflowIdConflictPolicy } from '@temporalio/client';
import type { Db } from '../db/knex';
import { preparedRows } from '../db/prepared';
import type { ApiError } from '../http/errors';
import { zodParams } from '../http/validation';
import type { Logger } from '../logger';
import type { TemporalGateway } from '../temporal/gateway';
import { CHECK_SQL } from './check-query';
import { downloadUrl } from './downloads';
import { localeProblem, SLUG_PATTERN } from './locales';
import { TranslationPipeline, type PipelineConfig } from './pipeline';
import { checkSchema, type CheckInput } from './schema';
import { logLine, PACKAGE_TYPES, type JobStatus, type PipelineStep, type TranslationPackage } from './types';

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

/**
 * A batch item that checkSchema takes, checked without zod: an object of exactly slug, type
 * and locale, each valid by the schema's own pattern, types and locales. Else null, and zod
 * decides (with its messages). 100 zod parses were 9% of what a batch allocated (issue 14);
 * test/translations-batch-items.test.ts holds this to checkSchema.
 */
export function plainCheckInput(raw: object): CheckInput | null {
  let keys = 0;
  for (const key in raw) {
    if (!Object.hasOwn(raw, key)) return null;
    if (key !== 'slug' && key !== 'type' && key !== 'locale') return null;
    keys++;
  }
  if (keys !== 3) return null;
  const { slug, type, locale } = raw as Record<string, unknown>;
  if (typeof slug !== 'string' || typeof type !== 'string' || typeof locale !== 'string') return null;
  if (!SLUG_PATTERN.test(slug) || !(PACKAGE_TYPES as readonly string[]).includes(type) || localeProblem(locale) !== null) return null;
  return { slug, type: type as CheckInput['type'], locale };
}

/** One batch item: the status of a valid package or its own error (index = its position). */
export function parseBatchItem(raw: unknown, index: number): CheckInput | BatchError {
  let params: Record<string, string>;
  const plain = raw && typeof raw === 'object' && !Array.isArray(raw) ? plainCheckInput(raw) : null;
  if (plain) return plain;
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

/**
 * A row of CHECK_SQL: one asked package, its project and its job (nulls where there is none).
 * `version` is the project's, which is its job's too (the join asks for it).
 */
interface CheckRow {
  ord: number;
  project_id: number | null;
  version: string | null;
  job_id: number | null;
  status: JobStatus | null;
  source: string | null;
  total_strings: number | null;
  remaining_strings: number | null;
  failure_step: PipelineStep | null;
  failure_reason: string | null;
  status_changed_at: Date | null;
}

/** A package of a project that has no job yet, and the positions of the items asking for it. */
interface NewJob extends TranslationPackage {
  project_id: number;
  positions: number[];
}

/** A package within one check (its version is its project's): asked for twice, it is one job. */
const itemKey = (pkg: { slug: string; type: string; locale: string }) => `${pkg.slug}\u0000${pkg.type}\u0000${pkg.locale}`;

/** The status checks of WordPress sites: one or many packages at once, starting the pipeline of a package checked for the first time. */
export class PackageStatusChecks {
  private readonly pipeline: TranslationPipeline;

  constructor(
    private readonly db: Db,
    temporal: TemporalGateway,
    config: PipelineConfig,
  ) {
    this.pipeline = new TranslationPipeline(db, temporal, config);
  }

  /**
   * Status of each package, in request order. The answer comes from one query (the packages
   * as an unnested array joined to projects and jobs); packages of a project with no job yet
   * get their job inserted (one statement; the unique key lets one concurrent check win) and
   * their pipeline started.
   */
  async check(items: (CheckInput | BatchError)[], base: string, log: Logger): Promise<(PackageStatus | BatchError)[]> {
    // The valid items and their positions, and the statement's three arrays, in one pass (a
    // batch is the hottest read of the service: what it allocates is kept low, issue 14).
    const positions: number[] = [];
    const slugs: string[] = [];
    const types: string[] = [];
    const locales: string[] = [];
    for (let position = 0; position < items.length; position++) {
      const item = items[position];
      if ('error' in item) continue;
      positions.push(position);
      slugs.push(item.slug);
      types.push(item.type);
      locales.push(item.locale);
    }
    // Every valid item is replaced by its status below.
    const out = items.slice() as (PackageStatus | BatchError)[];
    if (positions.length === 0) return out;
    // The hottest read of the service (WordPress sites check their packages in batches): a
    // prepared statement, planned once per connection (see preparedRows).
    const rows = await preparedRows<CheckRow>(this.db, 'translations_check_v2', CHECK_SQL, [slugs, types, locales]);
    const toStart = new Map<string, NewJob>();
    for (const row of rows) {
      const position = positions[row.ord - 1];
      const item = items[position] as CheckInput;
      if (row.project_id === null) {
        out[position] = { slug: item.slug, type: item.type, locale: item.locale, status: 'missing', source: 'none', remaining_strings: 0, total_strings: 0, translated_strings: 0 };
        continue;
      }
      if (row.job_id === null) {
        const key = itemKey(item);
        const entry = toStart.get(key) ?? { project_id: row.project_id, slug: item.slug, type: item.type, version: row.version!, locale: item.locale, positions: [] };
        entry.positions.push(position);
        toStart.set(key, entry);
        continue;
      }
      out[position] = statusOf(item, row, base);
    }
    if (toStart.size > 0) await this.startPipelines([...toStart.values()], out, log);
    return out;
  }

  /**
   * Inserts the jobs and their pipelines' starts in one transaction (the workflow start
   * outbox: a job and its start exist together or not at all), then starts them at once (the
   * fast path). A start that fails here stays in the outbox: the relay starts it with the same
   * workflow id (joining a run the failed try may have started), so the job never stays
   * `importing` without its pipeline, and never gets two.
   */
  private async startPipelines(jobs: NewJob[], out: (PackageStatus | BatchError)[], log: Logger): Promise<void> {
    try {
      this.pipeline.assertAvailable();
    } catch (err) {
      // Known unreachable (or not configured): nothing is written, each new package answers 503.
      const body = (err as ApiError).toBody() as BatchError['error'];
      for (const job of jobs) for (const position of job.positions) out[position] = { index: position, error: body };
      return;
    }
    const withIds = await Promise.all(jobs.map(async (job) => ({ ...job, workflowId: await this.pipeline.workflowId(job) })));
    const { inserted, startIds } = await this.db.transaction(async (trx) => {
      const rows: (TranslationPackage & { id: number; workflow_id: string })[] = await trx('translation_jobs')
        .insert(
          withIds.map((job) => ({
            project_id: job.project_id,
            slug: job.slug,
            type: job.type,
            version: job.version,
            locale: job.locale,
            workflow_id: job.workflowId,
            logs: logLine('importing', 'First status check: pipeline started.'),
          })),
        )
        .onConflict(['slug', 'type', 'version', 'locale'])
        .ignore()
        .returning(['id', 'slug', 'type', 'version', 'locale', 'workflow_id']);
      const ids: number[] = [];
      for (const row of rows) ids.push(await this.pipeline.enqueue(trx, Number(row.id), row.workflow_id, row, undefined, WorkflowIdConflictPolicy.USE_EXISTING));
      return { inserted: rows, startIds: ids };
    });
    const mine = new Map(inserted.map((row) => [itemKey(row), row]));
    // A job another check (on any replica) inserted first: its insert has committed once ours
    // was ignored, so its id can be read and answered too.
    const lost = jobs.filter((job) => !mine.has(itemKey(job)));
    const theirs = new Map<string, number>();
    if (lost.length > 0) {
      const rows: { id: number; slug: string; type: string; locale: string }[] = await this.db('translation_jobs')
        .whereIn(['slug', 'type', 'version', 'locale'], lost.map((job) => [job.slug, job.type, job.version, job.locale]))
        .select('id', 'slug', 'type', 'locale');
      for (const row of rows) theirs.set(itemKey(row), Number(row.id));
    }
    const outcomes = await this.pipeline.startNow(startIds);
    outcomes.forEach((outcome, index) => {
      if (outcome instanceof Error) log.warn({ err: outcome, jobId: Number(inserted[index].id) }, 'translation pipeline not started yet; the start relay tries again');
    });
    for (const job of jobs) {
      const key = itemKey(job);
      const row = mine.get(key);
      const status: PackageStatus = {
        slug: job.slug,
        type: job.type,
        locale: job.locale,
        version: job.version,
        status: 'importing',
        source: 'none',
        remaining_strings: 0,
        total_strings: 0,
        translated_strings: 0,
        retry_after: retryAfterSeconds('importing', new Date()),
        ...(row ? { job_id: Number(row.id) } : theirs.has(key) ? { job_id: theirs.get(key) } : {}),
      };
      for (const position of job.positions) out[position] = status;
    }
  }
}

/** The status of a package that has a job. */
function statusOf(item: CheckInput, row: CheckRow, base: string): PackageStatus {
  const status = row.status!;
  const answer: PackageStatus = {
    slug: item.slug,
    type: item.type,
    locale: item.locale,
    version: row.version!,
    status,
    source: row.source ?? 'none',
    remaining_strings: row.remaining_strings ?? 0,
    total_strings: row.total_strings ?? 0,
    translated_strings: (row.total_strings ?? 0) - (row.remaining_strings ?? 0),
    job_id: Number(row.job_id),
  };
  if (status === 'ready') answer.download_url = downloadUrl(base, { slug: item.slug, type: item.type, version: row.version!, locale: item.locale });
  else if (status === 'failed' || status === 'expired') {
    if (row.failure_step) answer.failure_step = row.failure_step;
    if (row.failure_reason) answer.failure_reason = row.failure_reason;
  } else answer.retry_after = retryAfterSeconds(status, row.status_changed_at ?? new Date());
  return answer;
}
