import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromiumPath } from './browser';
import { createTestContext, type TestContext } from './helpers';
import { CONSOLE_BUILD } from './web-build';

/** /console/: the built pages served by the API process, cached right, under a strict Content-Security-Policy. */
describe('the console is served by the API', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ TEMPORAL_UI_URL: 'http://temporal.example.test:8233/', CONSOLE_DIR: CONSOLE_BUILD });
  });
  afterAll(() => ctx.close());

  test('index.html: no-cache, a strict CSP (own scripts and styles, nothing inline, connect to this origin and the chat socket), the Temporal UI in a meta tag', async () => {
    const res = await ctx.http.get('/console/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    const csp = res.headers['content-security-policy'];
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("style-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toMatch(/connect-src 'self' ws:\/\/127\.0\.0\.1:\d+\/wp-json\/ultimate-multisite-support-tickets\/v1\/chat\/realtime/);
    expect(res.text).toContain('<meta name="hostflow-temporal-ui" content="http://temporal.example.test:8233/namespaces/default">');
    // No inline script and nothing from another origin: only the hashed assets of the build.
    expect(res.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    const assets = [...res.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const asset of assets) expect(asset).toMatch(/^\/console\/assets\/[\w-]+\.(js|css)$/);

    const script = assets.find((a) => a.endsWith('.js'))!;
    const js = await ctx.http.get(script);
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toMatch(/javascript/);
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(js.text).not.toMatch(/https?:\/\/(?!www\.w3\.org)[a-z0-9.-]+\.(com|net|org|io)\//);
    // Gzipped for a browser that takes it (supertest asks for it and unzips), plain otherwise.
    expect(js.headers['content-encoding']).toBe('gzip');
    expect(js.headers.vary).toBe('Accept-Encoding');
    const plain = await ctx.http.get(script).set('Accept-Encoding', 'identity');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.text).toBe(js.text);
    expect(Number(plain.headers['content-length'])).toBe(fs.statSync(path.join(CONSOLE_BUILD, script.replace('/console/', ''))).size);
    const css = await ctx.http.get(assets.find((a) => a.endsWith('.css'))!);
    expect(css.headers['content-type']).toMatch(/^text\/css/);
    expect(css.headers['content-encoding']).toBe('gzip');
  });

  test('/console redirects to /console/ (keeping the query); unknown files are the API error shape; other methods are not served', async () => {
    const redirect = await ctx.http.get('/console?x=1');
    expect(redirect.status).toBe(301);
    expect(redirect.headers.location).toBe('/console/?x=1');
    const missing = await ctx.http.get('/console/assets/nothing-here.js');
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('rest_no_route');
    expect((await ctx.http.get('/console/../package.json')).status).toBe(404);
    expect((await ctx.http.get('/console/assets/%2e%2e%2f%2e%2e%2fpackage.json')).status).toBe(404);
    expect((await ctx.http.get('/console/.vite/manifest.json')).status).toBe(404);
    expect((await ctx.http.post('/console/').send({})).status).toBe(404);
  });
});

describe('the console without a build', () => {
  let ctx: TestContext;
  let empty: string;
  beforeAll(async () => {
    empty = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-console-'));
    ctx = await createTestContext({ CONSOLE_DIR: empty });
  });
  afterAll(async () => {
    await ctx.close();
    fs.rmSync(empty, { recursive: true, force: true });
  });

  test('says how to build it (503), and the API works on', async () => {
    const res = await ctx.http.get('/console/');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ code: 'console_not_built', message: expect.stringContaining('npm run build'), data: { status: 503 } });
    expect((await ctx.http.get('/healthz')).status).toBe(200);
  });
});

describe('the browser tests find Chromium or fail saying how to get it', () => {
  const saved = { CHROMIUM_PATH: process.env.CHROMIUM_PATH, PATH: process.env.PATH };
  afterEach(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  test('CHROMIUM_PATH naming nothing, or no chromium on the PATH: an error naming the fix, never a skip', () => {
    process.env.CHROMIUM_PATH = '/nonexistent/chromium';
    expect(() => chromiumPath()).toThrow('CHROMIUM_PATH=/nonexistent/chromium does not exist.');
    delete process.env.CHROMIUM_PATH;
    process.env.PATH = '/nonexistent';
    expect(() => chromiumPath()).toThrow(/none was found: install the Debian package \(`sudo apt-get install -y --no-install-recommends chromium`; \.ci\/run does\) or set CHROMIUM_PATH/);
  });
});
