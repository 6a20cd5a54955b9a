/**
 * A real browser for the chat widget's tests: Debian's chromium driven by playwright-core
 * (Playwright's own browser downloads cannot work here), axe-core run in the page, screenshots
 * as test artifacts (test-artifacts/widget/, git-ignored), and a second origin on loopback that
 * serves the pages embedding the widget.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';

export const WIDGET_ARTIFACTS = path.resolve(__dirname, '..', 'test-artifacts', 'widget');

/**
 * Script errors, CSP refusals and failed requests of a page (with their URL; the favicon, which
 * browsers ask every server for, excepted), gathered as they come.
 */
export function pageProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (msg) => {
    // Failed loads are told with their URL below.
    if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource')) problems.push(`console: ${msg.text()}`);
  });
  page.on('response', (res) => {
    if (res.status() >= 400 && !res.url().endsWith('/favicon.ico')) problems.push(`HTTP ${res.status()}: ${res.request().method()} ${res.url()}`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  return problems;
}

const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeResult {
  serious: { id: string; impact: string | null; help: string; nodes: string[] }[];
  /** How many nodes inside the widget axe checked (passes and violations): proof it looked inside the shadow root. */
  checkedNodes: number;
}

/**
 * axe-core's WCAG 2.x A/AA and best-practice rules, scoped to the widget: its host element and
 * the shadow root beneath it (axe enters open shadow roots). Evaluated through the DevTools
 * protocol, which the page's CSP does not govern.
 */
export async function axeOnWidget(page: Page): Promise<AxeResult> {
  await page.evaluate(axeSource);
  return (await page.evaluate(`(async () => {
    const out = await window.axe.run({ include: [['[data-hostflow-chat]']] }, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    const nodes = (list) => list.reduce((n, r) => n + r.nodes.length, 0);
    return {
      serious: out.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => JSON.stringify(n.target)) })),
      checkedNodes: nodes(out.passes) + nodes(out.violations),
    };
  })()`)) as AxeResult;
}

/** A screenshot in test-artifacts/widget/<name>.png: the page, or only the widget's panel and bubble. */
export async function shot(page: Page, name: string, opts: { widgetOnly?: boolean } = {}): Promise<string> {
  fs.mkdirSync(WIDGET_ARTIFACTS, { recursive: true });
  const file = path.join(WIDGET_ARTIFACTS, `${name}.png`);
  let clip: { x: number; y: number; width: number; height: number } | undefined;
  if (opts.widgetOnly) {
    const box = (await page.evaluate(`(() => {
      const root = document.querySelector('[data-hostflow-chat]').shadowRoot;
      const rects = [...root.querySelectorAll('.panel, .bubble')].map((el) => el.getBoundingClientRect());
      const left = Math.min(...rects.map((r) => r.left)), top = Math.min(...rects.map((r) => r.top));
      return { x: left - 12, y: top - 12, width: Math.max(...rects.map((r) => r.right)) - left + 24, height: Math.max(...rects.map((r) => r.bottom)) - top + 24 };
    })()`)) as { x: number; y: number; width: number; height: number };
    clip = box;
  }
  await page.screenshot({ path: file, clip });
  return file;
}

// The second origin serving pages that embed the widget is shared with the console's desk test.
export { servePages, widgetDemoPage, type PageServer } from './browser';
