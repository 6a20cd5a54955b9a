import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { RunningWorker } from '../src/temporal/worker';
import { launchChromium, screenshots, seriousViolations, waitForCount, watchPage } from './browser';
import { makeAgent } from './chat-helpers';
import { API_KEY, API_SECRET, BASE, newCustomerBody, startTestWorker, type TestContext } from './helpers';
import { binaryParser, startAiContext, unzip, type AiContext } from './translation-helpers';
import { GERMAN_PO, samplePot } from './translation-servers';

/**
 * The console in a real browser (Debian's chromium, headless) against the real service: the API
 * on a loopback port, a Temporal worker, a fake AI provider on loopback.
 */
describe('the console in a browser', () => {
  let env: AiContext;
  let ctx: TestContext;
  let worker: RunningWorker;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  let agent: { id: number; token: string; name: string };

  beforeAll(async () => {
    env = await startAiContext('console-key', { TEMPORAL_UI_URL: 'http://127.0.0.1:8233' });
    ctx = env.ctx;
    worker = await startTestWorker(ctx);
    browser = await launchChromium();
    agent = await makeAgent(ctx, { name: 'Grace Hopper' });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await worker?.shutdown();
    await env?.close();
  });
  beforeEach(async () => {
    context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    page = await context.newPage();
    problems = watchPage(page);
  });
  afterEach(async () => {
    await context.close();
    // No CSP violation, no script error on any page.
    expect(problems).toEqual([]);
  });

  const signInAsAdmin = async (key = API_KEY, secret = API_SECRET) => {
    await page.goto(`${ctx.url}/console/`);
    await page.getByLabel('API key', { exact: true }).fill(key);
    await page.getByLabel('API secret', { exact: true }).fill(secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
  };

  /** Screenshots at 1440 and 360 px; the page must not scroll sideways at either. */
  const shoot = async (name: string) => {
    const { overflowing } = await screenshots(page, 'console', name);
    expect({ page: name, overflowing }).toEqual({ page: name, overflowing: [] });
  };

  const expectAccessible = async (what: string) => {
    const violations = await seriousViolations(page);
    expect({ page: what, violations }).toEqual({ page: what, violations: [] });
  };

  test('scenario 1: an admin registers a project from its POT and PO files, sees the pending job, reads its strings, approves it; the job reaches ready on screen and the pack downloads', async () => {
    await page.goto(`${ctx.url}/console/`);
    await expectAccessible('sign-in');
    await shoot('sign-in');
    await signInAsAdmin();
    await page.getByRole('heading', { name: 'Translations', level: 1 }).waitFor();

    // Register a project by uploading its files.
    await page.getByRole('link', { name: 'Register a project' }).click();
    await page.getByLabel('Slug').fill('console-demo');
    await page.getByLabel('Name', { exact: true }).fill('Console Demo');
    await page.getByLabel('Version').fill('2.0.0');
    await page.getByLabel('POT file (source strings)').setInputFiles({ name: 'console-demo.pot', mimeType: 'text/x-gettext-translation', buffer: Buffer.from(samplePot()) });
    await page.getByLabel('PO files (human translations, optional)').setInputFiles({ name: 'console-demo-de_DE.po', mimeType: 'text/x-gettext-translation', buffer: Buffer.from(GERMAN_PO) });
    await page.getByLabel('Locale of console-demo-de_DE.po').waitFor();
    expect(await page.getByLabel('Locale of console-demo-de_DE.po').inputValue()).toBe('de_DE');
    await page.getByLabel('Other locales to prepare (optional)').fill('fr_FR, ja');
    await expectAccessible('register a project');
    await shoot('register');
    await page.getByRole('button', { name: 'Register' }).click();
    await page.getByText('Registered plugin console-demo.').waitFor();
    const project = (await ctx.http.get(`${BASE}/translations/projects?slug=console-demo`).set('Authorization', ctx.basic)).body[0];
    expect(project).toMatchObject({ name: 'Console Demo', version: '2.0.0', po_locales: ['de_DE'], auto_approve: false, glotpress_url_template: null });

    await page.getByRole('link', { name: 'open job #1' }).waitFor();
    await expect(page.getByRole('status').getByRole('listitem').allTextContents()).resolves.toEqual([
      expect.stringMatching(/^de_DE: importing/),
      expect.stringMatching(/^fr_FR: importing/),
      expect.stringMatching(/^ja: importing/),
    ]);

    // The queue shows the jobs once imported, without a reload.
    await page.getByRole('link', { name: '← Back to the queue' }).click();
    const queue = page.getByRole('region', { name: 'Translation jobs' });
    await waitForCount(queue.locator('tr', { hasText: 'pending approval' }), 3, 60_000);
    const row = queue.locator('tr', { hasText: 'de_DE' });
    await expect(row.textContent()).resolves.toMatch(/console-demo \(plugin\)\s*2\.0\.0\s*de_DE\s*pending approval\s*10\s*3\s*7/);
    await expect(queue.locator('tr', { hasText: 'fr_FR' }).textContent()).resolves.toMatch(/pending approval\s*10\s*0\s*10/);
    await expectAccessible('translations queue');
    await shoot('queue');

    // Its strings: human, missing, searchable.
    await row.getByRole('link').click();
    await page.getByRole('heading', { name: 'console-demo 2.0.0 · de_DE' }).waitFor();
    const strings = page.getByRole('region', { name: 'Strings of the job' });
    await strings.getByText('Einstellungen').waitFor();
    await waitForCount(strings.locator('tbody tr'), 10);
    await page.getByLabel('Search the strings').fill('draft');
    await page.getByRole('button', { name: 'Filter' }).click();
    await waitForCount(strings.locator('tbody tr'), 1);
    await expect(strings.locator('tbody tr').first().textContent()).resolves.toContain('missing (falls back to English)');
    await page.getByLabel('Show').selectOption('human');
    await page.getByLabel('Search the strings').fill('');
    await page.getByRole('button', { name: 'Filter' }).click();
    await waitForCount(strings.locator('tbody tr'), 3);
    await waitForCount(strings.locator('tbody tr.string-human'), 3);
    // Opened again from its address, the filter shows the state it applies.
    await page.reload();
    await waitForCount(strings.locator('tbody tr.string-human'), 3);
    expect(await page.getByLabel('Show').inputValue()).toBe('human');
    await expect(page.getByRole('list').filter({ hasText: 'Imported 10 strings' }).count()).resolves.toBe(1);
    await expectAccessible('translation job');
    await shoot('job-pending');

    // Approve: the page follows the pipeline (AI, packaging) to ready by itself.
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('Approved. The pipeline fills the missing strings').waitFor();
    await page.getByTestId('job-status').getByText('ready').waitFor({ timeout: 90_000 });
    await page.getByText('10 in all: 3 human, 7 AI, 0 missing').waitFor();
    await shoot('job-ready');

    // The download link serves the zip.
    const href = await page.getByTestId('download').getAttribute('href');
    expect(href).toMatch(/^\/wp-json\/wu\/v2\/translations\/packages\/plugin\/console-demo\/2\.0\.0\/de_DE\.zip$/);
    const zip = await ctx.http.get(href!).buffer(true).parse(binaryParser);
    expect(zip.status).toBe(200);
    expect(zip.headers['content-type']).toBe('application/zip');
    const files = await unzip(zip.body as Buffer);
    expect(Object.keys(files)).toEqual(expect.arrayContaining(['console-demo-de_DE.po', 'console-demo-de_DE.mo']));
    expect(files['console-demo-de_DE.po'].toString('utf8')).toContain('msgstr "Einstellungen"');
    // The Temporal UI link names the job's workflow.
    const job = (await ctx.http.get(`${BASE}/translations/jobs?slug=console-demo&locale=de_DE`).set('Authorization', ctx.basic)).body[0];
    await expect(page.getByRole('link', { name: /Open the pipeline in the Temporal UI/ }).getAttribute('href')).resolves.toBe(
      `http://127.0.0.1:8233/namespaces/default/workflows/${encodeURIComponent(job.workflow_id)}`,
    );

    // Reject another with a reason: the step and the reason are shown; retry makes it wait for approval again.
    await page.getByRole('link', { name: '← Back to the queue' }).click();
    await queue.locator('tr', { hasText: 'fr_FR' }).getByRole('link').click();
    await page.getByRole('button', { name: 'Reject…' }).click();
    await page.getByLabel('Why is it rejected?').fill('The French glossary is not ready yet.');
    await page.getByRole('button', { name: 'Reject the job' }).click();
    const failure = page.getByTestId('failure');
    await failure.getByText('Rejected', { exact: true }).waitFor();
    await expect(failure.textContent()).resolves.toMatch(/Step: pending approval \(rejected\).*Why: The French glossary is not ready yet\./);
    await expectAccessible('a rejected job');
    await shoot('job-rejected');
    await failure.getByRole('button', { name: 'Ask for approval again' }).click();
    await page.getByRole('button', { name: 'Approve' }).waitFor();
    await page.getByTestId('job-status').getByText('pending approval').waitFor();

    // Bulk approval by project: the two waiting jobs. The AI provider now refuses the key: both
    // fail while processing, and the Failed view fills by itself.
    env.ai.mode.rejectKey = true;
    await page.getByRole('link', { name: '← Back to the queue' }).click();
    await waitForCount(queue.locator('tr', { hasText: 'pending approval' }), 2);
    await page.getByLabel('a project').check();
    await page.getByLabel('Project', { exact: true }).selectOption('plugin:console-demo');
    await page.getByRole('button', { name: 'Approve all waiting' }).click();
    await page.getByRole('status').getByText('Approved 2 jobs.').waitFor();
    await page.getByRole('link', { name: 'Failed or expired' }).click();
    await waitForCount(queue.locator('tbody tr', { hasText: 'failed' }), 2, 60_000);

    // A failed job shows the step it failed in and why; once the provider is fixed, retry finishes it.
    await queue.locator('tr', { hasText: 'ja' }).getByRole('link').click();
    await failure.getByText('Failed while processing').waitFor();
    await expect(failure.textContent()).resolves.toMatch(/Step: processing \(translation\).*Why: Translation failed: batch 1 \(10 strings\): the provider answered HTTP 401 \(invalid_request_error\)/);
    await shoot('job-failed');
    env.ai.mode.rejectKey = false;
    await failure.getByRole('button', { name: 'Retry from processing' }).click();
    await page.getByTestId('job-status').getByText('ready').waitFor({ timeout: 90_000 });
    await page.getByText('10 in all: 0 human, 10 AI, 0 missing').waitFor();
    await page.getByRole('link', { name: '← Back to the queue' }).click();
    await page.getByRole('link', { name: 'Ready' }).click();
    await waitForCount(queue.locator('tbody tr', { hasText: 'ready' }), 2);
    await expect(queue.getByRole('link', { name: 'Download the ja pack of console-demo' }).getAttribute('href')).resolves.toBe('/wp-json/wu/v2/translations/packages/plugin/console-demo/2.0.0/ja.zip');
  }, 240_000);

  test('the records: signed in from the keyboard, search and page through customers with the list API, open one with its sites and its workflows link', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await ctx.http.post(`${BASE}/customers`).set('Authorization', ctx.basic).send(newCustomerBody({ display_name: `Paging Person ${i}` }));
      ids.push(res.body.id);
    }
    const site = await ctx.http.post(`${BASE}/sites`).set('Authorization', ctx.basic).send({ title: 'Paging Site', domain: 'paging.example.com', customer_id: ids[0] });
    expect(site.status).toBe(200);

    // Keyboard only: the heading has the focus, then the role, the key, the secret; Enter signs in.
    await page.goto(`${ctx.url}/console/`);
    await page.getByRole('heading', { name: 'Sign in to the hostflow console' }).waitFor();
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    await page.keyboard.type(API_KEY);
    await page.keyboard.press('Tab');
    await page.keyboard.type(API_SECRET);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Translations', level: 1 }).waitFor();
    await expect(page.title()).resolves.toBe('Translations · hostflow console');
    await page.getByRole('link', { name: 'Customers' }).click();
    await page.getByLabel('Search', { exact: true }).fill('Paging Person');
    await page.getByLabel('Per page').fill('2');
    await page.getByRole('button', { name: 'Apply' }).click();
    const table = page.getByRole('region', { name: 'Customers' });
    await page.getByText('Page 1 of 2 · 3 in all').waitFor();
    await waitForCount(table.locator('tbody tr'), 2);
    await expectAccessible('customers');
    await shoot('customers');
    // Next follows the API's own Link rel="next" (its cursor is in the page's address).
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('Page 2 of 2 · 3 in all').waitFor();
    expect(page.url()).toMatch(/cursor=/);
    await waitForCount(table.locator('tbody tr'), 1);
    await expect(table.textContent()).resolves.toContain('Paging Person 0');
    // A date range: nobody was created after tomorrow.
    await page.getByLabel('Created after').fill(new Date(Date.now() + 86_400_000).toISOString().slice(0, 10));
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('No customers match.').waitFor();
    expect(new URL(page.url()).hash).toContain('date_created%5Bafter%5D=');
    // Back: the page before, from the address (its cursor included).
    await page.goBack();
    await page.getByText('Page 2 of 2 · 3 in all').waitFor();
    await waitForCount(table.locator('tbody tr'), 1);

    await table.getByRole('link').first().click();
    await page.getByRole('heading', { name: new RegExp(`Customer #${ids[0]}`) }).waitFor();
    const sites = page.getByRole('region', { name: 'Sites' });
    await sites.getByText('paging.example.com').waitFor();
    await expect(page.getByRole('link', { name: /This customer's workflows/ }).getAttribute('href')).resolves.toBe(
      `http://127.0.0.1:8233/namespaces/default/workflows?query=${encodeURIComponent(`HostflowCustomerId = ${ids[0]}`)}`,
    );
    await expectAccessible('a customer');
    // The site, with its customer embedded.
    await sites.getByRole('link').first().click();
    await page.getByRole('heading', { name: /Site #/ }).waitFor();
    await page.getByRole('link', { name: /Paging Person 0/ }).waitFor();
    await page.getByText('Not isolated: the site lives in the shared database.').waitFor();
    await shoot('site');
    // The agent's own page is not an admin's.
    await page.goto(`${ctx.url}/console/#/agent`);
    await page.getByRole('alert').getByText('This page is for support agents.').waitFor();
  }, 120_000);

  test('scenario 4: wrong credentials are refused with a message; an agent is offered no admin page and is refused one opened by address; disabled meanwhile, told to sign in again', async () => {
    await signInAsAdmin(API_KEY, 'not-the-secret');
    await page.getByRole('alert').getByText('These credentials were refused').waitFor();
    await expect(page.evaluate('sessionStorage.length')).resolves.toBe(0);
    await shoot('wrong-credentials');

    await page.getByLabel('a support agent (agent token)').check();
    await page.getByLabel('Agent token', { exact: true }).fill(`hfa_${agent.id}_wrong`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText('This agent token was refused').waitFor();

    await page.getByLabel('Agent token', { exact: true }).fill(agent.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Hello, Grace Hopper' }).waitFor();
    // Nothing an agent may not do is offered.
    const nav = page.getByRole('navigation', { name: 'Main' });
    await expect(nav.getByRole('link').allTextContents()).resolves.toEqual(['Desk', 'Tickets', 'Reports', 'My availability']);
    await page.getByLabel('online', { exact: true }).click();
    await page.getByRole('radio', { name: 'online' }).and(page.locator(':checked')).waitFor();
    const availability = await ctx.http.get('/wp-json/ultimate-multisite-support-tickets/v1/chat/agent/availability').set('Authorization', `Bearer ${agent.token}`);
    expect(availability.body.agents.find((a: { id: number }) => a.id === agent.id).presence).toBe('online');
    await expectAccessible('agent home');

    await page.goto(`${ctx.url}/console/#/translations/jobs/1`);
    await page.getByRole('alert').getByText('This page is for admins.').waitFor();
    await page.goto(`${ctx.url}/console/#/records/customers`);
    await page.getByRole('alert').getByText('This page is for admins.').waitFor();
    await expectAccessible('refused page');
    await shoot('agent-refused');
    // The credentials are in this tab's session storage only.
    await expect(page.evaluate('localStorage.length')).resolves.toBe(0);
    await expect(page.evaluate('Object.keys(sessionStorage)')).resolves.toEqual(['hostflow.console.session']);

    // An admin disables the agent meanwhile: the next action says to sign in again.
    await page.goto(`${ctx.url}/console/#/agent`);
    await page.getByRole('heading', { name: 'Hello, Grace Hopper' }).waitFor();
    const disabled = await ctx.http.put(`/wp-json/ultimate-multisite-support-tickets/v1/chat/agent/agents/${agent.id}`).set('Authorization', ctx.basic).send({ active: false });
    expect(disabled.status).toBe(200);
    // The next call the page makes is refused: this click, or the desk's waiting count, which the
    // navigation polls every few seconds and may ask first (the page then leaves the controls).
    await page
      .getByLabel('away', { exact: true })
      .click({ timeout: 3000 })
      .catch(() => undefined);
    await page.getByRole('alert').getByText('The server no longer accepts your credentials').waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to the hostflow console' }).waitFor();
    await expect(page.evaluate('sessionStorage.length')).resolves.toBe(0);
  }, 120_000);
});
