import { ApplicationFailure, Context, heartbeat } from '@temporalio/activity';
import type { Knex } from 'knex';
import { WU_NAMESPACE, type Config } from '../src/config';
import type { Db } from '../src/db/knex';
import type { ObjectStorage } from '../src/infra/object-storage';
import { OutboundError, outboundFetch, OutboundPolicy, urlForMessages, type OutboundResponse } from '../src/infra/outbound-http';
import { logger } from '../src/logger';
import { applyHuman, GettextError, parsePot, placeholderProblem, poTranslations, type Entry } from '../src/translations/gettext';
import { recordJobStatusEvent } from '../src/translations/jobs';
import { glotpressLocale, glotpressUrl, languageName, pluralForms } from '../src/translations/locales';
import { buildPackage } from '../src/translations/package';
import { MAX_GETTEXT } from '../src/translations/schema';
import { logLine, sourceLabel, type Decision, type DecisionOutcome, type PipelineStep } from '../src/translations/types';

/**
 * The side effects of the translation pipeline (workflow `translationPipeline`). Each activity
 * reads the job's row, does its part and writes the outcome (status, strings, counts, logs) in
 * one statement or transaction, so a retried activity repeats nothing that was recorded.
 */

/** Error types the workflow tells apart. */
export const TRANSLATION_INVALID = 'TranslationInvalid';
export const TRANSLATION_REJECTED_INPUT = 'TranslationInputInvalid';
/** A batch the provider failed TRANSLATION_AI_MAX_TRIES times (details[0]: that count). */
export const TRANSLATION_PROVIDER_TRIES_SPENT = 'TranslationProviderTriesSpent';
/** The job's provider failures reached TRANSLATION_AI_ERROR_BUDGET. */
export const TRANSLATION_PROVIDER_BUDGET_SPENT = 'TranslationProviderBudgetSpent';

export interface TranslationActivityDeps {
  db: Db;
  /** Where packs are stored, for every API replica to serve. */
  storage: ObjectStorage;
  config: Pick<
    Config,
    | 'PUBLIC_URL'
    | 'REST_PREFIX'
    | 'TRANSLATION_AI_BASE_URL'
    | 'TRANSLATION_AI_MODEL'
    | 'TRANSLATION_AI_API_KEY'
    | 'TRANSLATION_AI_BATCH_SIZE'
    | 'TRANSLATION_AI_MAX_TRIES'
    | 'TRANSLATION_AI_ERROR_BUDGET'
    | 'TRANSLATION_AI_TIMEOUT_SECONDS'
    | 'TRANSLATION_FETCH_TIMEOUT_SECONDS'
    | 'OUTBOUND_ALLOWED_HOSTS'
  >;
}

/** Largest answer read from the AI provider (a batch of at most 500 strings). */
const AI_ANSWER_MAX_BYTES = 5_000_000;

interface JobRow {
  id: number;
  project_id: number | null;
  slug: string;
  type: string;
  version: string;
  locale: string;
  status: string;
  entries: Entry[] | null;
  approved_at: Date | null;
  batches_done: number;
}

function counts(entries: Entry[]) {
  const human = entries.filter((e) => e.str && e.origin === 'human').length;
  const ai = entries.filter((e) => e.str && e.origin === 'ai').length;
  return {
    total_strings: entries.length,
    remaining_strings: entries.filter((e) => !e.str).length,
    human_strings: human,
    ai_strings: ai,
    source: sourceLabel(human, ai),
  };
}

/**
 * A POT or PO file from a URL an administrator gave: through the guarded client, at most as
 * large as a POT may be in a body. Failures say what failed, never what the other side sent.
 */
async function fetchGettext(policy: OutboundPolicy, url: string, timeoutSeconds: number, what: string): Promise<{ status: number; text: string }> {
  try {
    const res = await outboundFetch(policy, url, {
      headers: { Accept: 'text/x-gettext-translation, text/plain, */*' },
      maxBytes: MAX_GETTEXT,
      timeoutMs: timeoutSeconds * 1000,
    });
    return { status: res.status, text: res.body.toString('utf8') };
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    const msg = `${what} could not be fetched from ${urlForMessages(url)}: ${err.message}`;
    throw err.retryable ? ApplicationFailure.retryable(msg) : ApplicationFailure.nonRetryable(msg, TRANSLATION_REJECTED_INPUT);
  }
}

/**
 * Parses gettext text; a failure stops the import. `fetched`: the text came from elsewhere,
 * so the failure names the problem and never quotes the content.
 */
function gettextOrFail<T>(parse: () => T, fetched?: string): T {
  try {
    return parse();
  } catch (err) {
    if (!(err instanceof GettextError)) throw err;
    throw ApplicationFailure.nonRetryable(fetched ? `${fetched} is not a valid gettext file: ${err.problem}.` : err.message, TRANSLATION_REJECTED_INPUT);
  }
}

/** A wait as people say it: "30 days", "12 hours", "6 seconds". */
function waitLabel(seconds: number): string {
  const [n, unit] = seconds >= 86_400 ? [seconds / 86_400, 'day'] : seconds >= 3600 ? [seconds / 3600, 'hour'] : [seconds, 'second'];
  const rounded = Math.round(n * 10) / 10;
  return `${rounded} ${unit}${rounded === 1 ? '' : 's'}`;
}

export function providerConfigured(config: TranslationActivityDeps['config']): boolean {
  return Boolean(config.TRANSLATION_AI_BASE_URL && config.TRANSLATION_AI_MODEL);
}

export function createTranslationActivities(deps: TranslationActivityDeps) {
  const { db, config, storage } = deps;
  const policy = new OutboundPolicy(config.OUTBOUND_ALLOWED_HOSTS);

  const job = async (jobId: number): Promise<JobRow> => {
    const row = await db('translation_jobs').where({ id: jobId }).first('id', 'project_id', 'slug', 'type', 'version', 'locale', 'status', 'entries', 'approved_at', 'batches_done');
    if (!row) throw ApplicationFailure.nonRetryable(`Translation job ${jobId} no longer exists.`, TRANSLATION_REJECTED_INPUT);
    return row as JobRow;
  };

  // Where event payloads link to (no request here: PUBLIC_URL, or paths from the REST root).
  const apiBase = `${config.PUBLIC_URL?.replace(/\/$/, '') ?? ''}${config.REST_PREFIX}/${WU_NAMESPACE}`;
  // A status change and its event (awaiting approval, ready, failed) in one transaction.
  const changeStatus = (jobId: number, change: (trx: Knex.Transaction) => Promise<unknown>) =>
    db.transaction(async (trx) => {
      const before = await trx('translation_jobs').where({ id: jobId }).forUpdate().first('status');
      await change(trx);
      await recordJobStatusEvent(trx, jobId, apiBase, before?.status);
    });
  const setStatus = (jobId: number, status: string, step: string, message: string, extra: Record<string, unknown> = {}) =>
    changeStatus(jobId, (trx) =>
      trx('translation_jobs')
        .where({ id: jobId })
        .update({
          status,
          ...extra,
          status_changed_at: trx.fn.now(),
          date_modified: trx.fn.now(),
          logs: trx.raw('logs || ?::jsonb', [logLine(step, message)]),
        }),
    );

  return {
    /**
     * importing: the POT (stored or fetched), the uploaded PO of the locale and the GlotPress
     * export, matched by context, text and plural; then pending_approval.
     */
    async translationImport(jobId: number): Promise<{ total: number; remaining: number; autoApprove: boolean }> {
      const j = await job(jobId);
      await setStatus(jobId, 'importing', 'importing', 'Import started.', { failure_step: null, failure_reason: null });
      const project = j.project_id ? await db('translation_projects').where({ id: j.project_id }).first() : null;
      if (!project) throw ApplicationFailure.nonRetryable('The translation project of this package was deleted.', TRANSLATION_REJECTED_INPUT);
      const notes: string[] = [];

      const { nplurals } = pluralForms(j.locale);
      let entries: Entry[];
      if (project.pot) entries = gettextOrFail(() => parsePot(project.pot));
      else {
        const res = await fetchGettext(policy, project.pot_url, config.TRANSLATION_FETCH_TIMEOUT_SECONDS, 'The POT file');
        if (res.status !== 200) {
          const msg = `The POT file could not be fetched from ${urlForMessages(project.pot_url)}: HTTP ${res.status}.`;
          if (res.status >= 400 && res.status < 500) throw ApplicationFailure.nonRetryable(msg, TRANSLATION_REJECTED_INPUT);
          throw ApplicationFailure.retryable(msg);
        }
        entries = gettextOrFail(() => parsePot(res.text), `The POT file fetched from ${urlForMessages(project.pot_url)}`);
      }
      const sources: Map<string, string[]>[] = [];
      const uploaded = (project.po_files ?? {})[j.locale] as string | undefined;
      if (uploaded) {
        const m = gettextOrFail(() => poTranslations(uploaded, nplurals, `The uploaded PO file for ${j.locale}`));
        sources.push(m);
        notes.push(`uploaded PO: ${m.size} translations`);
      } else notes.push(`no PO file uploaded for ${j.locale}`);
      if (project.glotpress_url_template) {
        const url = glotpressUrl(project.glotpress_url_template, j.slug, j.type, j.locale);
        const what = `The GlotPress export ${urlForMessages(url)}`;
        const res = await fetchGettext(policy, url, config.TRANSLATION_FETCH_TIMEOUT_SECONDS, 'The GlotPress export');
        if (res.status === 200) {
          const m = gettextOrFail(() => poTranslations(res.text, nplurals, what), what);
          sources.push(m);
          notes.push(`GlotPress ${glotpressLocale(j.locale)}: ${m.size} translations`);
        } else if (res.status === 404) {
          notes.push(`GlotPress ${glotpressLocale(j.locale)}: no translation set (404)`);
        } else {
          throw ApplicationFailure.retryable(`${what} answered HTTP ${res.status}.`);
        }
      } else notes.push('no GlotPress template');
      entries = applyHuman(entries, sources);
      const c = counts(entries);
      if (c.human_strings === 0 && !providerConfigured(config)) {
        // A pack that would hold nothing is never `ready`: the job fails here, with its counts.
        await db('translation_jobs').where({ id: jobId }).update({ ...c, entries: JSON.stringify(entries), batches_done: 0, date_modified: db.fn.now() });
        throw ApplicationFailure.nonRetryable(
          `No translations for ${j.locale}: none of the ${c.total_strings} strings has a human translation (${notes.join('; ')}) and no AI provider is configured ` +
            '(TRANSLATION_AI_BASE_URL, TRANSLATION_AI_MODEL), so the pack would hold nothing. Upload a PO file (po_files), use GlotPress or configure a provider, then retry the job.',
          TRANSLATION_REJECTED_INPUT,
        );
      }
      await setStatus(jobId, 'pending_approval', 'importing', `Imported ${c.total_strings} strings; ${c.human_strings} human translations (${notes.join('; ')}); ${c.remaining_strings} remaining.`, {
        ...c,
        entries: JSON.stringify(entries),
        batches_done: 0,
        ...(project.auto_approve ? { approved_at: db.fn.now(), approved_by: 'auto_approve' } : { approved_at: null, approved_by: null }),
      });
      return { total: c.total_strings, remaining: c.remaining_strings, autoApprove: Boolean(project.auto_approve) };
    },

    /** pending_approval (again, after a retry): whether the job is already approved. */
    async translationAwaitApproval(jobId: number): Promise<{ approved: boolean }> {
      const j = await job(jobId);
      if (j.status !== 'pending_approval') {
        await setStatus(jobId, 'pending_approval', 'pending_approval', 'Waiting for approval.', { failure_step: null, failure_reason: null, rejection_reason: null });
      }
      return { approved: j.approved_at !== null && j.status === 'pending_approval' };
    },

    /** processing: how many strings are left, and whether an AI provider will fill them. */
    async translationStartProcessing(jobId: number): Promise<{ remaining: number; provider: boolean; batchSize: number }> {
      const j = await job(jobId);
      const remaining = (j.entries ?? []).filter((e) => !e.str).length;
      const provider = providerConfigured(config);
      const message = !provider
        ? `No AI provider configured: the package is built from human translations alone (${remaining} strings stay untranslated).`
        : remaining === 0
          ? 'Nothing left to translate.'
          : `Translating ${remaining} strings with ${config.TRANSLATION_AI_MODEL} in batches of ${config.TRANSLATION_AI_BATCH_SIZE}.`;
      await setStatus(jobId, 'processing', 'processing', message, { failure_step: null, failure_reason: null });
      return { remaining, provider, batchSize: config.TRANSLATION_AI_BATCH_SIZE };
    },

    /**
     * One batch: the next untranslated strings (at most TRANSLATION_AI_BATCH_SIZE) to the
     * provider, the answer checked (count, shape, placeholders), the translations stored with
     * the new counts in one transaction. A crashed worker's batch is simply asked again.
     *
     * The provider's error budget is kept here, apart from the activity's retries (which also
     * cover a worker killed or stopped mid-batch, and database trouble): a provider failure
     * counts against the batch (TRANSLATION_AI_MAX_TRIES) and the job
     * (TRANSLATION_AI_ERROR_BUDGET), and either spent ends the job non-retryably. A cancelled
     * batch counts in neither.
     */
    async translationBatch(jobId: number): Promise<{ remaining: number; batch: number }> {
      const j = await job(jobId);
      const entries = j.entries ?? [];
      const untranslated: number[] = [];
      for (const [i, e] of entries.entries()) {
        if (!e.str) untranslated.push(i);
        if (untranslated.length >= config.TRANSLATION_AI_BATCH_SIZE) break;
      }
      if (untranslated.length === 0) return { remaining: 0, batch: j.batches_done };
      const batchNo = j.batches_done + 1;
      const label = `batch ${batchNo} (${untranslated.length} strings)`;
      const beat = setInterval(() => heartbeat({ batch: batchNo }), 1000);
      let translations: string[][];
      try {
        heartbeat({ batch: batchNo });
        translations = await askProvider(config, policy, j.locale, untranslated.map((i) => entries[i]), Context.current().cancellationSignal);
      } catch (err) {
        // Cancelled (the worker stopping past its grace time, or the run cancelled): not the
        // provider's failure, so it spends none of the batch's tries; the next worker asks again.
        const cancelled = Context.current().cancellationSignal;
        if (cancelled.aborted) throw cancelled.reason ?? err;
        const message = (err as Error).message;
        const budget = config.TRANSLATION_AI_ERROR_BUDGET;
        const [spent] = (await db('translation_jobs')
          .where({ id: jobId })
          .update({ provider_failures: db.raw('provider_failures + 1'), batch_provider_failures: db.raw('batch_provider_failures + 1') })
          .returning(['provider_failures', 'batch_provider_failures'])) as { provider_failures: number; batch_provider_failures: number }[];
        const tries = spent?.batch_provider_failures ?? 1;
        const total = spent?.provider_failures ?? 1;
        await db('translation_jobs')
          .where({ id: jobId })
          .update({ logs: db.raw('logs || ?::jsonb', [logLine('processing', `${label}, try ${tries} (provider failure ${total} of ${budget} for the job): ${message}`, 'warn')]) });
        if (err instanceof ApplicationFailure && err.nonRetryable) throw ApplicationFailure.create({ message: `${label}: ${err.message}`, type: err.type ?? undefined, nonRetryable: true });
        if (total >= budget) {
          throw ApplicationFailure.create({
            message: `${label}: the AI provider failed ${total} times in this job, its error budget (TRANSLATION_AI_ERROR_BUDGET=${budget}); the last: ${message}`,
            type: TRANSLATION_PROVIDER_BUDGET_SPENT,
            nonRetryable: true,
            details: [total],
          });
        }
        if (tries >= config.TRANSLATION_AI_MAX_TRIES) {
          throw ApplicationFailure.create({ message: `${label}: ${message}`, type: TRANSLATION_PROVIDER_TRIES_SPENT, nonRetryable: true, details: [tries] });
        }
        if (err instanceof ApplicationFailure) throw ApplicationFailure.create({ message: `${label}: ${err.message}`, type: err.type ?? undefined });
        throw err;
      } finally {
        clearInterval(beat);
      }
      return db.transaction(async (trx) => {
        const row = await trx('translation_jobs').where({ id: jobId }).forUpdate().first('entries', 'batches_done');
        const current: Entry[] = row.entries ?? [];
        untranslated.forEach((idx, k) => {
          if (current[idx] && !current[idx].str) current[idx] = { ...current[idx], str: translations[k], origin: 'ai' };
        });
        const c = counts(current);
        await trx('translation_jobs')
          .where({ id: jobId })
          .update({
            ...c,
            entries: JSON.stringify(current),
            batches_done: row.batches_done + 1,
            batch_provider_failures: 0,
            date_modified: trx.fn.now(),
            logs: trx.raw('logs || ?::jsonb', [logLine('processing', `${label} translated; ${c.remaining_strings} remaining.`)]),
          });
        return { remaining: c.remaining_strings, batch: row.batches_done + 1 };
      });
    },

    /** packaging: PO, MO, l10n.php and the script JSON files, zipped and stored; then ready. */
    async translationPackage(jobId: number): Promise<{ path: string; size: number }> {
      const j = await job(jobId);
      await setStatus(jobId, 'packaging', 'packaging', 'Building the language pack.', { failure_step: null, failure_reason: null });
      const project = j.project_id ? await db('translation_projects').where({ id: j.project_id }).first('name') : null;
      const built = await buildPackage(storage, j.type, j.entries ?? [], {
        slug: j.slug,
        locale: j.locale,
        projectName: project?.name ?? j.slug,
        version: j.version,
        revisionDate: new Date().toISOString(),
      });
      await setStatus(jobId, 'ready', 'packaging', `Language pack built: ${built.files.join(', ')} (${built.size} bytes, sha256 ${built.sha256}).`, {
        package_path: built.relativePath,
        package_size: built.size,
        package_sha256: built.sha256,
        package_files: JSON.stringify(built.files),
      });
      return { path: built.relativePath, size: built.size };
    },

    /**
     * expired: nobody approved within the timeout. Decided under the row's lock, so an approve
     * or reject the API recorded first wins (the workflow then goes on, or ends rejected).
     * Run again after it committed, it reads what it wrote.
     */
    async translationExpire(jobId: number, timeoutSeconds: number): Promise<{ state: 'expired' | 'approved' | 'rejected'; reason: string }> {
      return db.transaction(async (trx) => {
        const row = await trx('translation_jobs').where({ id: jobId }).forUpdate().first('status', 'approved_at', 'rejection_reason', 'failure_reason');
        if (!row) throw ApplicationFailure.nonRetryable(`Translation job ${jobId} no longer exists.`, TRANSLATION_REJECTED_INPUT);
        if (row.status === 'expired') return { state: 'expired', reason: row.failure_reason ?? '' };
        if (row.approved_at) return { state: 'approved', reason: '' };
        if (row.status === 'failed') return { state: 'rejected', reason: row.rejection_reason ?? row.failure_reason ?? '' };
        const reason = `Not approved within ${waitLabel(timeoutSeconds)} (TRANSLATION_APPROVAL_TIMEOUT_DAYS): the wait for approval ended. POST /translations/jobs/${jobId}/retry waits for approval again.`;
        await trx('translation_jobs')
          .where({ id: jobId })
          .update({
            status: 'expired',
            failure_step: 'pending_approval',
            failure_reason: reason,
            status_changed_at: trx.fn.now(),
            date_modified: trx.fn.now(),
            logs: trx.raw('logs || ?::jsonb', [logLine('pending_approval', reason, 'warn')]),
          });
        await recordJobStatusEvent(trx, jobId, apiBase);
        return { state: 'expired', reason };
      });
    },

    /**
     * An approve or reject the API asked for (the pipeline's update handler), recorded under the
     * row's lock if the job still waits for approval undecided; otherwise nothing is written and
     * the answer says what decided first (an approval, a rejection, the expiry, or a job no longer
     * waiting). Run again after it committed, it reads what it wrote: the same answer.
     */
    async translationDecide(jobId: number, d: Decision): Promise<DecisionOutcome> {
      return db.transaction(async (trx): Promise<DecisionOutcome> => {
        const row = await trx('translation_jobs').where({ id: jobId }).forUpdate().first('status', 'approved_at', 'approved_by', 'failure_step', 'failure_reason', 'rejection_reason');
        if (!row) throw ApplicationFailure.nonRetryable(`Translation job ${jobId} no longer exists.`, TRANSLATION_REJECTED_INPUT);
        if (row.approved_at) return { state: 'approved', by: row.approved_by ?? null };
        if (row.status === 'expired') return { state: 'expired', reason: row.failure_reason ?? '' };
        if (row.status === 'failed' && row.failure_step === 'pending_approval' && row.rejection_reason !== null) return { state: 'rejected', reason: row.rejection_reason };
        if (row.status !== 'pending_approval') return { state: 'not_pending', status: row.status };
        if (d.decision === 'approve') {
          await trx('translation_jobs')
            .where({ id: jobId })
            .update({
              approved_at: trx.fn.now(),
              approved_by: d.by,
              date_modified: trx.fn.now(),
              logs: trx.raw('logs || ?::jsonb', [logLine('pending_approval', d.bulk ? `Approved in bulk (${d.by}).` : `Approved (${d.by}).`)]),
            });
          return { state: 'approved', by: d.by };
        }
        await trx('translation_jobs')
          .where({ id: jobId })
          .update({
            status: 'failed',
            failure_step: 'pending_approval',
            failure_reason: `Rejected by an administrator: ${d.reason}`.slice(0, 2000),
            rejection_reason: d.reason,
            status_changed_at: trx.fn.now(),
            date_modified: trx.fn.now(),
            logs: trx.raw('logs || ?::jsonb', [logLine('pending_approval', `Rejected (${d.by}): ${d.reason}`)]),
          });
        await recordJobStatusEvent(trx, jobId, apiBase);
        return { state: 'rejected', reason: d.reason };
      });
    },

    /** failed: the step and the reason stay on the job, with a log line. */
    async translationFail(jobId: number, step: PipelineStep, reason: string): Promise<void> {
      await changeStatus(jobId, (trx) =>
        trx('translation_jobs')
          .where({ id: jobId })
          .update({
            status: 'failed',
            failure_step: step,
            failure_reason: reason.slice(0, 2000),
            status_changed_at: trx.fn.now(),
            date_modified: trx.fn.now(),
            logs: trx.raw('logs || ?::jsonb', [logLine(step, reason, 'error')]),
          }),
      );
    },
  };
}

export type TranslationActivities = ReturnType<typeof createTranslationActivities>;

// ---- the AI provider ---------------------------------------------------------------------------

/** Instructions of the chat-completions request. */
function systemPrompt(locale: string, nplurals: number, pluralHeader: string): string {
  return [
    `You translate WordPress plugin and theme strings from English into ${languageName(locale)}.`,
    'The user message is a JSON object whose "strings" array holds the strings to translate.',
    'Answer with a JSON object {"translations": [...]} and nothing else: exactly one item per input string, in the same order.',
    `An item is a string; for an input with "plural", it is an array of exactly ${nplurals} strings, the plural forms in the order of "Plural-Forms: ${pluralHeader}".`,
    'Keep every placeholder (%s, %d, %1$s, %2$d, %%) and every HTML tag exactly as in the source; "context" and "note" explain the string and are not translated.',
  ].join('\n');
}

function contentOf(body: unknown): string {
  const content = (body as { choices?: { message?: { content?: unknown } }[] })?.choices?.[0]?.message?.content;
  if (typeof content !== 'string') throw ApplicationFailure.retryable('the provider answered no message content', TRANSLATION_INVALID);
  return content;
}

function parseAnswer(content: string): unknown[] {
  const text = content.trim().replace(/^```(?:json)?\s*/i, '').replace(/\s*```$/, '');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw ApplicationFailure.retryable('the provider answered something that is not JSON', TRANSLATION_INVALID);
  }
  const list = Array.isArray(parsed) ? parsed : (parsed as { translations?: unknown })?.translations;
  if (!Array.isArray(list)) throw ApplicationFailure.retryable('the provider answer has no "translations" array', TRANSLATION_INVALID);
  return list;
}

/** `error.code` (or `error.type`) of an OpenAI-style error answer, as " (code)" when it is a plain token. */
function providerErrorCode(body: unknown, key: string | undefined): string {
  const e = (body as { error?: { code?: unknown; type?: unknown } } | null)?.error;
  const code = [e?.code, e?.type].find((c): c is string => typeof c === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(c));
  return code && !(key && code.includes(key)) ? ` (${code})` : '';
}

/** Sends one batch; answers one msgstr array per entry, or throws why the answer is unusable. */
export async function askProvider(
  config: TranslationActivityDeps['config'],
  policy: OutboundPolicy,
  locale: string,
  batch: Entry[],
  signal?: AbortSignal,
): Promise<string[][]> {
  const { nplurals, header } = pluralForms(locale);
  const strings = batch.map((e) => ({
    text: e.id,
    ...(e.plural !== undefined ? { plural: e.plural } : {}),
    ...(e.ctx ? { context: e.ctx } : {}),
    ...(e.note ? { note: e.note } : {}),
  }));
  const url = `${config.TRANSLATION_AI_BASE_URL!.replace(/\/$/, '')}/chat/completions`;
  let res: OutboundResponse;
  try {
    res = await outboundFetch(policy, url, {
      method: 'POST',
      signal,
      timeoutMs: config.TRANSLATION_AI_TIMEOUT_SECONDS * 1000,
      maxBytes: AI_ANSWER_MAX_BYTES,
      headers: {
        'Content-Type': 'application/json',
        ...(config.TRANSLATION_AI_API_KEY ? { Authorization: `Bearer ${config.TRANSLATION_AI_API_KEY}` } : {}),
      },
      body: JSON.stringify({
        model: config.TRANSLATION_AI_MODEL,
        temperature: 0,
        messages: [
          { role: 'system', content: systemPrompt(locale, nplurals, header) },
          { role: 'user', content: JSON.stringify({ target_locale: locale, strings }) },
        ],
      }),
    });
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    // Network trouble is retried by the activity's policy; a refused address or a huge answer is not.
    const msg = `the provider could not be reached: ${err.message}`;
    if (!err.retryable) throw ApplicationFailure.nonRetryable(msg, 'TranslationProviderRefused');
    throw ApplicationFailure.retryable(msg, 'TranslationProviderUnreachable');
  }
  let body: unknown = null;
  try {
    body = JSON.parse(res.body.toString('utf8'));
  } catch {
    // Not JSON: said below as "no message content" (or by the status).
  }
  if (res.status < 200 || res.status >= 300) {
    // Only the provider's error code (a short token such as invalid_api_key), never its text:
    // some providers echo the key, others quote the request.
    const msg = `the provider answered HTTP ${res.status}${providerErrorCode(body, config.TRANSLATION_AI_API_KEY)}`;
    // A wrong key, model or request will not get better by asking again; rate limits and 5xx may.
    if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) throw ApplicationFailure.nonRetryable(msg, 'TranslationProviderRejected');
    throw ApplicationFailure.retryable(msg, 'TranslationProviderError');
  }
  const list = parseAnswer(contentOf(body));
  if (list.length !== batch.length) {
    throw ApplicationFailure.retryable(`the provider answered ${list.length} translations for ${batch.length} strings`, TRANSLATION_INVALID);
  }
  const problems: string[] = [];
  const out = batch.map((e, i) => {
    const item = list[i];
    const forms = e.plural !== undefined ? item : [item];
    if (!Array.isArray(forms) || forms.some((f) => typeof f !== 'string' || f.trim() === '')) {
      problems.push(`item ${i + 1} ("${e.id.slice(0, 40)}") is not ${e.plural !== undefined ? `an array of ${nplurals} strings` : 'a non-empty string'}`);
      return [];
    }
    if (e.plural !== undefined && forms.length !== nplurals) {
      problems.push(`item ${i + 1} ("${e.id.slice(0, 40)}") has ${forms.length} plural forms, ${locale} needs ${nplurals}`);
      return [];
    }
    const p = placeholderProblem(e, forms as string[]);
    if (p) problems.push(`item ${i + 1}: ${p}`);
    return forms as string[];
  });
  if (problems.length) {
    logger.debug({ locale, problems: problems.length }, 'provider answer rejected');
    throw ApplicationFailure.retryable(`broken translations: ${problems.slice(0, 3).join('; ')}${problems.length > 3 ? `; and ${problems.length - 3} more` : ''}`, TRANSLATION_INVALID);
  }
  return out;
}
