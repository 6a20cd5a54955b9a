import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { CHAT, expectError } from './chat-helpers';
import { createTestContext, type TestContext } from './helpers';
import { buildWidgetIfStale } from './web-build';

/** How the API serves the chat widget's files (the widget itself runs in chat-widget.browser.test.ts). */
describe('chat widget files', () => {
  let ctx: TestContext;
  let unbuilt: TestContext;
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-widget-none-'));

  beforeAll(async () => {
    const dir = buildWidgetIfStale();
    ctx = await createTestContext({ CHAT_WIDGET_DIR: dir, REST_PREFIX: '/api' });
    unbuilt = await createTestContext({ CHAT_WIDGET_DIR: empty });
  });
  afterAll(async () => {
    await ctx?.close();
    await unbuilt?.close();
    fs.rmSync(empty, { recursive: true, force: true });
  });

  test('widget.js: for pages of any origin, cached five minutes then revalidated, gzipped when asked, the chat base written in', async () => {
    const js = await ctx.http.get('/chat/widget.js').set('Accept-Encoding', 'gzip').set('Origin', 'https://shop.example.com');
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toBe('application/javascript; charset=utf-8');
    expect(js.headers['content-encoding']).toBe('gzip');
    expect(js.headers['vary']).toBe('Accept-Encoding');
    expect(js.headers['access-control-allow-origin']).toBe('*');
    expect(js.headers['cross-origin-resource-policy']).toBe('cross-origin');
    expect(js.headers['x-content-type-options']).toBe('nosniff');
    expect(js.headers['cache-control']).toBe('public, max-age=300');
    // REST_PREFIX=/api here: the widget talks to this server's chat namespace without a data-api.
    expect(js.text).toContain(CHAT.replace('/wp-json', '/api'));
    expect(js.text).not.toContain('__HOSTFLOW_CHAT_BASE__');
    const plain = await ctx.http.get('/chat/widget.js').set('Accept-Encoding', 'identity');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.text).toBe(js.text);
    // What the README states: the gzip size on the wire.
    const gz = zlib.gzipSync(Buffer.from(plain.text), { level: 9 }).length;
    expect(gz).toBeLessThan(20 * 1024);
    const again = await ctx.http.get('/chat/widget.js').set('If-None-Match', js.headers.etag);
    expect(again.status).toBe(304);
    expect((await ctx.http.head('/chat/widget.js')).status).toBe(200);
  });

  test('demo.html: a page embedding the widget under a strict Content-Security-Policy', async () => {
    const demo = await ctx.http.get('/chat/demo.html');
    expect(demo.status).toBe(200);
    expect(demo.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(demo.headers['content-security-policy']).toMatch(/default-src 'none'; script-src 'self'; style-src 'self'/);
    expect(demo.headers['cache-control']).toBe('no-cache');
    expect(demo.text).toContain('<script src="/chat/widget.js"');
  });

  test('only GET and HEAD of these two names; nothing else under /chat', async () => {
    expectError(await ctx.http.get('/chat/other.js'), 404);
    expectError(await ctx.http.get('/chat/widget.js/..%2F..%2Fpackage.json'), 404);
    expectError(await ctx.http.get('/chat/..%2Fpackage.json'), 404);
    expectError(await ctx.http.post('/chat/widget.js').send({}), 404);
    expectError(await ctx.http.delete('/chat/demo.html'), 404);
  });

  test('not built: 503 in the error shape, saying how to build it', async () => {
    const res = await unbuilt.http.get('/chat/widget.js');
    expectError(res, 503, 'chat_widget_not_built');
    expect(res.body.message).toContain('npm run build');
    expectError(await unbuilt.http.get('/chat/demo.html'), 503, 'chat_widget_not_built');
  });
});
