import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import sharp from 'sharp';
import { launchChromium, screenshots, seriousViolations, servePages, waitForCount, watchPage, widgetDemoPage, type PageServer } from './browser';
import { bearer, CHAT, makeAgent } from './chat-helpers';
import { makeCustomer } from './estate-helpers';
import { API_KEY, API_SECRET, BASE, createTestContext, type TestContext } from './helpers';
import { buildWidgetIfStale } from './web-build';

/**
 * The agent's desk in the console, in a real browser (Debian's chromium, headless), against the
 * real service: the API with its WebSocket channel on a loopback port, PostgreSQL and Temporal.
 * The customer uses the chat widget on a page of a second origin (listed in
 * CHAT_ALLOWED_ORIGINS), in a browser profile of their own; the agent uses the console.
 */
jest.setTimeout(180_000);

describe('the agent desk in a browser', () => {
  let ctx: TestContext;
  let server: http.Server;
  let api: string;
  let site: PageServer;
  let browser: Browser;
  let agent: { id: number; token: string; name: string };
  const contexts: BrowserContext[] = [];
  const problems: string[][] = [];

  beforeAll(async () => {
    const widgetDir = buildWidgetIfStale();
    browser = await launchChromium();
    site = await servePages(() => ({ '/demo.html': widgetDemoPage(widgetDir, `<script src="${api}/chat/widget.js" defer data-title="Acme support" data-locale="en_GB"></script>`) }));
    ctx = await createTestContext({ CHAT_ALLOWED_ORIGINS: site.origin, CHAT_WIDGET_DIR: widgetDir, CHAT_POLL_INTERVAL_SECONDS: '10', CHAT_WAIT_BEFORE_TICKET_SECONDS: '3600' });
    // The API with its WebSocket channel, as `npm start` serves it.
    server = http.createServer(ctx.app);
    ctx.app.locals.chat.attach(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    expect(await ctx.app.locals.chat.realtime.ready()).toBe(true);
    agent = await makeAgent(ctx, { name: 'Grace Hopper', online: true });
  });

  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await site?.close();
    if (server) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
    await ctx?.close();
  });

  afterEach(() => {
    // No CSP violation, no script error on any page of either side.
    for (const p of problems.splice(0)) expect(p).toEqual([]);
  });

  const newPage = async (width = 1440, height = 900): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width, height } });
    contexts.push(context);
    const page = await context.newPage();
    problems.push(watchPage(page));
    return page;
  };

  /** Waits for the tab's title to satisfy `ok` (read from outside: the page's CSP forbids evaluating strings in it). */
  const waitForTitle = async (page: Page, ok: (title: string) => boolean, timeoutMs = 30_000) => {
    const end = Date.now() + timeoutMs;
    while (!ok(await page.title())) {
      if (Date.now() > end) throw new Error(`the title is still ${JSON.stringify(await page.title())}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  const signInAsAgent = async (page: Page) => {
    await page.goto(`${api}/console/`);
    await page.getByLabel('a support agent (agent token)').check();
    await page.getByLabel('Agent token', { exact: true }).fill(agent.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Hello, Grace Hopper' }).waitFor();
  };

  /** Screenshots at 1440 and 360 px (test-artifacts/console/); the page must not scroll sideways at either. */
  const shoot = async (page: Page, name: string) => {
    const { overflowing } = await screenshots(page, 'console', name);
    expect({ page: name, overflowing }).toEqual({ page: name, overflowing: [] });
  };
  const expectAccessible = async (page: Page, what: string) => {
    const violations = await seriousViolations(page);
    expect({ page: what, violations }).toEqual({ page: what, violations: [] });
  };

  test('scenario 2: a customer writes in the widget from another origin; the agent sees the chat arrive without reloading, answers with a canned reply, the customer sees it live and rates the chat; attachments, assign, convert to a ticket and work it', async () => {
    const canned = await ctx.http
      .post(`${CHAT}/chat/agent/canned-replies`)
      .set('Authorization', ctx.basic)
      .send({ shortcut: 'hello', title: 'Hello', body: 'Hello {{customer_first_name}}, {{agent_name}} here. How can I help?' });
    expect(canned.status).toBe(201);

    const desk = await newPage();
    await signInAsAgent(desk);
    await desk.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Desk' }).click();
    await desk.getByRole('heading', { name: 'Desk', level: 1 }).waitFor();
    await desk.getByText('No chat is waiting for an agent.').waitFor();
    await waitForTitle(desk, (t) => t === 'Desk · hostflow console');

    // The customer, on a site of another origin.
    const customer = await newPage(1280, 800);
    await customer.goto(`${site.origin}/demo.html`);
    await customer.getByRole('button', { name: 'Open chat' }).click();
    await customer.getByLabel('Your name').fill('Ada Lovelace');
    await customer.getByLabel('Your email').fill('ada@example.com');
    await customer.getByLabel('Message', { exact: true }).fill('My invoice is wrong');
    await customer.getByRole('button', { name: 'Start chat' }).click();
    await customer.getByRole('log').getByText('My invoice is wrong').waitFor();

    // The desk sees it without a reload: the list, the tab's title and the navigation's badge.
    const waiting = desk.getByRole('region', { name: 'Waiting chats' });
    await waiting.getByText('Ada Lovelace').waitFor({ timeout: 30_000 });
    await waitForTitle(desk, (t) => t.startsWith('(1) '));
    await desk.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Desk 1 waiting' }).waitFor();
    await desk.getByText('1 chat waiting for an agent.').waitFor();
    await expectAccessible(desk, 'desk');
    await shoot(desk, 'desk');

    // The conversation, live over the socket, with the customer's context.
    await waiting.getByRole('link', { name: /^Chat #\d+$/ }).click();
    const log = desk.getByRole('log', { name: 'Messages' });
    await log.getByText('My invoice is wrong').waitFor();
    await desk.getByRole('status').getByText('Live', { exact: true }).waitFor();
    const side = desk.getByRole('complementary', { name: 'The customer and the chat' });
    await side.getByText(`${site.origin}/demo.html`).waitFor();
    await side.getByText('en_GB').waitFor();
    await side.getByText('as typed by the visitor (not verified)').waitFor();
    const id = Number(/#\/desk\/sessions\/(\d+)/.exec(desk.url())![1]);

    await desk.getByRole('button', { name: 'Assign to me' }).click();
    await side.getByText('Assigned to you.').waitFor();
    expect((await ctx.http.get(`${CHAT}/chat/sessions/${id}`).set(bearer(agent.token))).body).toMatchObject({ status: 'assigned', assigned_agent_id: agent.id });
    // Assigned: no longer waiting, in the title either.
    await waitForTitle(desk, (t) => !t.startsWith('('));

    // A customer's screenshot arrives live, with its thumbnail drawn with the agent's credentials.
    const png = await sharp({ create: { width: 480, height: 320, channels: 3, background: '#fecaca' } }).png().toBuffer();
    await customer.locator('input[type=file]').setInputFiles({ name: 'screenshot.png', mimeType: 'image/png', buffer: png });
    const thumb = log.getByRole('img', { name: 'screenshot.png' });
    await thumb.waitFor({ timeout: 8000 });
    expect(await thumb.getAttribute('src')).toMatch(/^blob:/);
    expect(await thumb.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(250);
    const download = desk.waitForEvent('download');
    await log.getByRole('button', { name: 'Download screenshot.png' }).click();
    expect((await download).suggestedFilename()).toBe('screenshot.png');

    // The agent sends a file too: the customer sees its thumbnail.
    const agentPng = await sharp({ create: { width: 400, height: 200, channels: 3, background: '#bfdbfe' } }).png().toBuffer();
    await desk.getByLabel('Send a file').setInputFiles({ name: 'vat-fix.png', mimeType: 'image/png', buffer: agentPng });
    await log.getByRole('img', { name: 'vat-fix.png' }).waitFor({ timeout: 8000 });
    await customer.getByRole('img', { name: 'vat-fix.png' }).waitFor({ timeout: 8000 });

    // A canned reply, its placeholders filled, reaches the customer live (well inside the 10 s poll).
    await desk.getByLabel('Canned reply').selectOption({ label: 'Hello (/hello)' });
    await desk.getByLabel('The reply as the customer will read it').getByText('Hello Ada, Grace Hopper here. How can I help?').waitFor();
    await expectAccessible(desk, 'conversation');
    const sent = Date.now();
    await desk.getByRole('button', { name: 'Send canned reply' }).click();
    await customer.getByRole('log').getByText('Hello Ada, Grace Hopper here. How can I help?').waitFor({ timeout: 5000 });
    expect(Date.now() - sent).toBeLessThan(5000);
    // And the customer's answer reaches the agent live.
    const typed = Date.now();
    await customer.getByLabel('Message', { exact: true }).fill('Invoice 1042 shows the wrong VAT.');
    await customer.keyboard.press('Enter');
    await log.getByText('Invoice 1042 shows the wrong VAT.').waitFor({ timeout: 5000 });
    expect(Date.now() - typed).toBeLessThan(5000);
    // The agent types an answer (Enter sends).
    await desk.getByLabel('Your answer').fill('I am correcting it now.');
    await desk.keyboard.press('Enter');
    await customer.getByRole('log').getByText('I am correcting it now.').waitFor({ timeout: 5000 });
    await shoot(desk, 'conversation');

    // The customer ends the chat and rates it; the desk sees it closed.
    await customer.getByRole('button', { name: 'End chat' }).click();
    await customer.getByRole('radio', { name: '5 stars' }).check();
    await customer.getByRole('button', { name: 'Send rating' }).click();
    await customer.getByText('Thank you for your feedback!').waitFor();
    expect(await ctx.db('chat_satisfaction').where({ session_id: id }).first('rating')).toEqual({ rating: 5 });
    await desk.getByText('This chat is closed: no more messages.').waitFor({ timeout: 15_000 });

    // Convert to a ticket, then work it on the ticket's page.
    await desk.getByRole('button', { name: 'Convert to a ticket' }).click();
    await desk.getByLabel('Ticket subject').fill('Wrong VAT on invoice 1042');
    expect(await desk.getByLabel('Ticket priority').inputValue()).toBe('normal');
    await desk.getByLabel('Ticket priority').selectOption('high');
    await desk.getByRole('button', { name: 'Create the ticket' }).click();
    await desk.getByRole('heading', { name: /^Ticket #\d+ Wrong VAT on invoice 1042$/ }).waitFor();
    const ticketId = Number(/#\/tickets\/(\d+)/.exec(desk.url())![1]);
    const conversation = desk.getByRole('list', { name: 'Conversation of the ticket' });
    await conversation.getByText('Invoice 1042 shows the wrong VAT.').waitFor();
    // The form shows the ticket as it is (and sends back only what the agent changed).
    expect(await desk.getByLabel('Priority').inputValue()).toBe('high');
    expect(await desk.getByLabel('Status').inputValue()).toBe('open');
    await desk.getByLabel('Status').selectOption('pending');
    await desk.getByLabel('Category').fill('billing');
    await desk.getByRole('button', { name: 'Save' }).click();
    await desk.getByText('The ticket was saved.').waitFor();
    const worked = (await ctx.http.get(`${CHAT}/chat/agent/tickets/${ticketId}`).set(bearer(agent.token))).body;
    expect(worked.messages.at(-1).body).toBe('Grace Hopper changed the status from "open" to "pending", the category from none to "billing".');
    await conversation.getByText('Grace Hopper changed the status from "open" to "pending", the category from none to "billing".').waitFor();
    await desk.getByLabel('New private note').fill('Refund the VAT difference.');
    await desk.getByRole('button', { name: 'Add the note' }).click();
    await desk.getByText('Refund the VAT difference.').waitFor();
    const ticket = (await ctx.http.get(`${CHAT}/chat/agent/tickets/${ticketId}`).set(bearer(agent.token))).body;
    expect(ticket).toMatchObject({ subject: 'Wrong VAT on invoice 1042', status: 'pending', priority: 'high', category: 'billing', chat_session_ids: [id] });
    expect(ticket.notes.map((n: { note: string }) => n.note)).toEqual(['Refund the VAT difference.']);
    await expectAccessible(desk, 'ticket');
    await shoot(desk, 'ticket');

    // The tickets page opened from an address with a filter shows that filter.
    await desk.goto(`${api}/console/#/tickets?status=pending`);
    await desk.getByRole('region', { name: 'Tickets' }).getByRole('link', { name: `Ticket #${ticketId}` }).waitFor();
    expect(await desk.getByLabel('Status').inputValue()).toBe('pending');

    // The closed chat is in the desk's Closed tab.
    await desk.goto(`${api}/console/#/desk?tab=closed`);
    await desk.getByRole('region', { name: 'Closed chats' }).getByRole('link', { name: `Chat #${id}` }).waitFor();
  });

  test('an admin works the desk with the API key: the chat of a signed-in customer shows the customer and site as links to their records, and the admin answers live', async () => {
    const customerId = await makeCustomer(ctx);
    const site = await ctx.http.post(`${BASE}/sites`).set('Authorization', ctx.basic).send({ title: 'Desk Site', domain: 'desk-site.example.com', customer_id: customerId });
    expect(site.status).toBe(200);
    const hash = await ctx.app.locals.chat.secret.identityHash(customerId);
    const started = await ctx.http
      .post(`${CHAT}/chat/sessions`)
      .send({ customer_id: customerId, customer_hash: hash, site_id: site.body.id, page_url: 'https://desk-site.example.com/billing', page_title: 'Billing', message: 'Where is my invoice?' });
    expect(started.status).toBe(201);
    const id = started.body.session.id as number;

    const desk = await newPage();
    await desk.goto(`${api}/console/`);
    await desk.getByLabel('API key', { exact: true }).fill(API_KEY);
    await desk.getByLabel('API secret', { exact: true }).fill(API_SECRET);
    await desk.getByRole('button', { name: 'Sign in' }).click();
    await desk.getByRole('heading', { name: 'Translations', level: 1 }).waitFor();
    // The waiting chat is counted on the admin's pages too.
    await desk.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Desk 1 waiting' }).click();
    await desk.getByRole('region', { name: 'Waiting chats' }).getByRole('link', { name: `Chat #${id}` }).click();
    await desk.getByRole('log', { name: 'Messages' }).getByText('Where is my invoice?').waitFor();
    await desk.getByRole('status').getByText('Live', { exact: true }).waitFor();
    const side = desk.getByRole('complementary', { name: 'The customer and the chat' });
    await side.getByText('verified by the site').waitFor();
    await side.getByRole('link', { name: 'Billing (opens in a new tab)' }).waitFor();
    // No "Assign to me" for the API key: it is no agent.
    expect(await desk.getByRole('button', { name: 'Assign to me' }).count()).toBe(0);
    await desk.getByLabel('Your answer').fill('It is on its way.');
    await desk.getByRole('button', { name: 'Send', exact: true }).click();
    await desk.getByRole('log', { name: 'Messages' }).getByText('It is on its way.').waitFor();
    await side.getByRole('link', { name: `Site #${site.body.id}` }).waitFor();
    await side.getByRole('link', { name: `Customer #${customerId}` }).click();
    await desk.getByRole('heading', { name: new RegExp(`#${customerId}`) }).first().waitFor();
    expect(desk.url()).toContain(`#/records/customers/${customerId}`);
  });

  test('scenario 3: the agent goes unavailable in the console; a new widget chat falls back to the ticket form, and the ticket shows up in the console; the reports chart the day', async () => {
    const desk = await newPage();
    await signInAsAgent(desk);
    // A radio the server's answer checks: clicked, then checked once the presence is saved.
    await desk.getByLabel('offline', { exact: true }).click();
    await desk.getByRole('radio', { name: 'offline' }).and(desk.locator(':checked')).waitFor();
    await desk.getByText('Support is offline (no agent online).').waitFor();
    const availability = await ctx.http.get(`${CHAT}/chat/availability`);
    expect(availability.body).toMatchObject({ online: false, reason: 'no_agent_online' });

    const customer = await newPage(360, 740);
    await customer.goto(`${site.origin}/demo.html`);
    await customer.getByRole('button', { name: 'Open chat' }).click();
    await customer.getByRole('heading', { name: 'Leave us a message', exact: true }).waitFor();
    await customer.getByLabel('Your name').fill('Carol Shaw');
    await customer.getByLabel('Your email').fill('carol@example.com');
    await customer.getByLabel('Message', { exact: true }).fill('Please call me back about my domain.');
    await customer.getByRole('button', { name: 'Send message' }).click();
    const note = customer.getByText(/saved as ticket #\d+/).first();
    await note.waitFor();
    const ticketId = Number((await note.textContent())!.match(/ticket #(\d+)/)![1]);

    // The console's tickets page shows it (polling: no reload).
    await desk.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Tickets' }).click();
    const tickets = desk.getByRole('region', { name: 'Tickets' });
    const row = tickets.locator('tr', { hasText: `Ticket #${ticketId}` });
    await row.waitFor({ timeout: 30_000 });
    await expect(row.textContent()).resolves.toMatch(/Carol Shaw.*carol@example\.com.*open.*normal/);
    await expectAccessible(desk, 'tickets');
    await shoot(desk, 'tickets');
    await desk.getByLabel('Search subject, name or e-mail').fill('nobody-has-this');
    await desk.getByRole('button', { name: 'Filter' }).click();
    await desk.getByText('No ticket matches.').waitFor();
    await desk.getByLabel('Search subject, name or e-mail').fill('Carol');
    await desk.getByRole('button', { name: 'Filter' }).click();
    await row.getByRole('link').click();
    await desk.getByRole('list', { name: 'Conversation of the ticket' }).getByText('Please call me back about my domain.').waitFor();
    // A session fallen back to a ticket is not counted as waiting for an agent.
    expect(await desk.title()).not.toMatch(/^\(/);

    // Agent time logged on today's first chat, for the agent-time chart.
    const first = (await ctx.http.get(`${CHAT}/chat/agent/sessions?orderby=id&order=asc&per_page=1`).set(bearer(agent.token))).body[0];
    expect((await ctx.http.post(`${CHAT}/chat/sessions/${first.id}/agent-time`).set(bearer(agent.token)).send({ minutes: 12, note: 'VAT refund' })).status).toBe(201);

    // Reports over today: charts (uPlot canvases) with the same figures as a table.
    await desk.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Reports' }).click();
    await desk.getByRole('heading', { name: 'Reports', level: 1 }).waitFor();
    const today = new Date().toISOString().slice(0, 10);
    await desk.getByLabel('From (day, UTC)').fill(today);
    await desk.getByLabel('To (day included)').fill(today);
    await desk.getByRole('button', { name: 'Show' }).click();
    const perDay = desk.getByRole('region', { name: 'Reports per day' });
    await waitForCount(perDay.locator('tbody tr'), 1, 30_000);
    const report = (await ctx.http.get(`${CHAT}/chat/agent/reports?from=${today}T00:00:00.000Z&to=${new Date(Date.parse(today) + 86_400_000).toISOString()}`).set(bearer(agent.token))).body;
    const cells = await perDay.locator('tbody tr').first().locator('td').allTextContents();
    expect(cells[0]).toBe(today);
    expect(Number(cells[1])).toBe(report.sessions.total);
    expect(report.sessions.total).toBeGreaterThanOrEqual(2);
    expect(report.satisfaction).toEqual({ average: 5, count: 1 });
    expect(cells[4]).toBe('5 (1)');
    expect(cells[5]).toBe('12');
    await waitForCount(desk.locator('figure.chart canvas'), 3);
    await expect(desk.getByRole('region', { name: 'Agent time over the range' }).locator('tbody tr').first().textContent()).resolves.toMatch(/^Grace Hopper\s*12\s*1\s*1$/);
    await expectAccessible(desk, 'reports');
    await shoot(desk, 'reports');
    // A reversed range is refused in words, asking nothing of the server.
    await desk.goto(`${api}/console/#/reports?from=${today}&to=2020-01-01`);
    await desk.getByText('The first day must not be after the last day.').waitFor();
  });
});
