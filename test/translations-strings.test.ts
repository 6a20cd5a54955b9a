import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningWorker } from '../src/temporal/worker';
import { BASE, createTestContext, startTestWorker, type TestContext } from './helpers';
import { status, waitForJob } from './translation-helpers';
import { GERMAN_PO, samplePot } from './translation-servers';

/** GET /translations/jobs/{id}/strings: what the console's job page shows (source, translation, human / AI / missing). */
describe("a translation job's strings", () => {
  let ctx: TestContext;
  let worker: RunningWorker;
  let dataDir: string;
  let jobId: number;
  let plural: number;
  const auth = () => ({ Authorization: ctx.basic });
  const strings = (query = '', id = jobId) => ctx.http.get(`${BASE}/translations/jobs/${id}/strings${query}`).set(auth());

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-strings-'));
    ctx = await createTestContext({ DATA_DIR: dataDir });
    worker = await startTestWorker(ctx);
    const created = await ctx.http
      .post(`${BASE}/translations/projects`)
      .set(auth())
      .send({ slug: 'strings-one', type: 'plugin', name: 'Strings One', version: '1.0.0', pot: samplePot(), glotpress_url_template: null, po_files: { de_DE: GERMAN_PO } });
    expect(created.status).toBe(200);
    const check = await ctx.http.get(`${BASE}/translations/check?slug=strings-one&type=plugin&locale=de_DE`).set(auth());
    jobId = check.body.job_id;
    await waitForJob(ctx, jobId, status('pending_approval'));
  });
  afterAll(async () => {
    await worker?.shutdown();
    await ctx?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('every string in POT order, human translations marked, the missing ones null; paging headers and links', async () => {
    const job = (await ctx.http.get(`${BASE}/translations/jobs/${jobId}`).set(auth())).body;
    expect(job).toMatchObject({ total_strings: 10, human_strings: 3, remaining_strings: 7 });

    const all = await strings('?per_page=100');
    expect(all.status).toBe(200);
    expect(all.headers['x-wp-total']).toBe('10');
    expect(all.headers['x-wp-totalpages']).toBe('1');
    expect(all.headers.link).toBeUndefined();
    expect(all.body.map((s: { index: number }) => s.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const find = (source: string, context: string | null = null) => all.body.find((s: { source: string; context: string | null }) => s.source === source && s.context === context);
    expect(all.body[0]).toEqual({ index: 0, context: null, source: 'Settings', plural: null, references: ['includes/admin.php:10'], note: null, translation: ['Einstellungen'], state: 'human' });
    expect(find('Post', 'verb')).toMatchObject({ translation: ['Veröffentlichen'], state: 'human' });
    // The fuzzy German entry is not taken: the noun stays missing.
    expect(find('Post', 'noun')).toMatchObject({ translation: null, state: 'missing' });
    expect(find('%d file')).toMatchObject({ plural: '%d files', translation: ['%d Datei', '%d Dateien'], state: 'human' });
    expect(find('Save draft')).toMatchObject({ references: ['assets/js/editor.js:5', 'assets/js/editor.min.js:1'], translation: null, state: 'missing' });
    // The order is the job's (the POT's, grouped by context), the same on every page.
    plural = find('%d file').index;

    const first = await strings('?per_page=4');
    expect(first.body).toHaveLength(4);
    expect(first.headers['x-wp-totalpages']).toBe('3');
    expect(first.headers.link).toMatch(/<http:\/\/127\.0\.0\.1:\d+\/wp-json\/wu\/v2\/translations\/jobs\/\d+\/strings\?per_page=4&page=2>; rel="next"/);
    const next = /<([^>]+)>; rel="next"/.exec(first.headers.link)![1];
    const second = await ctx.http.get(new URL(next).pathname + new URL(next).search).set(auth());
    expect(second.body.map((s: { index: number }) => s.index)).toEqual([4, 5, 6, 7]);
    expect(second.headers.link).toContain('rel="prev"');
    const last = await strings('?per_page=4&page=3');
    expect(last.body.map((s: { index: number }) => s.index)).toEqual([8, 9]);
    expect(last.headers.link).not.toContain('rel="next"');
    expect((await strings('?per_page=4&page=9')).body).toEqual([]);
  });

  test('state keeps the human, AI or missing strings; search finds source, context or translation, case-insensitively', async () => {
    const human = await strings('?state=human');
    expect(human.headers['x-wp-total']).toBe('3');
    expect(human.body.every((s: { state: string }) => s.state === 'human')).toBe(true);
    const missing = await strings('?state=missing');
    expect(missing.headers['x-wp-total']).toBe('7');
    expect(missing.body.every((s: { translation: unknown }) => s.translation === null)).toBe(true);
    expect((await strings('?state=ai')).body).toEqual([]);

    expect((await strings('?search=EINSTELL')).body.map((s: { source: string }) => s.source)).toEqual(['Settings']);
    expect((await strings('?search=draft')).body.map((s: { source: string }) => s.source)).toEqual(['Save draft']);
    expect((await strings('?search=BUTTON')).body.map((s: { context: string }) => s.context)).toEqual(['button']);
    expect((await strings('?search=%25d%20files')).body.map((s: { index: number }) => s.index)).toEqual([plural]);
    // LIKE's wildcards are plain text here.
    expect((await strings('?search=_')).body).toEqual([]);
    expect((await strings('?search=post&state=missing')).body.map((s: { context: string }) => s.context)).toEqual(['noun']);
    expect((await strings('?search=日本語')).body).toEqual([]);
  });

  test('bad parameters are a 400 naming each; an unknown job 404; no credentials 401', async () => {
    const bad = await strings('?per_page=0&page=abc&state=robot&search=' + 'x'.repeat(201) + '&color=red');
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('wu_rest_invalid_parameter');
    expect(Object.keys(bad.body.data.params).sort()).toEqual(['color', 'page', 'per_page', 'search', 'state']);
    expect((await strings('?per_page=101')).body.data.params).toEqual({ per_page: 'per_page must be an integer from 1 to 100.' });
    expect((await strings('?search=a&search=b')).body.data.params).toEqual({ search: 'search is not of type string.' });
    // Characters are counted as the document's maxLength counts them (code points, not UTF-16 units).
    expect((await strings(`?search=${encodeURIComponent('🙂'.repeat(200))}`)).status).toBe(200);
    expect((await strings(`?search=${encodeURIComponent('🙂'.repeat(201))}`)).body.data.params).toEqual({ search: 'search must be at most 200 characters long.' });
    // WordPress' underscore parameters and the credentials as parameters are not the route's own.
    expect((await strings('?_locale=user&per_page=1')).status).toBe(200);

    const unknown = await strings('', 999_999);
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('wu_rest_translation_job_invalid_id');
    expect((await ctx.http.get(`${BASE}/translations/jobs/${jobId}/strings`)).status).toBe(401);
  });
});
