import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import gettextParser from 'gettext-parser';
import type { RunningWorker } from '../src/temporal/worker';
import { pluralForms } from '../src/translations/locales';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';
import { binaryParser, status, unzip, waitForJob } from './translation-helpers';
import { fakeTranslation, GERMAN_PO, samplePot, startFakeAi, startFakeGlotPress, startFakeMetrics, type FakeAi, type FakeGlotPress, type FakeMetrics } from './translation-servers';

/**
 * The translation pipeline end to end: a real worker, a fake OpenAI-compatible provider and a
 * fake GlotPress on loopback, language packs built, zipped, downloaded and read back.
 */
describe('translation pipeline (Temporal workflow)', () => {
  const KEY = 'sk-test-translation-key-1234567890';
  const SLUG = 'tpipe-example';
  let ctx: TestContext;
  let ai: FakeAi;
  let gp: FakeGlotPress;
  let worker: RunningWorker;
  let dataDir: string;
  const auth = () => ({ Authorization: ctx.basic });
  const post = (p: string, body: unknown = {}) => ctx.http.post(`${BASE}${p}`).set(auth()).send(body as object);
  const check = (slug: string, locale: string, type = 'plugin') => ctx.http.get(`${BASE}/translations/check`).query({ slug, type, locale }).set(auth());

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tr-'));
    ai = await startFakeAi(KEY);
    gp = await startFakeGlotPress({ [`${SLUG}/de`]: GERMAN_PO });
    ctx = await createTestContext({
      DATA_DIR: dataDir,
      TRANSLATION_AI_BASE_URL: ai.baseUrl,
      TRANSLATION_AI_MODEL: 'fake-gpt',
      TRANSLATION_AI_API_KEY: KEY,
      TRANSLATION_AI_BATCH_SIZE: '3',
      TRANSLATION_AI_MAX_TRIES: '3',
      TRANSLATION_AI_ERROR_BUDGET: '4',
      TRANSLATION_GLOTPRESS_URL_TEMPLATE: gp.template,
      // The fakes listen on loopback, which server-side fetches refuse unless allowed.
      OUTBOUND_ALLOWED_HOSTS: '127.0.0.1',
    });
    worker = await startTestWorker(ctx);
    const created = await post('/translations/projects', { slug: SLUG, type: 'plugin', name: 'Example Plugin', version: '1.0.0', pot: samplePot() });
    expect(created.status).toBe(200);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    await ai?.close();
    await gp?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('de_DE: human strings from GlotPress (de), AI fills the rest after approval; the zip holds a valid pack', async () => {
    const first = await check(SLUG, 'de_DE');
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ slug: SLUG, type: 'plugin', locale: 'de_DE', version: '1.0.0', status: 'importing', source: 'none' });
    expect(first.body.download_url).toBeUndefined();
    expect(Number(first.headers['retry-after'])).toBeGreaterThanOrEqual(5);
    const jobId = first.body.job_id;

    const pending = await waitForJob(ctx, jobId, status('pending_approval'));
    // 10 strings; GlotPress had Settings, Post (verb) and the plural (the fuzzy noun is ignored).
    expect(pending).toMatchObject({ total_strings: 10, remaining_strings: 7, human_strings: 3, ai_strings: 0, source: 'human', approved_at: null });
    expect(gp.requests).toContain(`/projects/wp-plugins/${SLUG}/stable/de/default/export-translations/`);
    expect(ai.requests.filter((r) => r.locale === 'de_DE')).toHaveLength(0); // nothing before approval
    const waiting = await check(SLUG, 'de_DE');
    expect(waiting.body).toMatchObject({ status: 'pending_approval', remaining_strings: 7, total_strings: 10 });
    expect(Number(waiting.headers['retry-after'])).toBeGreaterThanOrEqual(60);

    const approved = await post(`/translations/jobs/${jobId}/approve`);
    expect(approved.status).toBe(200);
    expect(approved.body.approved_at).not.toBeNull();
    const ready = await waitForJob(ctx, jobId, status('ready'));
    expect(ready).toMatchObject({ remaining_strings: 0, human_strings: 3, ai_strings: 7, source: 'mixed', batches_done: 3, failure_step: null });
    // 7 strings in batches of 3: 3 requests, with the key and the model from the environment.
    const asked = ai.requests.filter((r) => r.locale === 'de_DE');
    expect(asked.map((r) => r.strings.length)).toEqual([3, 3, 1]);
    expect(asked.every((r) => r.authorization === `Bearer ${KEY}` && r.model === 'fake-gpt')).toBe(true);
    expect(ready.logs.map((l: any) => l.step)).toEqual(expect.arrayContaining(['importing', 'pending_approval', 'processing', 'packaging']));
    expect(JSON.stringify(ready.logs)).not.toContain(KEY);
    // The job's events (issue 19), each written with its status change: waiting for approval, then ready with its link.
    const events = await ctx.db('events').where({ object_type: 'translation_job', object_id: jobId }).orderBy('id');
    expect(events.map((e) => [e.slug, e.payload.status])).toEqual([
      ['translation_job_awaiting_approval', 'pending_approval'],
      ['translation_job_ready', 'ready'],
    ]);
    expect(events[1].payload).toMatchObject({ id: jobId, model: 'translation_job', ai_strings: 7, download_url: expect.stringMatching(new RegExp(`${BASE}/translations/packages/plugin/${SLUG}/1.0.0/de_DE.zip$`)) });
    expect(JSON.stringify(events.map((e) => e.payload))).not.toContain(KEY);

    const done = await check(SLUG, 'de_DE');
    expect(done.body).toMatchObject({ status: 'ready', remaining_strings: 0, total_strings: 10, source: 'mixed' });
    expect(done.headers['retry-after']).toBeUndefined();
    const url = new URL(done.body.download_url);
    expect(url.pathname).toBe(`${BASE}/translations/packages/plugin/${SLUG}/1.0.0/de_DE.zip`);

    // Public download (no credentials), as WordPress fetches it.
    const dl = await ctx.http.get(url.pathname).buffer(true).parse(binaryParser);
    expect(dl.status).toBe(200);
    expect(dl.headers['content-type']).toBe('application/zip');
    expect(dl.headers.etag).toBe(`"${crypto.createHash('sha256').update(dl.body).digest('hex')}"`);
    const files = await unzip(dl.body);
    const scriptMd5 = (p: string) => crypto.createHash('md5').update(p).digest('hex');
    expect(Object.keys(files).sort()).toEqual(
      [
        `${SLUG}-de_DE.po`,
        `${SLUG}-de_DE.mo`,
        `${SLUG}-de_DE.l10n.php`,
        `${SLUG}-de_DE-${scriptMd5('assets/js/editor.js')}.json`,
        `${SLUG}-de_DE-${scriptMd5('build/sidebar.js')}.json`,
      ].sort(),
    );

    // MO round trip: every string, the right plural forms, context kept.
    const mo = gettextParser.mo.parse(files[`${SLUG}-de_DE.mo`]);
    expect(mo.headers['Plural-Forms']).toBe('nplurals=2; plural=n != 1;');
    expect(mo.headers.Language).toBe('de_DE');
    expect(mo.translations[''].Settings.msgstr).toEqual(['Einstellungen']);
    expect(mo.translations.verb.Post.msgstr).toEqual(['Veröffentlichen']);
    expect(mo.translations.noun.Post.msgstr).toEqual([fakeTranslation('de_DE', 'Post')]);
    expect(mo.translations['']['%d file']).toMatchObject({ msgid_plural: '%d files', msgstr: ['%d Datei', '%d Dateien'] });
    expect(mo.translations['']['%d block'].msgstr).toEqual([fakeTranslation('de_DE', '%d block', 0), fakeTranslation('de_DE', '%d blocks', 1)]);
    expect(mo.translations['']['%1$s of %2$d items (100%%)'].msgstr[0]).toContain('%1$s of %2$d items (100%%)');
    const moCount = Object.values(mo.translations).reduce((n, g) => n + Object.keys(g).filter((k) => k !== '').length, 0);
    expect(moCount).toBe(10);

    // PO: parses, same strings, references kept.
    const po = gettextParser.po.parse(files[`${SLUG}-de_DE.po`]);
    expect(po.headers['Plural-Forms']).toBe('nplurals=2; plural=n != 1;');
    expect(po.translations['']['Save draft'].comments?.reference).toContain('assets/js/editor.js:5');

    // l10n.php: the WordPress 6.5 PHP array.
    const php = files[`${SLUG}-de_DE.l10n.php`].toString('utf8');
    expect(php.startsWith('<?php\nreturn [')).toBe(true);
    expect(php).toContain("'plural-forms'=>'nplurals=2; plural=n != 1;'");
    expect(php).toContain("'Settings'=>'Einstellungen'");
    expect(php).toContain(`'verb'."\\4".'Post'=>'Veröffentlichen'`);
    expect(php).toContain(`'%d file'=>'%d Datei'."\\0".'%d Dateien'`);

    // Script JSON (Jed): only the strings of that script.
    const jed = JSON.parse(files[`${SLUG}-de_DE-${scriptMd5('build/sidebar.js')}.json`].toString('utf8'));
    expect(jed).toMatchObject({ source: 'build/sidebar.js', domain: 'messages', locale_data: { messages: { '': { domain: 'messages', lang: 'de_DE', 'plural-forms': 'nplurals=2; plural=n != 1;' } } } });
    expect(Object.keys(jed.locale_data.messages).sort()).toEqual(['', 'button\u0004Close']);
    const editor = JSON.parse(files[`${SLUG}-de_DE-${scriptMd5('assets/js/editor.js')}.json`].toString('utf8'));
    expect(editor.locale_data.messages['%d block']).toHaveLength(2);
  });

  test('ru_RU: three plural forms, asked of the AI and written to the MO; pt_BR maps to GlotPress pt-br', async () => {
    await ctx.http.put(`${BASE}/translations/projects/${(await ctx.db('translation_projects').where({ slug: SLUG }).first('id')).id}`).set(auth()).send({ auto_approve: true });
    const first = await check(SLUG, 'ru_RU');
    const ready = await waitForJob(ctx, first.body.job_id, status('ready'));
    expect(ready).toMatchObject({ approved_by: 'auto_approve', source: 'ai', human_strings: 0, ai_strings: 10 });
    const dl = await ctx.http.get(new URL(ready.download_url).pathname).buffer(true).parse(binaryParser);
    const files = await unzip(dl.body);
    const mo = gettextParser.mo.parse(files[`${SLUG}-ru_RU.mo`]);
    expect(mo.headers['Plural-Forms']).toBe(pluralForms('ru_RU').header);
    expect(pluralForms('ru_RU').nplurals).toBe(3);
    expect(mo.translations['']['%d file'].msgstr).toHaveLength(3);

    const br = await check(SLUG, 'pt_BR');
    await waitForJob(ctx, br.body.job_id, status('ready'));
    expect(gp.requests).toContain(`/projects/wp-plugins/${SLUG}/stable/pt-br/default/export-translations/`);
    expect(gp.requests).toContain(`/projects/wp-plugins/${SLUG}/stable/ru/default/export-translations/`);
    await ctx.http.put(`${BASE}/translations/projects/${ready.project_id}`).set(auth()).send({ auto_approve: false });
  });

  test('reject ends the job failed with the reason; retry waits for approval again', async () => {
    const first = await check(SLUG, 'fr_FR');
    const id = first.body.job_id;
    await waitForJob(ctx, id, status('pending_approval'));
    const rejected = await post(`/translations/jobs/${id}/reject`, { reason: 'Wrong glossary' });
    expect(rejected.status).toBe(200);
    expect(rejected.body).toMatchObject({ status: 'failed', failure_step: 'pending_approval', failure_kind: 'rejected', rejection_reason: 'Wrong glossary' });
    expect(rejected.body.failure_reason).toContain('Wrong glossary');
    const c = await check(SLUG, 'fr_FR');
    expect(c.body).toMatchObject({ status: 'failed', failure_step: 'pending_approval' });
    expect(c.body.failure_reason).toContain('Wrong glossary');
    expect(c.headers['retry-after']).toBeUndefined();
    // The workflow recorded the rejection too, and finished.
    const result = await ctx.temporal.client.workflow.getHandle(rejected.body.workflow_id).result();
    expect(result).toMatchObject({ status: 'failed', step: 'pending_approval' });
    expect(ai.requests.filter((r) => r.locale === 'fr_FR')).toHaveLength(0);

    // Approve or reject again: only pending jobs.
    expect((await post(`/translations/jobs/${id}/approve`)).body.code).toBe('wu_rest_translation_job_not_pending');
    expect((await post(`/translations/jobs/${id}/reject`, { reason: 'again' })).status).toBe(409);

    const retried = await post(`/translations/jobs/${id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'pending_approval', failure_step: null, rejection_reason: null });
    await waitForJob(ctx, id, (j) => j.status === 'pending_approval' && j.logs.some((l: any) => l.message === 'Retry from pending_approval.'));
    expect((await post(`/translations/jobs/${id}/retry`)).body.code).toBe('wu_rest_translation_job_not_failed');
    await post(`/translations/jobs/${id}/approve`);
    await waitForJob(ctx, id, status('ready'));
    // Rejected is translation_job_failed; the retry waits for approval again: a second awaiting_approval.
    const slugs = (await ctx.db('events').where({ object_type: 'translation_job', object_id: id }).orderBy('id')).map((e) => e.slug);
    expect(slugs).toEqual(['translation_job_awaiting_approval', 'translation_job_failed', 'translation_job_awaiting_approval', 'translation_job_ready']);
  });

  test('placeholder corruption is caught: tried 3 times, failed with a clear message; retry resumes from processing', async () => {
    ai.mode.corrupt = (text, locale) => locale === 'es_ES' && text.includes('%s');
    const first = await check(SLUG, 'es_ES');
    const id = first.body.job_id;
    await waitForJob(ctx, id, status('pending_approval'));
    await post(`/translations/jobs/${id}/approve`);
    const failed = await waitForJob(ctx, id, status('failed'));
    expect(failed).toMatchObject({ failure_step: 'processing', failure_kind: 'translation', batches_done: 0 });
    expect(failed.failure_reason).toMatch(/^Translation failed after 3 tries: batch 1 \(3 strings\): broken translations: item 2: placeholders of "Hello, %s!"/);
    const batchOne = ai.requests.filter((r) => r.locale === 'es_ES');
    expect(batchOne).toHaveLength(3);
    expect(failed.logs.filter((l: any) => l.level === 'warn')).toHaveLength(3);
    const c = await check(SLUG, 'es_ES');
    expect(c.body).toMatchObject({ status: 'failed', failure_step: 'processing', remaining_strings: 10 });
    // The run is Failed (operators filter on it), its failure the job's recorded outcome.
    const run = ctx.temporal.client.workflow.getHandle(failed.workflow_id);
    const err = await run.result().catch((e: unknown) => e);
    expect((await run.describe()).status.name).toBe('FAILED');
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause).toMatchObject({
      type: 'TranslationFailed',
      nonRetryable: true,
      message: failed.failure_reason,
      details: [{ status: 'failed', step: 'processing', reason: failed.failure_reason }],
    });

    ai.mode.corrupt = undefined;
    const retried = await post(`/translations/jobs/${id}/retry`);
    expect(retried.body.status).toBe('processing');
    const ready = await waitForJob(ctx, id, status('ready'));
    expect(ready).toMatchObject({ remaining_strings: 0, ai_strings: 10 });
    // Import and approval were not repeated: no new GlotPress fetch for es, straight to the AI.
    expect(gp.requests.filter((p) => p.includes('/stable/es/'))).toHaveLength(1);
  });

  test('a POT that cannot be fetched fails the import (validation); fixed and retried, the job goes on', async () => {
    const potUrl = gp.template.replace(/\/projects\/.*$/, '/files/tpipe-fetch.pot');
    const created = await post('/translations/projects', { slug: 'tpipe-fetch', type: 'plugin', name: 'Fetch', version: '0.9', pot_url: potUrl, glotpress_url_template: null });
    expect(created.status).toBe(200);
    const first = await check('tpipe-fetch', 'de_DE');
    const failed = await waitForJob(ctx, first.body.job_id, status('failed'));
    expect(failed).toMatchObject({ failure_step: 'importing', failure_kind: 'validation', total_strings: 0 });
    expect(failed.failure_reason).toBe(`Validation failed: The POT file could not be fetched from ${potUrl}: HTTP 404.`);
    const c = await check('tpipe-fetch', 'de_DE');
    expect(c.body).toMatchObject({ status: 'failed', failure_step: 'importing', failure_reason: failed.failure_reason });

    const fixed = await ctx.http.put(`${BASE}/translations/projects/${created.body.id}`).set(auth()).send({ pot: samplePot(), pot_url: null });
    expect(fixed.body).toMatchObject({ pot_url: null });
    const retried = await post(`/translations/jobs/${first.body.job_id}/retry`);
    expect(retried.body).toMatchObject({ status: 'importing', failure_reason: null });
    const pending = await waitForJob(ctx, first.body.job_id, status('pending_approval'));
    expect(pending).toMatchObject({ total_strings: 10, remaining_strings: 10 });
    const rejected = await post(`/translations/jobs/${first.body.job_id}/reject`, { reason: 'not needed' });
    expect(rejected.body.status).toBe('failed');
  });

  test('a provider refusing the key fails the job at once (not retried), without the key in any message', async () => {
    ai.mode.rejectKey = true;
    const first = await check(SLUG, 'da_DK');
    const id = first.body.job_id;
    await waitForJob(ctx, id, status('pending_approval'));
    const before = ai.requests.length;
    await post(`/translations/jobs/${id}/approve`);
    const failed = await waitForJob(ctx, id, status('failed'));
    expect(ai.requests.length - before).toBe(1);
    // The status and the provider's error code; never its text (this one echoes the key back).
    expect(failed.failure_reason).toBe('Translation failed: batch 1 (3 strings): the provider answered HTTP 401 (invalid_request_error)');
    expect(JSON.stringify(failed)).not.toContain(KEY);
    expect(JSON.stringify(failed)).not.toContain('Incorrect API key');
    ai.mode.rejectKey = false;
    await post(`/translations/jobs/${id}/retry`);
    await waitForJob(ctx, id, status('ready'));
  });

  test('a pot_url answering something else (allowed metrics): the job fails saying it is not gettext, quoting none of it', async () => {
    const metrics = await startFakeMetrics();
    try {
      const created = await post('/translations/projects', { slug: 'tpipe-metrics', type: 'plugin', name: 'Metrics', version: '1.0', pot_url: metrics.url, glotpress_url_template: null });
      expect(created.status).toBe(200);
      const first = await check('tpipe-metrics', 'de_DE');
      const failed = await waitForJob(ctx, first.body.job_id, status('failed'));
      expect(metrics.requests).toBe(1);
      expect(failed.failure_reason).toBe(`Validation failed: The POT file fetched from ${metrics.url} is not a valid gettext file: it could not be parsed.`);
      const answered = JSON.stringify([failed, (await check('tpipe-metrics', 'de_DE')).body]);
      for (const secret of metrics.secrets) expect(answered).not.toContain(secret);
    } finally {
      await metrics.close();
    }
  });

  test('a job whose workflow was terminated by an operator is restarted by retry from its step; a running one is not', async () => {
    const first = await check(SLUG, 'fi');
    const id = first.body.job_id;
    const parked = await waitForJob(ctx, id, status('pending_approval'));
    const running = await post(`/translations/jobs/${id}/retry`);
    expect(running.body).toMatchObject({ code: 'wu_rest_translation_job_not_failed', data: { status: 409, job_status: 'pending_approval' } });
    expect(parked.workflow_id).toMatch(new RegExp(`-translation-${SLUG}-plugin-1\\.0\\.0-fi$`));
    const handle = ctx.temporal.client.workflow.getHandle(parked.workflow_id);
    await handle.terminate('operator test');
    // Still shown pending, but nothing would ever move it: approving says so (and changes nothing).
    expect((await post(`/translations/jobs/${id}/approve`)).body).toMatchObject({ code: 'wu_rest_translation_workflow_not_running', data: { status: 409 } });
    expect((await ctx.http.get(`${BASE}/translations/jobs/${id}`).set(auth())).body.approved_at).toBeNull();
    const restarted = await post(`/translations/jobs/${id}/retry`);
    expect(restarted.body).toMatchObject({ status: 'pending_approval' });
    await waitForJob(ctx, id, (j) => j.logs.some((l: any) => l.message === 'Restarted from pending_approval: its workflow was terminated.'));
    expect((await handle.describe()).status.name).toBe('RUNNING');
    await post(`/translations/jobs/${id}/approve`);
    await waitForJob(ctx, id, status('ready'));
  });

  test('a batch answered with the wrong count is asked again and then succeeds', async () => {
    ai.mode.dropOneTimes = 1;
    const first = await check(SLUG, 'it_IT');
    const id = first.body.job_id;
    await waitForJob(ctx, id, status('pending_approval'));
    const bulk = await post('/translations/jobs/approve', { locale: 'it_IT' });
    expect(bulk.status).toBe(200);
    expect(bulk.body).toEqual({ approved: [id], failed: [] });
    const ready = await waitForJob(ctx, id, status('ready'));
    expect(ready.logs.some((l: any) => l.level === 'warn' && /answered 2 translations for 3 strings/.test(l.message))).toBe(true);
    expect(ai.requests.filter((r) => r.locale === 'it_IT')).toHaveLength(5); // 4 batches + 1 retry
  });

  test("the provider's error budget is per job: each batch failing once spends it at the 4th (TRANSLATION_AI_ERROR_BUDGET=4); retry gives a fresh one", async () => {
    ai.mode.failEveryOther = 'cs_CZ';
    try {
      const first = await check(SLUG, 'cs_CZ');
      const id = first.body.job_id;
      await waitForJob(ctx, id, status('pending_approval'));
      await post(`/translations/jobs/${id}/approve`);
      const failed = await waitForJob(ctx, id, status('failed'));
      // Batches 1-3 failed once each and then succeeded; batch 4's first failure was the 4th.
      expect(failed).toMatchObject({ failure_step: 'processing', failure_kind: 'translation', batches_done: 3 });
      expect(failed.failure_reason).toMatch(
        /^Translation failed: batch 4 \(1 strings\): the AI provider failed 4 times in this job, its error budget \(TRANSLATION_AI_ERROR_BUDGET=4\); the last: .*answered 0 translations for 1 strings/,
      );
      expect(ai.requests.filter((r) => r.locale === 'cs_CZ')).toHaveLength(7);
      expect(await ctx.db('translation_jobs').where({ id }).first('provider_failures', 'batch_provider_failures')).toEqual({ provider_failures: 4, batch_provider_failures: 1 });
      expect(failed.logs.filter((l: any) => l.level === 'warn').map((l: any) => /try (\d+) \(provider failure (\d+) of 4 for the job\)/.exec(l.message)?.slice(1))).toEqual([
        ['1', '1'],
        ['1', '2'],
        ['1', '3'],
        ['1', '4'],
      ]);
      const run = ctx.temporal.client.workflow.getHandle(failed.workflow_id);
      expect(await run.result().catch((e: unknown) => e)).toBeInstanceOf(WorkflowFailedError);
      expect((await run.describe()).status.name).toBe('FAILED');

      // Retried with a fresh budget: the last batch (the fake's 8th request, answered whole) succeeds.
      expect((await post(`/translations/jobs/${id}/retry`)).body.status).toBe('processing');
      const ready = await waitForJob(ctx, id, status('ready'));
      expect(ready.remaining_strings).toBe(0);
      expect(await ctx.db('translation_jobs').where({ id }).first('provider_failures', 'batch_provider_failures')).toEqual({ provider_failures: 0, batch_provider_failures: 0 });
    } finally {
      ai.mode.failEveryOther = undefined;
    }
  });

  test('bulk approval of all pending jobs, and a new version starts new packages while the old pack stays', async () => {
    const projectId = (await ctx.db('translation_projects').where({ slug: SLUG }).first('id')).id;
    const a = await check(SLUG, 'nl_NL');
    const b = await check(SLUG, 'sv_SE');
    await waitForJob(ctx, a.body.job_id, status('pending_approval'));
    await waitForJob(ctx, b.body.job_id, status('pending_approval'));
    const bulk = await post('/translations/jobs/approve', { all: true });
    expect(bulk.body.approved).toEqual(expect.arrayContaining([a.body.job_id, b.body.job_id]));
    await waitForJob(ctx, a.body.job_id, status('ready'));
    await waitForJob(ctx, b.body.job_id, status('ready'));

    const upd = await ctx.http.put(`${BASE}/translations/projects/${projectId}`).set(auth()).send({ version: '1.1.0', pot: samplePot(2), auto_approve: true });
    expect(upd.body).toMatchObject({ version: '1.1.0' });
    const next = await check(SLUG, 'nl_NL');
    expect(next.body).toMatchObject({ version: '1.1.0', status: 'importing' });
    const ready = await waitForJob(ctx, next.body.job_id, status('ready'));
    expect(ready.total_strings).toBe(12);
    expect(new URL(ready.download_url).pathname).toBe(`${BASE}/translations/packages/plugin/${SLUG}/1.1.0/nl_NL.zip`);
    const old = await ctx.http.get(`${BASE}/translations/packages/plugin/${SLUG}/1.0.0/nl_NL.zip`).buffer(true).parse(binaryParser);
    expect(old.status).toBe(200);
    const oldMo = gettextParser.mo.parse((await unzip(old.body))[`${SLUG}-nl_NL.mo`]);
    expect(oldMo.headers['Project-Id-Version']).toBe('Example Plugin 1.0.0');
    const list = await ctx.http.get(`${BASE}/translations/jobs`).query({ slug: SLUG, locale: 'nl_NL', orderby: 'id', order: 'asc' }).set(auth());
    expect(list.body.map((j: any) => j.version)).toEqual(['1.0.0', '1.1.0']);
    expect(list.headers['x-wp-total']).toBe('2');
  });
});

describe('translation pipeline without an AI provider', () => {
  let ctx: TestContext;
  let gp: FakeGlotPress;
  let worker: RunningWorker;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tr-'));
    gp = await startFakeGlotPress({ 'tpipe-noai/de/formal': GERMAN_PO });
    ctx = await createTestContext({ DATA_DIR: dataDir, OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' });
    worker = await startTestWorker(ctx);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    await gp?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('the pack is built from human translations alone (uploaded PO + GlotPress de/formal); remaining_strings says what is missing', async () => {
    const frPo = GERMAN_PO.replace('Einstellungen', 'Réglages').replace('Language: de', 'Language: fr');
    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug: 'tpipe-noai', type: 'theme', name: 'No AI Theme', version: '2.0', pot: samplePot(), glotpress_url_template: gp.template, po_files: { fr_FR: frPo }, auto_approve: true });
    expect(created.body).toMatchObject({ po_locales: ['fr_FR'], auto_approve: true });
    const de = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tpipe-noai', type: 'theme', locale: 'de_DE_formal' }).set('Authorization', ctx.basic);
    const ready = await waitForJob(ctx, de.body.job_id, status('ready'));
    expect(ready).toMatchObject({ source: 'human', total_strings: 10, remaining_strings: 7, human_strings: 3, ai_strings: 0 });
    expect(gp.requests).toContain('/projects/wp-themes/tpipe-noai/stable/de/formal/default/export-translations/');
    expect(ready.logs.some((l: any) => /No AI provider configured/.test(l.message))).toBe(true);

    const fr = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tpipe-noai', type: 'theme', locale: 'fr_FR' }).set('Authorization', ctx.basic);
    const frReady = await waitForJob(ctx, fr.body.job_id, status('ready'));
    expect(frReady).toMatchObject({ source: 'human', human_strings: 3, remaining_strings: 7 });
    const dl = await ctx.http.get(new URL(frReady.download_url).pathname).buffer(true).parse(binaryParser);
    const files = await unzip(dl.body);
    const mo = gettextParser.mo.parse(files['tpipe-noai-fr_FR.mo']);
    expect(mo.headers['Plural-Forms']).toBe('nplurals=2; plural=n > 1;');
    expect(mo.translations[''].Settings.msgstr).toEqual(['Réglages']);
    // Untranslated strings are in the PO (empty), not in the MO.
    expect(mo.translations['']['Save draft']).toBeUndefined();
    const po = gettextParser.po.parse(files['tpipe-noai-fr_FR.po']);
    expect(po.translations['']['Save draft'].msgstr).toEqual(['']);
  });

  test('a pack that would hold no translation is never ready: it fails at import saying why; with a PO file, retry makes it', async () => {
    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug: 'tpipe-empty', type: 'theme', name: 'Empty', version: '1.0', pot: samplePot(), glotpress_url_template: gp.template, auto_approve: true });
    expect(created.status).toBe(200);
    const check = () => ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tpipe-empty', type: 'theme', locale: 'fi' }).set('Authorization', ctx.basic);
    const first = await check();
    const failed = await waitForJob(ctx, first.body.job_id, status('failed'));
    expect(failed).toMatchObject({ failure_step: 'importing', failure_kind: 'validation', total_strings: 10, remaining_strings: 10, human_strings: 0, download_url: null, approved_at: null });
    expect(failed.failure_reason).toBe(
      'Validation failed: No translations for fi: none of the 10 strings has a human translation (no PO file uploaded for fi; GlotPress fi: no translation set (404)) ' +
        'and no AI provider is configured (TRANSLATION_AI_BASE_URL, TRANSLATION_AI_MODEL), so the pack would hold nothing. ' +
        'Upload a PO file (po_files), use GlotPress or configure a provider, then retry the job.',
    );
    const answer = await check();
    expect(answer.body).toMatchObject({ status: 'failed', failure_step: 'importing', total_strings: 10, remaining_strings: 10, translated_strings: 0, source: 'none' });
    expect(answer.body.download_url).toBeUndefined();
    expect(fs.existsSync(path.join(dataDir, 'translations', 'packages', 'theme', 'tpipe-empty'))).toBe(false);

    const fiPo = 'msgid "Settings"\nmsgstr "Asetukset"\n\nmsgid "Save draft"\nmsgstr "Tallenna luonnos"\n';
    await ctx.http.put(`${BASE}/translations/projects/${created.body.id}`).set('Authorization', ctx.basic).send({ po_files: { fi: fiPo } });
    await ctx.http.post(`${BASE}/translations/jobs/${first.body.job_id}/retry`).set('Authorization', ctx.basic).send({});
    await waitForJob(ctx, first.body.job_id, status('ready'));
    const ready = await check();
    expect(ready.body).toMatchObject({ status: 'ready', total_strings: 10, remaining_strings: 8, translated_strings: 2, source: 'human' });
    expect(ready.body.download_url).toMatch(/\/translations\/packages\/theme\/tpipe-empty\/1\.0\/fi\.zip$/);
  });

  test('a pack that cannot be stored fails in packaging after its tries; retry rebuilds only the pack', async () => {
    // A file where the plugin packages folder should be: every write fails (ENOTDIR).
    const blocker = path.join(dataDir, 'translations', 'packages', 'plugin');
    fs.mkdirSync(path.dirname(blocker), { recursive: true });
    fs.writeFileSync(blocker, 'not a folder');
    await ctx.http
      .post(`${BASE}/translations/projects`)
      .set('Authorization', ctx.basic)
      .send({ slug: 'tpipe-pkgfail', type: 'plugin', name: 'Pkg', version: '1.0', pot: samplePot(), glotpress_url_template: null, po_files: { de_DE: GERMAN_PO }, auto_approve: true });
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tpipe-pkgfail', type: 'plugin', locale: 'de_DE' }).set('Authorization', ctx.basic);
    const failed = await waitForJob(ctx, first.body.job_id, status('failed'), 90_000);
    expect(failed).toMatchObject({ failure_step: 'packaging', failure_kind: 'packaging', download_url: null });
    expect(failed.failure_reason).toMatch(/^Packaging failed: .*ENOTDIR/);
    fs.rmSync(blocker);
    const retried = await ctx.http.post(`${BASE}/translations/jobs/${first.body.job_id}/retry`).set('Authorization', ctx.basic).send({});
    expect(retried.body.status).toBe('packaging');
    const ready = await waitForJob(ctx, first.body.job_id, status('ready'));
    expect(ready.package_files).toEqual(['tpipe-pkgfail-de_DE.po', 'tpipe-pkgfail-de_DE.mo', 'tpipe-pkgfail-de_DE.l10n.php']);
    expect(ready.logs.filter((l: any) => l.message === 'Import started.').length).toBe(1);
    expect(ready.logs.filter((l: any) => l.message.startsWith('Imported')).length).toBe(1);
  }, 120_000);
});

describe('translation fetches refuse internal addresses (SSRF)', () => {
  const KEY = 'sk-ssrf-test-key-1234567890';
  let ctx: TestContext;
  let ai: FakeAi;
  let metrics: FakeMetrics;
  let worker: RunningWorker;
  let dataDir: string;
  const auth = () => ({ Authorization: ctx.basic });

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tr-'));
    ai = await startFakeAi(KEY);
    metrics = await startFakeMetrics();
    // Nothing allow-listed: the provider and the metrics server on loopback are internal.
    ctx = await createTestContext({ DATA_DIR: dataDir, TRANSLATION_AI_BASE_URL: ai.baseUrl, TRANSLATION_AI_MODEL: 'fake-gpt', TRANSLATION_AI_API_KEY: KEY });
    worker = await startTestWorker(ctx);
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    await ai?.close();
    await metrics?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('pot_url: http://127.0.0.1:…/metrics is a 400 naming pot_url; one stored before the rule fails its job, refused, none of the body in any answer', async () => {
    const refused = await ctx.http.post(`${BASE}/translations/projects`).set(auth()).send({ slug: 'tssrf-metrics', type: 'plugin', name: 'M', version: '1.0', pot_url: metrics.url });
    expect(refused.status).toBe(400);
    expect(refused.body.data.params).toEqual({ pot_url: 'pot_url: 127.0.0.1 is a loopback address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).' });
    expect(await ctx.db('translation_projects').where({ slug: 'tssrf-metrics' }).first()).toBeUndefined();

    // A project saved before this rule (or before the allow-list shrank): the fetch itself refuses.
    const [{ id }] = await ctx.db('translation_projects')
      .insert({ slug: 'tssrf-metrics', type: 'plugin', name: 'M', version: '1.0', pot_url: metrics.url, glotpress_url_template: null, po_files: '{}', auto_approve: true })
      .returning('id');
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tssrf-metrics', type: 'plugin', locale: 'de_DE' }).set(auth());
    const failed = await waitForJob(ctx, first.body.job_id, status('failed'));
    expect(failed).toMatchObject({ project_id: Number(id), failure_step: 'importing', failure_kind: 'validation' });
    expect(failed.failure_reason).toBe(
      `Validation failed: The POT file could not be fetched from ${metrics.url}: 127.0.0.1 is a loopback address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).`,
    );
    // Refused without a connection, and tried once (retrying cannot help).
    expect(metrics.requests).toBe(0);
    expect(failed.logs.filter((l: any) => l.message === 'Import started.')).toHaveLength(1);
    const answer = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tssrf-metrics', type: 'plugin', locale: 'de_DE' }).set(auth());
    expect(answer.body).toMatchObject({ status: 'failed', failure_reason: failed.failure_reason });
    const everything = JSON.stringify([failed, answer.body]);
    for (const secret of metrics.secrets) expect(everything).not.toContain(secret);
  });

  test('the AI provider on an internal address is refused at once (no request, no retries), the job failed saying so', async () => {
    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set(auth())
      .send({ slug: 'tssrf-ai', type: 'plugin', name: 'AI', version: '1.0', pot: samplePot(), glotpress_url_template: null, po_files: { de_DE: GERMAN_PO }, auto_approve: true });
    expect(created.status).toBe(200);
    const first = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'tssrf-ai', type: 'plugin', locale: 'de_DE' }).set(auth());
    const failed = await waitForJob(ctx, first.body.job_id, status('failed'));
    expect(failed).toMatchObject({ failure_step: 'processing', failure_kind: 'translation', human_strings: 3, batches_done: 0 });
    expect(failed.failure_reason).toBe(
      'Translation failed: batch 1 (7 strings): the provider could not be reached: 127.0.0.1 is a loopback address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).',
    );
    expect(failed.logs.filter((l: any) => l.level === 'warn')).toHaveLength(1);
    expect(ai.requests).toHaveLength(0);
    expect(JSON.stringify(failed)).not.toContain(KEY);
  });
});
