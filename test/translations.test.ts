import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApiPath } from '../src/openapi/document';
import { startWorkflowRelay } from '../src/temporal/starts';
import type { RunningWorker } from '../src/temporal/worker';
import { retryAfterSeconds } from '../src/translations/batches';
import { buildL10nPhp, parsePot, placeholderProblem, placeholders, scriptOf } from '../src/translations/gettext';
import { glotpressLocale, glotpressUrl, pluralForms, pluralIndex } from '../src/translations/locales';
import { BASE, createTestContext, type TestContext, startTestWorker } from './helpers';
import { status, waitForJob } from './translation-helpers';
import { samplePot } from './translation-servers';

describe('translation helpers', () => {
  test('GlotPress locale slugs as translate.wordpress.org uses them', () => {
    expect(glotpressLocale('fr_FR')).toBe('fr');
    expect(glotpressLocale('de_DE')).toBe('de');
    expect(glotpressLocale('pt_BR')).toBe('pt-br');
    expect(glotpressLocale('pt_PT')).toBe('pt');
    expect(glotpressLocale('en_GB')).toBe('en-gb');
    expect(glotpressLocale('de_CH')).toBe('de-ch');
    expect(glotpressLocale('de_DE_formal')).toBe('de/formal');
    expect(glotpressLocale('ja')).toBe('ja');
    expect(glotpressLocale('zh_CN')).toBe('zh-cn');
    expect(glotpressLocale('ca_valencia')).toBe('ca/valencia');
    expect(glotpressUrl('https://gp.test/projects/wp-{type}s/{slug}/stable/{glotpress_locale}/default/export-translations/?format=po', 'my-plugin', 'plugin', 'pt_BR')).toBe(
      'https://gp.test/projects/wp-plugins/my-plugin/stable/pt-br/default/export-translations/?format=po',
    );
  });

  test('plural forms per locale', () => {
    expect(pluralForms('de_DE').header).toBe('nplurals=2; plural=n != 1;');
    expect(pluralForms('fr_FR').header).toBe('nplurals=2; plural=n > 1;');
    expect(pluralForms('pt_BR').nplurals).toBe(2);
    expect(pluralForms('ja').header).toBe('nplurals=1; plural=0;');
    expect(pluralForms('ar').nplurals).toBe(6);
    expect([1, 2, 5, 21, 22, 25, 11].map((n) => pluralIndex('ru_RU', n))).toEqual([0, 1, 2, 0, 1, 2, 2]);
    expect([1, 2, 5, 22, 12].map((n) => pluralIndex('pl_PL', n))).toEqual([0, 1, 2, 1, 2]);
    expect([0, 1, 2].map((n) => pluralIndex('fr_FR', n))).toEqual([0, 0, 1]);
  });

  test('placeholders: printf forms and HTML tags must survive; attribute texts may change', () => {
    expect(placeholders('%1$s of %2$d (100%%) <a href="x">y</a>')).toEqual(['%%', '%1$s', '%2$d', '</a>', '<a href=x>'].sort());
    expect(placeholderProblem({ id: 'Hello %s' }, ['Hallo %s'])).toBeNull();
    expect(placeholderProblem({ id: 'Hello %s' }, ['Hallo'])).toMatch(/placeholders of "Hello %s" are \["%s"\]/);
    expect(placeholderProblem({ id: '%1$s by %2$s' }, ['%2$s von %1$s'])).toBeNull();
    expect(placeholderProblem({ id: '%1$s by %2$s' }, ['%1$s von %1$s'])).not.toBeNull();
    expect(placeholderProblem({ id: 'Read <a href="/d">docs</a>' }, ['Lies <a href="/d">Doku</a>'])).toBeNull();
    expect(placeholderProblem({ id: 'Read <a href="/d">docs</a>' }, ['Lies <a href="/evil">Doku</a>'])).not.toBeNull();
    expect(placeholderProblem({ id: '<img alt="x" src="a.png">' }, ['<img src="a.png" alt="y">'])).toBeNull();
    // A singular form may drop the number ("One file"), a plural form keeps it.
    expect(placeholderProblem({ id: 'One file', plural: '%d files' }, ['Eine Datei', '%d Dateien'])).toBeNull();
    expect(placeholderProblem({ id: '%d file', plural: '%d files' }, ['%d Datei', 'Dateien'])).toMatch(/form 1/);
  });

  test('POT parsing, script references and the l10n.php format', () => {
    const entries = parsePot(samplePot());
    expect(entries).toHaveLength(10);
    expect(entries.filter((e) => e.ctx === 'verb' || e.ctx === 'noun')).toHaveLength(2);
    expect(entries.find((e) => e.plural === '%d files')?.refs).toEqual(['includes/admin.php:20']);
    expect(() => parsePot('hello world')).toThrow(/not a gettext file/);
    expect(scriptOf('assets/js/editor.min.js:1')).toBe('assets/js/editor.js');
    expect(scriptOf('includes/admin.php:3')).toBeNull();
    const php = buildL10nPhp([{ id: "It's", refs: [], str: ["C'est \\ ok"], origin: 'human' }], { slug: 's', locale: 'fr_FR', projectName: 'P', version: '1', revisionDate: '2026-01-01T00:00:00Z' }).toString();
    expect(php).toContain(`'It\\'s'=>'C\\'est \\\\ ok'`);
  });

  test('Retry-After grows with the time spent in a state and is capped', () => {
    const now = Date.now();
    const at = (s: number) => new Date(now - s * 1000);
    expect(retryAfterSeconds('importing', at(0), now)).toBe(5);
    expect(retryAfterSeconds('importing', at(60), now)).toBe(20);
    expect(retryAfterSeconds('processing', at(40), now)).toBe(20);
    expect(retryAfterSeconds('processing', at(100_000), now)).toBe(300);
    expect(retryAfterSeconds('pending_approval', at(0), now)).toBe(60);
    expect(retryAfterSeconds('pending_approval', at(100_000), now)).toBe(3600);
  });
});

describe('translation routes', () => {
  let ctx: TestContext;
  let worker: RunningWorker;
  let dataDir: string;
  let projectId: number;
  const auth = () => ({ Authorization: ctx.basic });
  const post = (p: string, body: unknown = {}) => ctx.http.post(`${BASE}${p}`).set(auth()).send(body as object);
  const counts = async () => ({
    projects: Number((await ctx.db('translation_projects').count({ n: '*' }))[0].n),
    jobs: Number((await ctx.db('translation_jobs').count({ n: '*' }))[0].n),
  });

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-tr-'));
    // Many unauthenticated calls below: no throttling here (auth.test.ts covers it).
    ctx = await createTestContext({ DATA_DIR: dataDir, AUTH_FAILURE_LIMIT: '1000' });
    worker = await startTestWorker(ctx);
    // One human translation for the locales whose packs the tests wait for (a pack with none is never ready).
    const po = (str: string) => `msgid "Settings"\nmsgstr "${str}"\n`;
    const created = await post('/translations/projects', {
      slug: 'troutes-one',
      type: 'plugin',
      name: 'Routes One',
      version: '3.1.4',
      pot: samplePot(),
      glotpress_url_template: null,
      po_files: { ja: po('設定'), sv_SE: po('Inställningar') },
      auto_approve: true,
    });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ model: 'translation_project', slug: 'troutes-one', glotpress_url_template: null, pot_url: null, po_locales: ['ja', 'sv_SE'], auto_approve: true });
    expect(created.body.pot_size).toBeGreaterThan(100);
    projectId = created.body.id;
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('every non-public translation route needs the credentials; the package download is public', async () => {
    const ops = ctx.app.locals.registry.operations.filter((o) => o.path.includes('/translations/'));
    expect(ops.length).toBe(15);
    const sample = (p: string) => openApiPath(p).replace('{id}', '1').replace('{type}', 'plugin').replace('{slug}', 'troutes-one').replace('{version}', '3.1.4').replace('{locale}', 'de_DE');
    for (const op of ops) {
      const url = sample(op.path);
      const res = await (ctx.http as any)[op.method.toLowerCase()](url).send({});
      if (op.doc.public) {
        expect([200, 404]).toContain(res.status);
        expect(res.status).not.toBe(401);
      } else {
        expect({ op: `${op.method} ${url}`, status: res.status, code: res.body.code }).toEqual({ op: `${op.method} ${url}`, status: 401, code: 'rest_forbidden' });
      }
    }
    // Wrong credentials as well; and an anonymous caller learns nothing about parameters.
    const wrong = await ctx.http.get(`${BASE}/translations/check?slug=BAD`).set('Authorization', `Basic ${Buffer.from('a:b').toString('base64')}`);
    expect(wrong.status).toBe(401);
  });

  test('check: bad or missing parameters are 400 naming each field, and change nothing', async () => {
    const before = await counts();
    const cases: [Record<string, string>, string[]][] = [
      [{ slug: 'Bad Slug!', type: 'plugin', locale: 'de_DE' }, ['slug']],
      [{ slug: 'ok', type: 'module', locale: 'de_DE' }, ['type']],
      [{ slug: 'ok', type: 'plugin', locale: 'german' }, ['locale']],
      [{ slug: 'ok', type: 'plugin', locale: 'de-DE' }, ['locale']],
      [{ slug: 'ok', type: 'plugin', locale: 'DE_de' }, ['locale']],
      [{ slug: 'ok', type: 'plugin', locale: 'de_de' }, ['locale']],
      [{}, ['slug', 'type', 'locale']],
      [{ slug: 'ok', type: 'plugin', locale: 'de_DE', extra: '1' }, ['extra']],
      // Shaped like a locale, but no WordPress site asks for these: nothing may start for them.
      [{ slug: 'troutes-one', type: 'plugin', locale: 'xx_YY' }, ['locale']],
      [{ slug: 'troutes-one', type: 'plugin', locale: 'de' }, ['locale']],
      [{ slug: 'troutes-one', type: 'plugin', locale: 'en_US' }, ['locale']],
      [{ slug: 'troutes-one', type: 'plugin', locale: 'zz_ZZ_formal' }, ['locale']],
    ];
    for (const [query, fields] of cases) {
      const res = await ctx.http.get(`${BASE}/translations/check`).query(query).set(auth());
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(Object.keys(res.body.data.params).sort()).toEqual([...fields].sort());
    }
    const repeated = await ctx.http.get(`${BASE}/translations/check?slug=a&slug=b&type=plugin&locale=de_DE`).set(auth());
    expect(Object.keys(repeated.body.data.params)).toEqual(['slug']);
    const unknown = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-one', type: 'plugin', locale: 'xx_YY' }).set(auth());
    expect(unknown.body.data.params.locale).toBe('locale is not a known WordPress locale (e.g. de_DE, pt_BR, ja, de_DE_formal).');
    const bare = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-one', type: 'plugin', locale: 'de' }).set(auth());
    expect(bare.body.data.params.locale).toBe('locale is not a known WordPress locale (did you mean de_AT, de_CH, de_CH_informal, de_DE or de_DE_formal?).');
    const source = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-one', type: 'plugin', locale: 'en_US' }).set(auth());
    expect(source.body.data.params.locale).toMatch(/^locale is en_US, the language WordPress strings are written in/);
    expect(await counts()).toEqual(before);
    expect(await ctx.db('translation_jobs').where({ locale: 'xx_YY' }).first()).toBeUndefined();
  });

  test('check: unknown package is missing; WordPress locales without a region and variants are accepted', async () => {
    for (const locale of ['ja', 'fi', 'bel', 'de_DE_formal', 'pt_PT_ao90', 'ca_valencia', 'pt_BR']) {
      const res = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-nobody', type: 'plugin', locale }).set(auth());
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ slug: 'troutes-nobody', type: 'plugin', locale, status: 'missing', source: 'none', remaining_strings: 0, total_strings: 0, translated_strings: 0 });
    }
    // The project is a plugin: the theme of the same slug is missing.
    const theme = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-one', type: 'theme', locale: 'de_DE' }).set(auth());
    expect(theme.body.status).toBe('missing');
  });

  test('concurrent first checks of one package start exactly one pipeline', async () => {
    const start = jest.spyOn(ctx.temporal.client.workflow, 'start');
    try {
      const results = await Promise.all(Array.from({ length: 12 }, () => ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-one', type: 'plugin', locale: 'ja' }).set(auth())));
      expect(results.every((r) => r.status === 200 && r.body.status === 'importing')).toBe(true);
      // Every answer names the one job, the checks that lost the insert too.
      expect(results[0].body.job_id).toEqual(expect.any(Number));
      expect(results.map((r) => r.body.job_id)).toEqual(results.map(() => results[0].body.job_id));
      const ids = start.mock.calls.map((c) => (c[1] as { workflowId: string }).workflowId);
      const workflowId = `${await ctx.app.locals.temporal.ids.prefix()}-translation-troutes-one-plugin-3.1.4-ja`;
      expect(ids.filter((i) => i === workflowId)).toHaveLength(1);
      expect(Number((await ctx.db('translation_jobs').where({ slug: 'troutes-one', locale: 'ja' }).count({ n: '*' }))[0].n)).toBe(1);
      // Batch duplicates: one job too.
      const batch = await post('/translations/check/batch', { packages: Array.from({ length: 5 }, () => ({ slug: 'troutes-one', type: 'plugin', locale: 'ko_KR' })) });
      expect(batch.body).toHaveLength(5);
      expect(ids.length + 1).toBe(start.mock.calls.length);
    } finally {
      start.mockRestore();
    }
    const job = await ctx.db('translation_jobs').where({ slug: 'troutes-one', locale: 'ja' }).first('id');
    const ready = await waitForJob(ctx, job.id, status('ready'));
    expect(ready).toMatchObject({ remaining_strings: 9, human_strings: 1, source: 'human', approved_by: 'auto_approve' });
    const handle = ctx.temporal.client.workflow.getHandle(`${await ctx.app.locals.temporal.ids.prefix()}-translation-troutes-one-plugin-3.1.4-ja`);
    expect(await handle.result()).toEqual({ status: 'ready' });
    // The Temporal UI lists it by what it is.
    expect(await (await handle.describe()).staticSummary()).toBe(`Translation pipeline, plugin troutes-one 3.1.4 ja (job ${job.id})`);
  });

  test('a pipeline start that fails stays in the outbox with its job: the relay starts it with the job\'s workflow id and the job does not stay importing', async () => {
    const start = jest.spyOn(ctx.temporal.client.workflow, 'start').mockRejectedValue(new Error('14 UNAVAILABLE: No connection established'));
    try {
      const single = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-one', type: 'plugin', locale: 'sv_SE' }).set(auth());
      expect(single.status).toBe(200);
      expect(single.body).toMatchObject({ status: 'importing', job_id: expect.any(Number) });
      const batch = await post('/translations/check/batch', {
        packages: [
          { slug: 'troutes-one', type: 'plugin', locale: 'sv_SE' },
          { slug: 'troutes-nobody', type: 'plugin', locale: 'sv_SE' },
        ],
      });
      expect(batch.status).toBe(200);
      expect(batch.body[0]).toMatchObject({ status: 'importing', job_id: single.body.job_id });
      expect(batch.body[1]).toMatchObject({ status: 'missing' });
    } finally {
      start.mockRestore();
    }
    // The job and its start were written together; the start failed once.
    const job = await ctx.db('translation_jobs').where({ slug: 'troutes-one', locale: 'sv_SE' }).first('id', 'workflow_id', 'status');
    expect(job.status).toBe('importing');
    const entry = await ctx.db('workflow_starts').where({ workflow_id: job.workflow_id }).first();
    expect(entry).toMatchObject({ workflow_type: 'translationPipeline', attempts: 1, started_at: null, last_error: expect.stringMatching(/UNAVAILABLE/) });
    expect(entry.args[0]).toMatchObject({ jobId: Number(job.id), slug: 'troutes-one', locale: 'sv_SE' });
    // The relay (as in a worker process) starts it when it falls due.
    const relay = startWorkflowRelay({ db: ctx.db, temporal: ctx.app.locals.temporal, intervalMs: 500 });
    try {
      expect(await waitForJob(ctx, job.id, status('ready'))).toMatchObject({ status: 'ready', workflow_id: job.workflow_id });
    } finally {
      await relay.stop();
    }
    expect(await ctx.db('workflow_starts').where({ id: entry.id }).first()).toMatchObject({ attempts: 2, last_error: null, started_at: expect.any(Date) });
    const memo = (await ctx.temporal.client.workflow.getHandle(job.workflow_id).describe()).memo;
    expect(memo).toMatchObject({ job_id: Number(job.id), outbox_start_id: Number(entry.id) });
  });

  test('batch: mixed states and bad items each answered in order, from one database query', async () => {
    const ja = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-one', type: 'plugin', locale: 'ja' }).set(auth());
    expect(ja.body.status).toBe('ready');
    const queries: string[] = [];
    const onQuery = (q: { sql: string }) => queries.push(q.sql);
    ctx.db.on('query', onQuery);
    let res;
    try {
      res = await post('/translations/check/batch', {
        packages: [
          { slug: 'troutes-one', type: 'plugin', locale: 'ja' },
          { slug: 'troutes-nobody', type: 'theme', locale: 'de_DE' },
          { slug: 'troutes-one', type: 'plugin', locale: 'klingon' },
          'not an object',
          { slug: 'troutes-one', type: 'plugin' },
          { slug: 'troutes-one', type: 'plugin', locale: 'ja', extra: true },
          { slug: 'troutes-one', type: 'plugin', locale: 'xx_YY' },
        ],
      });
    } finally {
      ctx.db.removeListener('query', onQuery);
    }
    expect(res.status).toBe(200);
    expect(queries.filter((q) => q.includes('translation'))).toHaveLength(1);
    const [ready, missing, badLocale, notObject, noLocale, extra, unknownLocale] = res.body;
    expect(ready).toMatchObject({ slug: 'troutes-one', locale: 'ja', status: 'ready', version: '3.1.4', total_strings: 10, remaining_strings: 9, translated_strings: 1, source: 'human' });
    expect(ready.download_url).toMatch(/\/translations\/packages\/plugin\/troutes-one\/3\.1\.4\/ja\.zip$/);
    expect(missing).toMatchObject({ slug: 'troutes-nobody', type: 'theme', status: 'missing' });
    expect(badLocale).toMatchObject({ index: 2, error: { code: 'wu_rest_invalid_parameter', data: { status: 400, params: { 'packages.2.locale': expect.any(String) } } } });
    expect(notObject).toMatchObject({ index: 3, error: { data: { params: { 'packages.3': expect.stringContaining('object') } } } });
    expect(noLocale.error.data.params).toEqual({ 'packages.4.locale': 'packages.4.locale is required.' });
    expect(Object.keys(extra.error.data.params)).toEqual(['packages.5.extra']);
    expect(unknownLocale).toMatchObject({ index: 6, error: { data: { params: { 'packages.6.locale': 'packages.6.locale is not a known WordPress locale (e.g. de_DE, pt_BR, ja, de_DE_formal).' } } } });
    expect(await ctx.db('translation_jobs').where({ locale: 'xx_YY' }).first()).toBeUndefined();
    expect(res.headers['retry-after']).toBeUndefined();

    // 100 known packages (jobs exist): still one query.
    const locales = ['ja', 'ko_KR'];
    const hundred = Array.from({ length: 100 }, (_, i) => ({ slug: i % 3 === 0 ? 'troutes-one' : `troutes-x${i}`, type: 'plugin', locale: locales[i % 2] }));
    queries.length = 0;
    ctx.db.on('query', onQuery);
    try {
      res = await post('/translations/check/batch', { packages: hundred });
    } finally {
      ctx.db.removeListener('query', onQuery);
    }
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(100);
    expect(queries.filter((q) => q.includes('translation'))).toHaveLength(1);
    expect(res.body.map((s: any) => s.slug)).toEqual(hundred.map((h) => h.slug));
  });

  test('batch: more than 100 packages or 20 locales is a 400 that says the limit; body errors', async () => {
    const before = await counts();
    const pkg = { slug: 'troutes-one', type: 'plugin', locale: 'de_DE' };
    const tooMany = await post('/translations/check/batch', { packages: Array.from({ length: 101 }, () => pkg) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.data.params.packages).toMatch(/at most 100 packages/);
    const locales = ['af', 'ar', 'bg_BG', 'ca', 'cs_CZ', 'da_DK', 'de_DE', 'el', 'es_ES', 'et', 'eu', 'fa_IR', 'fi', 'fr_FR', 'gl_ES', 'he_IL', 'hr', 'hu_HU', 'id_ID', 'it_IT', 'ja'];
    const tooManyLocales = await post('/translations/check/batch', { packages: locales.map((locale) => ({ ...pkg, locale })) });
    expect(tooManyLocales.status).toBe(400);
    expect(tooManyLocales.body.data.params.packages).toMatch(/at most 20 different locales/);
    for (const body of [{}, { packages: [] }, { packages: 'x' }, { packages: [pkg], more: 1 }]) {
      const res = await post('/translations/check/batch', body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
    }
    const notJson = await ctx.http.post(`${BASE}/translations/check/batch`).set(auth()).set('Content-Type', 'application/json').send('{"packages": [');
    expect(notJson.body.code).toBe('rest_invalid_json');
    expect(await counts()).toEqual(before);
  });

  test('projects: list, get, update, delete; bad input is 400 naming the field and changes nothing', async () => {
    const before = await counts();
    const bad: [Record<string, unknown>, string][] = [
      [{ type: 'plugin', name: 'X', version: '1', pot: samplePot() }, 'slug'],
      [{ slug: 'troutes-two', type: 'widget', name: 'X', version: '1', pot: samplePot() }, 'type'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1 0', pot: samplePot() }, 'version'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1' }, 'pot'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: 'just text' }, 'pot'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot_url: 'ftp://x/y.pot' }, 'pot_url'],
      // Internal addresses (nothing is allow-listed here): refused before anything is stored or fetched.
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot_url: 'http://127.0.0.1:8080/metrics' }, 'pot_url'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot_url: 'http://169.254.169.254/latest/meta-data/' }, 'pot_url'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot_url: 'http://2130706433/x.pot' }, 'pot_url'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: samplePot(), glotpress_url_template: 'http://[::ffff:10.0.0.1]/{glotpress_locale}' }, 'glotpress_url_template'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: samplePot(), glotpress_url_template: 'http://localhost:9090/{slug}/{glotpress_locale}.po' }, 'glotpress_url_template'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: samplePot(), glotpress_url_template: 'https://gp.test/{slug}' }, 'glotpress_url_template'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: samplePot(), po_files: { german: 'msgid ""\nmsgstr ""\n' } }, 'po_files.german'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: samplePot(), po_files: { xx_YY: 'msgid "Hi"\nmsgstr "Yo"\n' } }, 'po_files.xx_YY'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: samplePot(), po_files: { de_DE: 'nonsense' } }, 'po_files.de_DE'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: samplePot(), auto_approve: 'maybe' }, 'auto_approve'],
      [{ slug: 'troutes-two', type: 'plugin', name: 'X', version: '1', pot: samplePot(), owner: 'me' }, 'owner'],
      [{ slug: 'troutes-one', type: 'plugin', name: 'Dup', version: '1', pot: samplePot() }, 'slug'],
    ];
    for (const [body, field] of bad) {
      const res = await post('/translations/projects', body);
      expect({ field, status: res.status, code: res.body.code }).toEqual({ field, status: 400, code: 'wu_rest_invalid_parameter' });
      expect(Object.keys(res.body.data.params)).toContain(field);
    }
    const put = (id: number | string, body: unknown) => ctx.http.put(`${BASE}/translations/projects/${id}`).set(auth()).send(body as object);
    expect((await put(projectId, { type: 'widget' })).body.data.params).toHaveProperty('type');
    expect((await put(projectId, { pot: null })).body.data.params).toHaveProperty('pot');
    expect((await put(projectId, { unknown: 1 })).body.data.params).toHaveProperty('unknown');
    expect((await put(projectId, { pot_url: 'http://127.0.0.1:8080/metrics' })).body.data.params).toEqual({
      pot_url: 'pot_url: 127.0.0.1 is a loopback address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).',
    });
    expect((await put(projectId, { glotpress_url_template: 'http://10.1.2.3/{glotpress_locale}', pot_url: 'http://[fd00::1]/x.pot' })).body.data.params).toEqual({
      pot_url: 'pot_url: fd00::1 is a unique-local address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).',
      glotpress_url_template: 'glotpress_url_template: 10.1.2.3 is a private address, which the server does not fetch from (OUTBOUND_ALLOWED_HOSTS can allow it).',
    });
    expect((await put(projectId, { po_files: { xx_YY: 'msgid "a"\nmsgstr "b"\n' } })).body.data.params).toEqual({
      'po_files.xx_YY': 'po_files.xx_YY is not a known WordPress locale (e.g. de_DE, pt_BR, ja, de_DE_formal).',
    });
    expect((await put(999999, { name: 'x' })).body.code).toBe('wu_rest_translation_project_invalid_id');
    expect((await put('abc', { name: 'x' })).body.code).toBe('rest_no_route');
    expect(await counts()).toEqual(before);

    const second = await post('/translations/projects', { slug: 'troutes-two', type: 'theme', name: 'Two', version: '1.0', pot_url: 'https://example.test/two.pot' });
    expect(second.body).toMatchObject({ pot_url: 'https://example.test/two.pot', pot_size: null, glotpress_url_template: ctx.config.TRANSLATION_GLOTPRESS_URL_TEMPLATE });
    const list = await ctx.http.get(`${BASE}/translations/projects`).query({ type: 'theme', orderby: 'slug', order: 'asc' }).set(auth());
    expect(list.body.map((p: any) => p.slug)).toEqual(['troutes-two']);
    expect(list.headers['x-wp-total']).toBe('1');
    expect((await ctx.http.get(`${BASE}/translations/projects`).query({ search: 'Routes One' }).set(auth())).body).toHaveLength(1);
    for (const q of [{ orderby: 'pot' }, { colour: 'red' }, { type: 'widget' }, { per_page: '500' }]) {
      const res = await ctx.http.get(`${BASE}/translations/projects`).query(q).set(auth());
      expect(res.status).toBe(400);
      expect(Object.keys(res.body.data.params)).toEqual([Object.keys(q)[0]]);
    }
    const updated = await put(second.body.id, { name: 'Two!', po_files: { de_DE: 'msgid "Hi"\nmsgstr "Hallo"\n' } });
    expect(updated.body).toMatchObject({ name: 'Two!', po_locales: ['de_DE'] });
    expect((await ctx.http.get(`${BASE}/translations/projects/${second.body.id}`).set(auth())).body.name).toBe('Two!');
    expect((await ctx.http.get(`${BASE}/translations/projects/999999`).set(auth())).status).toBe(404);
    expect((await ctx.http.delete(`${BASE}/translations/projects/${second.body.id}`).set(auth())).body).toBe(true);
    expect((await ctx.http.delete(`${BASE}/translations/projects/${second.body.id}`).set(auth())).status).toBe(404);
  });

  test('jobs: list filters, get, and bad input on approve, reject, retry and bulk approval', async () => {
    const jobs = await ctx.http.get(`${BASE}/translations/jobs`).query({ status: 'ready', slug: 'troutes-one' }).set(auth());
    expect(jobs.status).toBe(200);
    expect(jobs.body.length).toBeGreaterThanOrEqual(1);
    expect(jobs.body.every((j: any) => j.status === 'ready' && j.logs === undefined)).toBe(true);
    for (const q of [{ status: 'done' }, { orderby: 'entries' }, { locale__in: '' }, { nope: 1 }, { locale: 'xx_YY' }, { locale__in: 'ja,xx_YY' }, { locale__not_in: 'de' }]) {
      const res = await ctx.http.get(`${BASE}/translations/jobs`).query(q).set(auth());
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('wu_rest_invalid_parameter');
      expect(Object.keys(res.body.data.params)).toEqual(Object.keys(q));
    }
    const listed = await ctx.http.get(`${BASE}/translations/jobs`).query({ locale__in: 'xx_YY,ja' }).set(auth());
    expect(listed.body.data.params.locale__in).toBe('locale__in: xx_YY is not a known WordPress locale (e.g. de_DE, pt_BR, ja, de_DE_formal).');
    const jobId = jobs.body[0].id;
    const one = await ctx.http.get(`${BASE}/translations/jobs/${jobId}`).set(auth());
    expect(one.body.logs.length).toBeGreaterThan(2);
    expect((await ctx.http.get(`${BASE}/translations/jobs/999999`).set(auth())).body.code).toBe('wu_rest_translation_job_invalid_id');
    expect((await ctx.http.get(`${BASE}/translations/jobs/abc`).set(auth())).body.code).toBe('rest_no_route');

    const before = await ctx.db('translation_jobs').where({ id: jobId }).first('status', 'date_modified');
    expect((await post(`/translations/jobs/${jobId}/reject`, {})).body.data.params).toHaveProperty('reason');
    expect((await post(`/translations/jobs/${jobId}/reject`, { reason: '   ' })).body.data.params).toHaveProperty('reason');
    expect((await post(`/translations/jobs/${jobId}/approve`, { force: true })).body.data.params).toHaveProperty('force');
    expect((await post(`/translations/jobs/${jobId}/retry`, { from: 'x' })).body.data.params).toHaveProperty('from');
    expect((await post(`/translations/jobs/${jobId}/approve`)).body).toMatchObject({ code: 'wu_rest_translation_job_not_pending', data: { status: 409 } });
    expect((await post(`/translations/jobs/${jobId}/retry`)).body).toMatchObject({ code: 'wu_rest_translation_job_not_failed', data: { status: 409 } });
    expect((await post('/translations/jobs/999999/approve')).status).toBe(404);
    expect((await post('/translations/jobs/approve', {})).body.data.params).toHaveProperty('all');
    expect((await post('/translations/jobs/approve', { all: true, locale: 'de' })).body.data.params).toHaveProperty('all');
    expect((await post('/translations/jobs/approve', { locale: 'xx-YY' })).body.data.params).toHaveProperty('locale');
    expect((await post('/translations/jobs/approve', { locale: 'xx_YY' })).body.data.params).toEqual({ locale: 'locale is not a known WordPress locale (e.g. de_DE, pt_BR, ja, de_DE_formal).' });
    expect((await post('/translations/jobs/approve', { all: false })).body.data.params).toHaveProperty('all');
    expect(await post('/translations/jobs/approve', { locale: 'ja' }).then((r) => r.body)).toEqual({ approved: [], failed: [] });
    expect(await ctx.db('translation_jobs').where({ id: jobId }).first('status', 'date_modified')).toEqual(before);

    // A project with a job in flight cannot be deleted.
    await ctx.db('translation_jobs').where({ id: jobId }).update({ status: 'processing' });
    const del = await ctx.http.delete(`${BASE}/translations/projects/${projectId}`).set(auth());
    expect(del.body).toMatchObject({ code: 'wu_rest_translation_project_in_use', data: { status: 409 } });
    await ctx.db('translation_jobs').where({ id: jobId }).update({ status: 'ready' });
  });

  test('download: bad path parts are 400, unknown packages 404, without credentials', async () => {
    const bad = await ctx.http.get(`${BASE}/translations/packages/widget/troutes-one/3.1.4/xx-YY.zip`);
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.data.params).sort()).toEqual(['locale', 'type']);
    const notWordPress = await ctx.http.get(`${BASE}/translations/packages/plugin/troutes-one/3.1.4/xx_YY.zip`);
    expect(notWordPress.body.data.params).toEqual({ locale: 'locale is not a known WordPress locale (e.g. de_DE, pt_BR, ja, de_DE_formal).' });
    const unknown = await ctx.http.get(`${BASE}/translations/packages/plugin/troutes-one/9.9.9/ja.zip`);
    expect(unknown.body.code).toBe('wu_rest_translation_package_not_found');
    const ok = await ctx.http.get(`${BASE}/translations/packages/plugin/troutes-one/3.1.4/ja.zip`);
    expect(ok.status).toBe(200);
    const again = await ctx.http.get(`${BASE}/translations/packages/plugin/troutes-one/3.1.4/ja.zip`).set('If-None-Match', ok.headers.etag);
    expect(again.status).toBe(304);
    // The project deleted (no job in flight): the pack stays downloadable, checks say missing.
    await ctx.db('translation_jobs').where({ project_id: projectId }).whereNot({ status: 'ready' }).delete();
    expect((await ctx.http.delete(`${BASE}/translations/projects/${projectId}`).set(auth())).body).toBe(true);
    expect((await ctx.http.get(`${BASE}/translations/packages/plugin/troutes-one/3.1.4/ja.zip`)).status).toBe(200);
    const gone = await ctx.http.get(`${BASE}/translations/check`).query({ slug: 'troutes-one', type: 'plugin', locale: 'ja' }).set(auth());
    expect(gone.body.status).toBe('missing');
  });
});
