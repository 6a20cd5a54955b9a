import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Browser, BrowserContext, Page, WebSocket as PageSocket } from 'playwright-core';
import sharp from 'sharp';
import { launchChromium } from './browser';
import { bearer, CHAT, makeAgent } from './chat-helpers';
import { makeCustomer, waitFor } from './estate-helpers';
import { createTestContext, type TestContext } from './helpers';
import { buildWidgetIfStale } from './web-build';
import { axeOnWidget, pageProblems, servePages, shot, widgetDemoPage, type PageServer } from './widget-browser';

/**
 * The customers' chat widget in a real browser (Debian's chromium through playwright-core)
 * against the real service: the API with its WebSocket channel, PostgreSQL and Temporal. The
 * widget is embedded, as a site would, in pages served from a second origin (another loopback
 * port, listed in CHAT_ALLOWED_ORIGINS); the agent works through the chat API with an agent token.
 */
jest.setTimeout(120_000);

const HOSTILE_CSS = `
  * { all: unset; color: red !important; font-size: 40px !important; }
  div, span, button, p, ol, li, form, label, h2, h3 { display: inline !important; position: static !important; background: yellow !important; }
  [data-hostflow-chat] { display: none; }
  html { font-size: 4px; }
`;

describe('chat widget (browser)', () => {
  let ctx: TestContext;
  let server: http.Server;
  let api: string;
  let site: PageServer;
  let browser: Browser;
  let agent: { id: number; token: string; name: string };
  let customerId = 0;
  const contexts: BrowserContext[] = [];

  const demoCopy = (tag: string) => widgetDemoPage(widgetDir, tag);
  let widgetDir = '';
  /** The data- attributes a site's server writes for its signed-in customer. */
  let signedIn = '';
  const tag = (extra = '', color = '#1d4ed8') => `<script src="${api}/chat/widget.js" defer data-title="Acme support" data-color="${color}" data-locale="en_GB"${extra}></script>`;

  beforeAll(async () => {
    widgetDir = buildWidgetIfStale();
    browser = await launchChromium();
    site = await servePages(() => ({
      '/demo.html': demoCopy(tag()),
      '/signed-in.html': demoCopy(tag(signedIn)),
      '/hostile.html': `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Hostile page</title><style>${HOSTILE_CSS}</style></head><body><h1>A page with hostile CSS</h1>${tag('', '#fff;background:url(https://evil.example/x)')}</body></html>`,
      '/plain.html': `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Plain page</title><style>p.probe { color: rgb(0, 128, 0); } </style></head><body><main><h1>Plain</h1><p class="probe">Probe text</p><button class="probe">Probe button</button><input class="probe" aria-label="probe"></main></body></html>`,
    }));
    ctx = await createTestContext({ CHAT_ALLOWED_ORIGINS: site.origin, CHAT_WIDGET_DIR: widgetDir, CHAT_POLL_INTERVAL_SECONDS: '10', CHAT_WAIT_BEFORE_TICKET_SECONDS: '3600' });
    // The API with its WebSocket channel, as `npm start` serves it.
    server = http.createServer(ctx.app);
    ctx.app.locals.chat.attach(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    expect(await ctx.app.locals.chat.realtime.ready()).toBe(true);
    agent = await makeAgent(ctx, { name: 'Grace Hopper', online: true });
    customerId = await makeCustomer(ctx);
    signedIn = ` data-customer-id="${customerId}" data-customer-hash="${await ctx.app.locals.chat.secret.identityHash(customerId)}"`;
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

  /** A fresh browser profile (its own sessionStorage) and page at the given size. */
  const newPage = async (width = 1280, height = 800): Promise<{ page: Page; problems: string[] }> => {
    const context = await browser.newContext({ viewport: { width, height } });
    contexts.push(context);
    const page = await context.newPage();
    return { page, problems: pageProblems(page) };
  };

  const agentGet = (p: string) => ctx.http.get(`${CHAT}${p}`).set(bearer(agent.token));
  const agentPost = (p: string, body: unknown) => ctx.http.post(`${CHAT}${p}`).set(bearer(agent.token)).send(body as object);

  /**
   * A session's stored rating. The API answers ratings only as the reports' aggregate, so the
   * row is read where the satisfaction route wrote it.
   */
  const rating = async (id: number) => {
    const row = await ctx.db('chat_satisfaction').where({ session_id: id }).first('rating', 'comment');
    return row ? { rating: row.rating, comment: row.comment } : null;
  };

  /** The newest session whose opening message is `text` (as the agent's queue shows it). */
  const sessionWith = async (text: string): Promise<number> => {
    const found = await waitFor(
      async () => {
        const list = await agentGet('/chat/agent/sessions?order=desc&orderby=id&per_page=20');
        for (const s of list.body as { id: number }[]) {
          const msgs = await agentGet(`/chat/sessions/${s.id}/messages?after=0`);
          if ((msgs.body.messages as { body: string }[]).some((m) => m.body === text)) return s.id;
        }
        return 0;
      },
      (id) => id > 0,
      10_000,
    );
    if (!found) throw new Error(`no session with the message ${JSON.stringify(text)}`);
    return found;
  };

  test('a customer chats from another origin; the agent answers with a canned reply; the answer arrives live; attachment; rating stored', async () => {
    const canned = await ctx.http
      .post(`${CHAT}/chat/agent/canned-replies`)
      .set('Authorization', ctx.basic)
      .send({ shortcut: 'hello', title: 'Hello', body: 'Hello {{customer_first_name}}, {{agent_name}} here. How can I help?' });
    expect(canned.status).toBe(201);

    const { page, problems } = await newPage();
    const frames: string[] = [];
    page.on('websocket', (ws: PageSocket) => ws.on('framereceived', (f) => frames.push(String(f.payload))));
    await page.goto(`${site.origin}/demo.html`);
    const bubble = page.getByRole('button', { name: 'Open chat' });
    // Keyboard: focus the bubble and press Enter.
    await bubble.focus();
    await page.keyboard.press('Enter');
    const panel = page.getByRole('dialog', { name: /Acme support/ });
    await panel.getByRole('heading', { name: 'Start a conversation' }).waitFor();
    await page.getByLabel('Your name').fill('Ada Lovelace');
    await page.getByLabel('Your email').fill('ada@example.com');
    await page.getByLabel('Message', { exact: true }).fill('My invoice is wrong');
    let axe = await axeOnWidget(page);
    expect(axe.serious).toEqual([]);
    expect(axe.checkedNodes).toBeGreaterThan(10);
    await shot(page, 'start-form');
    await page.getByRole('button', { name: 'Start chat' }).click();

    await page.getByRole('log').getByText('My invoice is wrong').waitFor();
    const id = await sessionWith('My invoice is wrong');
    const session = await agentGet(`/chat/sessions/${id}`);
    expect(session.body).toMatchObject({ customer_name: 'Ada Lovelace', customer_email: 'ada@example.com', context: { page_url: `${site.origin}/demo.html`, locale: 'en_GB' } });
    // The socket is up: the widget says nothing about polling.
    await waitFor(async () => frames, (f) => f.some((x) => x.includes('"ready"')), 5000);
    expect(await page.getByText(/Live connection unavailable/).count()).toBe(0);

    const sent = Date.now();
    expect((await agentPost(`/chat/sessions/${id}/messages`, { canned_reply_id: canned.body.id })).status).toBe(201);
    await page.getByRole('log').getByText('Hello Ada, Grace Hopper here. How can I help?').waitFor({ timeout: 5000 });
    // Live: well inside the 10 s poll interval, and it came over the socket.
    expect(Date.now() - sent).toBeLessThan(5000);
    expect(frames.some((f) => f.includes('Grace Hopper here'))).toBe(true);

    // An attachment: uploaded from the widget, its thumbnail drawn from the API with the session's token.
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="480" height="320"><rect width="480" height="320" fill="#f8fafc"/><rect x="24" y="24" width="432" height="48" rx="6" fill="#e2e8f0"/><rect x="24" y="96" width="200" height="200" rx="6" fill="#fecaca"/><text x="124" y="206" font-size="40" text-anchor="middle" fill="#991b1b">VAT</text><rect x="248" y="96" width="208" height="24" rx="4" fill="#cbd5e1"/><rect x="248" y="136" width="160" height="24" rx="4" fill="#cbd5e1"/></svg>`;
    const png = await sharp(Buffer.from(svg)).png().toBuffer();
    await page.locator('input[type=file]').setInputFiles({ name: 'screenshot.png', mimeType: 'image/png', buffer: png });
    const thumb = page.getByRole('img', { name: 'screenshot.png' });
    await thumb.waitFor();
    expect(await thumb.getAttribute('src')).toMatch(/^blob:/);
    expect(await thumb.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(250);
    const seen = await agentGet(`/chat/sessions/${id}/messages?after=0`);
    expect(seen.body.messages.some((m: { attachment: { name: string } | null }) => m.attachment?.name === 'screenshot.png')).toBe(true);
    // A file the API refuses (a Windows program): the widget says why, in words, and carries on.
    await page.locator('input[type=file]').setInputFiles({ name: 'invoice.exe', mimeType: 'application/octet-stream', buffer: Buffer.concat([Buffer.from('MZ'), Buffer.alloc(510, 7)]) });
    const refused = page.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toMatch(/type/i);
    expect(problems.splice(0)).toEqual([expect.stringMatching(/^HTTP 415: POST .*\/attachments$/)]);
    axe = await axeOnWidget(page);
    expect(axe.serious).toEqual([]);
    await shot(page, 'conversation');
    // The README's picture (docs/chat-widget.png is this one, made smaller).
    await shot(page, 'conversation-widget', { widgetOnly: true });

    // The customer writes back (Enter sends); the agent reads it.
    await page.getByLabel('Message', { exact: true }).fill('Invoice 1042 shows the wrong VAT.');
    await page.keyboard.press('Enter');
    await waitFor(
      async () => (await agentGet(`/chat/sessions/${id}/messages?after=0`)).body.messages.map((m: { body: string }) => m.body),
      (bodies: string[]) => bodies.includes('Invoice 1042 shows the wrong VAT.'),
      5000,
    );

    // End and rate.
    await page.getByRole('button', { name: 'End chat' }).click();
    await page.getByRole('radio', { name: '5 stars' }).check();
    await page.getByLabel('Comment (optional)').fill('Quick and kind.');
    axe = await axeOnWidget(page);
    expect(axe.serious).toEqual([]);
    await shot(page, 'rating');
    const before = (await agentGet('/chat/agent/reports')).body.satisfaction;
    await page.getByRole('button', { name: 'Send rating' }).click();
    await page.getByText('Thank you for your feedback!').waitFor();
    expect((await agentGet(`/chat/sessions/${id}`)).body.status).toBe('closed');
    expect(await rating(id)).toEqual({ rating: 5, comment: 'Quick and kind.' });
    const reports = await agentGet('/chat/agent/reports');
    expect(reports.status).toBe(200);
    expect(reports.body.satisfaction.count).toBe(before.count + 1);

    // Escape closes the panel and gives the focus back to the bubble.
    await page.keyboard.press('Escape');
    expect(await panel.count()).toBe(0);
    expect(await bubble.evaluate((b) => (b.getRootNode() as unknown as { activeElement: unknown }).activeElement === b)).toBe(true);
    expect(problems).toEqual([]);
  });

  test('the socket cannot connect: the widget polls and still shows the agent answer', async () => {
    const { page, problems } = await newPage();
    // The realtime channel refused, as a proxy without WebSocket support would.
    await page.routeWebSocket(/\/chat\/realtime/, (ws) => ws.close({ code: 1011, reason: 'blocked by the test' }));
    await page.goto(`${site.origin}/demo.html`);
    await page.getByRole('button', { name: 'Open chat' }).click();
    await page.getByLabel('Your name').fill('Bob');
    await page.getByLabel('Message', { exact: true }).fill('Is the socket down?');
    await page.getByRole('button', { name: 'Start chat' }).click();
    await page.getByText(/Live connection unavailable/).waitFor({ timeout: 10_000 });
    const id = await sessionWith('Is the socket down?');
    const markup = 'Polling works too. <img src=x onerror="window.__pwned=1"><b>bold</b>';
    expect((await agentPost(`/chat/sessions/${id}/messages`, { body: markup })).status).toBe(201);
    // Within one poll interval (10 s) and a little; markup is shown as the text it is, never run.
    await page.getByRole('log').getByText(markup).waitFor({ timeout: 15_000 });
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(await page.evaluate(`document.querySelector('[data-hostflow-chat]').shadowRoot.querySelectorAll('.log img, .log b').length`)).toBe(0);
    await shot(page, 'polling');
    expect(problems.filter((p) => !/WebSocket/.test(p))).toEqual([]);
  });

  test('no agent available: a new chat becomes the ticket form, and the ticket exists', async () => {
    expect((await agentPost('/chat/agent/availability', { presence: 'offline' })).status).toBe(200);
    try {
      const { page, problems } = await newPage(360, 740);
      await page.goto(`${site.origin}/demo.html`);
      await page.getByRole('button', { name: 'Open chat' }).click();
      await page.getByRole('heading', { name: 'Leave us a message', exact: true }).waitFor();
      await page.getByLabel('Your name').fill('Carol');
      await page.getByLabel('Your email').fill('carol@example.com');
      await page.getByLabel('Message', { exact: true }).fill('Please call me back about my domain.');
      // Readable at 360 px: the panel fits the screen, nothing scrolls sideways.
      const fits = await page.evaluate(`(() => {
        const root = document.querySelector('[data-hostflow-chat]').shadowRoot;
        const panel = root.querySelector('.panel').getBoundingClientRect();
        const inner = [...root.querySelectorAll('.panel, .panel *')].some((el) => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible');
        return { left: panel.left, right: panel.right, sideways: inner || document.documentElement.scrollWidth > window.innerWidth };
      })()`);
      expect(fits).toEqual({ left: 0, right: 360, sideways: false });
      const axe = await axeOnWidget(page);
      expect(axe.serious).toEqual([]);
      await shot(page, 'ticket-form-360');
      await page.getByRole('button', { name: 'Send message' }).click();
      const note = page.getByText(/saved as ticket #\d+/).first();
      await note.waitFor();
      const ticketId = Number((await note.textContent())!.match(/ticket #(\d+)/)![1]);
      await page.getByText(`Ticket #${ticketId}: we will answer by email`).waitFor();
      const ticket = await agentGet(`/chat/agent/tickets/${ticketId}`);
      expect(ticket.status).toBe(200);
      expect(JSON.stringify(ticket.body)).toContain('Please call me back about my domain.');
      await shot(page, 'ticket-created-360');
      expect(problems).toEqual([]);
    } finally {
      await agentPost('/chat/agent/availability', { presence: 'online' });
    }
  });

  test('a signed-in customer: the site passes customer_id and customer_hash; the session is theirs, verified; it survives a reload', async () => {
    const { page, problems } = await newPage();
    await page.goto(`${site.origin}/signed-in.html`);
    await page.getByRole('button', { name: 'Open chat' }).click();
    await page.getByRole('heading', { name: 'Start a conversation' }).waitFor();
    // The API knows who they are: no name or email to type.
    expect(await page.getByLabel('Your email').count()).toBe(0);
    await page.getByLabel('Message', { exact: true }).fill('Signed in and stuck');
    await page.getByRole('button', { name: 'Start chat' }).click();
    await page.getByRole('log').getByText('Signed in and stuck').waitFor();
    const id = await sessionWith('Signed in and stuck');
    const session = (await agentGet(`/chat/sessions/${id}`)).body;
    expect(session).toMatchObject({ customer_id: customerId, identity_verified: true });
    expect(session.customer_email).toMatch(/@example\.com$/);

    // Another page of the site (here: the same one again) resumes the conversation from sessionStorage.
    // With the panel closed, the bubble counts the agent's new answers (the old ones were seen).
    // Frames recorded from the socket's first moment: its "ready" can come before the bubble is drawn.
    const frames: string[] = [];
    page.on('websocket', (ws: PageSocket) => ws.on('framereceived', (f) => frames.push(String(f.payload))));
    await page.reload();
    await page.getByRole('button', { name: 'Open chat' }).waitFor();
    expect((await waitFor(async () => frames, (f) => f.some((x) => x.includes('"ready"')))).some((x) => x.includes('"ready"'))).toBe(true);
    expect((await agentPost(`/chat/sessions/${id}/messages`, { body: 'Welcome back.' })).status).toBe(201);
    await page.getByRole('button', { name: 'Open chat (1 new message)' }).click({ timeout: 5000 });
    await page.getByRole('log').getByText('Signed in and stuck').waitFor();
    await page.getByRole('log').getByText('Welcome back.').waitFor();
    // Opened, the answers are seen: the bubble's count goes (waited for: it is drawn after the log).
    await page.getByRole('button', { name: 'Open chat', exact: true }).waitFor({ state: 'attached', timeout: 5000 });

    // The agent closes the conversation: the widget offers the rating by itself.
    expect((await agentPost(`/chat/sessions/${id}/status`, { status: 'closed' })).status).toBe(200);
    await page.getByRole('radio', { name: '4 stars' }).check({ timeout: 5000 });
    await page.getByRole('button', { name: 'Send rating' }).click();
    await page.getByText('Thank you for your feedback!').waitFor();
    expect(await rating(id)).toEqual({ rating: 4, comment: null });
    expect(problems).toEqual([]);
  });

  test('the demo page the API serves: the widget runs under its strict CSP and goes live from the API origin itself', async () => {
    const { page, problems } = await newPage();
    const frames: string[] = [];
    page.on('websocket', (ws: PageSocket) => ws.on('framereceived', (f) => frames.push(String(f.payload))));
    await page.goto(`${api}/chat/demo.html`);
    await page.getByRole('button', { name: 'Open chat' }).click();
    await page.getByLabel('Message', { exact: true }).fill('Hello from the demo page');
    await page.getByRole('button', { name: 'Start chat' }).click();
    await page.getByRole('log').getByText('Hello from the demo page').waitFor();
    // Its own origin is not in CHAT_ALLOWED_ORIGINS, yet the socket opens (same origin).
    await waitFor(async () => frames, (f) => f.some((x) => x.includes('"ready"')), 5000);
    // Styled by a constructed stylesheet: no 'unsafe-inline' needed (a CSP refusal would be a console error).
    const width = await page.evaluate(`document.querySelector('[data-hostflow-chat]').shadowRoot.querySelector('.bubble').getBoundingClientRect().width`);
    expect(width).toBe(60);
    await shot(page, 'demo-page');
    expect(problems).toEqual([]);
  });

  test("the page's hostile CSS does not break the widget, and the widget's styles do not reach the page", async () => {
    const { page, problems } = await newPage();
    await page.goto(`${site.origin}/hostile.html`);
    const bubble = page.getByRole('button', { name: 'Open chat' });
    await bubble.click();
    await page.getByRole('heading', { name: 'Start a conversation' }).waitFor();
    const look = (await page.evaluate(`(() => {
      const root = document.querySelector('[data-hostflow-chat]').shadowRoot;
      const css = (sel) => getComputedStyle(root.querySelector(sel));
      const box = (sel) => root.querySelector(sel).getBoundingClientRect();
      return {
        bubble: { position: css('.bubble').position, width: box('.bubble').width, height: box('.bubble').height, background: css('.bubble').backgroundColor },
        panel: { position: css('.panel').position, display: css('.panel').display, width: box('.panel').width, background: css('.panel').backgroundColor },
        input: { color: css('input[name=name]').color, fontSize: css('input[name=name]').fontSize, display: css('input[name=name]').display },
        title: { color: css('.head').color, fontSize: css('h2').fontSize },
      };
    })()`)) as Record<string, Record<string, unknown>>;
    // The tag's data-color is no colour (a CSS injection attempt): the default accent stays.
    expect(look).toEqual({
      bubble: { position: 'fixed', width: 60, height: 60, background: 'rgb(29, 78, 216)' },
      panel: { position: 'fixed', display: 'flex', width: 370, background: 'rgb(255, 255, 255)' },
      input: { color: 'rgb(17, 24, 39)', fontSize: '14px', display: 'block' },
      title: { color: 'rgb(255, 255, 255)', fontSize: '17px' },
    });
    await page.getByLabel('Message', { exact: true }).fill('Typing works here.');
    await shot(page, 'hostile-page');

    // The other way: a page's own elements look the same before and after the widget arrives.
    const { page: plain } = await newPage();
    await plain.goto(`${site.origin}/plain.html`);
    const styles = `(() => [...document.querySelectorAll('.probe, h1, body')].map((el) => {
      const s = getComputedStyle(el);
      return [el.tagName, s.color, s.font, s.backgroundColor, s.padding, s.margin, s.border, s.display, s.boxSizing].join('|');
    }).concat(String(document.styleSheets.length), String(document.adoptedStyleSheets.length)))()`;
    const before = await plain.evaluate(styles);
    await plain.addScriptTag({ url: `${api}/chat/widget.js` });
    await plain.getByRole('button', { name: 'Open chat' }).click();
    await plain.getByRole('dialog').waitFor();
    expect(await plain.evaluate(styles)).toEqual(before);
    expect(problems).toEqual([]);
  });
});
