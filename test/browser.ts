/**
 * A real browser for the console's (and later the chat widget's) tests: Debian's chromium driven
 * by playwright-core (Playwright's own browser downloads cannot work here), axe-core run in the
 * page, screenshots saved as test artifacts (test-artifacts/, git-ignored).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';

export const ARTIFACTS = path.resolve(__dirname, '..', 'test-artifacts');

/** CHROMIUM_PATH, else `chromium` on the PATH; a clear failure (never a silent skip) when neither exists. */
export function chromiumPath(): string {
  const fromEnv = process.env.CHROMIUM_PATH;
  if (fromEnv) {
    if (!fs.existsSync(fromEnv)) throw new Error(`CHROMIUM_PATH=${fromEnv} does not exist.`);
    return fromEnv;
  }
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      // env: the PATH this process sees (under jest, process.env is the test's copy).
      const found = execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8', env: process.env }).trim();
      if (found) return found;
    } catch {
      // not this name
    }
  }
  throw new Error(
    'The browser tests need Chromium and none was found: install the Debian package (`sudo apt-get install -y --no-install-recommends chromium`; .ci/run does) or set CHROMIUM_PATH to its executable.',
  );
}

export function launchChromium(): Promise<Browser> {
  // --no-sandbox: CI containers run as root, where Chromium's sandbox cannot start.
  return chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
}

/** The browser's Content-Security-Policy reports and script errors of a page, gathered as they come. */
export function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/Failed to load resource: the server responded with a status of (401|403|404|409)/.test(msg.text())) problems.push(`console: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  return problems;
}

const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * axe-core's WCAG 2 A/AA checks in the page; the serious and critical violations. Evaluated
 * through the DevTools protocol, which the page's CSP does not govern (the page itself may run
 * no inline script).
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource);
  // A string: this file is compiled without the DOM's types; it runs in the page.
  const result = (await page.evaluate(`(async () => {
    const out = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return out.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')) }));
  })()`)) as AxeViolation[];
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/**
 * Full-page screenshots at a phone's and a desktop's width: test-artifacts/<folder>/<name>-<width>.png;
 * with the widths at which the page scrolls sideways (none, for a page readable on a phone).
 */
export async function screenshots(page: Page, folder: string, name: string, widths = [1440, 360]): Promise<{ files: string[]; overflowing: number[] }> {
  const dir = path.join(ARTIFACTS, folder);
  fs.mkdirSync(dir, { recursive: true });
  const original = page.viewportSize();
  const files: string[] = [];
  const overflowing: number[] = [];
  for (const width of widths) {
    await page.setViewportSize({ width, height: 900 });
    if (await overflowsSideways(page)) overflowing.push(width);
    const file = path.join(dir, `${name}-${width}.png`);
    await page.screenshot({ path: file, fullPage: true });
    files.push(file);
  }
  if (original) await page.setViewportSize(original);
  return { files, overflowing };
}

/** Whether the page scrolls sideways at its current width (text that does not fit a phone). Tables scroll inside their own box. */
export function overflowsSideways(page: Page): Promise<boolean> {
  return page.evaluate('document.documentElement.scrollWidth > window.innerWidth + 1') as Promise<boolean>;
}

/** Waits until `locator` matches exactly `n` elements (a list re-rendered after a search). */
export async function waitForCount(locator: Locator, n: number, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const count = await locator.count();
    if (count === n) return;
    if (Date.now() > end) throw new Error(`expected ${n} elements for ${String(locator)}, found ${count}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface PageServer {
  /** http://127.0.0.1:<port>: another origin than the API's. */
  origin: string;
  close(): Promise<void>;
}

/** A second origin on loopback serving fixed HTML pages by path (a site embedding the widget). */
export async function servePages(pages: () => Record<string, string>): Promise<PageServer> {
  const server = http.createServer((req, res) => {
    const url = (req.url ?? '/').split('?')[0];
    // Browsers ask for one on every page: none here.
    if (url === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    const body = pages()[url];
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The widget's demo page (demo.html of its build in `widgetDir`) with its script tag replaced by
 * `tag`: a site embedding the widget from the API at another origin.
 */
export function widgetDemoPage(widgetDir: string, tag: string): string {
  return fs.readFileSync(path.join(widgetDir, 'demo.html'), 'utf8').replace(/<script src="\/chat\/widget\.js"[^>]*><\/script>/, tag);
}
