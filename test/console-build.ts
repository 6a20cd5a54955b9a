import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..');
export const CONSOLE_BUILD = path.join(root, 'dist', 'web', 'console');

/** The newest modification time under a path (a file or a folder's files). */
function newest(p: string): number {
  const stat = fs.statSync(p);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...fs.readdirSync(p).map((name) => newest(path.join(p, name))));
}

/**
 * Builds the console (web/console → dist/web/console, as `npm run build` does) when the build is
 * missing or older than its sources: the jest global setup calls it, so the tests that serve the
 * console (console.test.ts, console.browser.test.ts) serve what the sources say. About a second.
 */
export function buildConsoleIfStale(): void {
  const index = path.join(CONSOLE_BUILD, 'index.html');
  const sources = path.join(root, 'web', 'console');
  const built = fs.existsSync(index) ? fs.statSync(index).mtimeMs : 0;
  if (built > newest(sources)) return;
  const vite = path.join(root, 'node_modules', '.bin', 'vite');
  const run = spawnSync(vite, ['build', '--config', path.join(sources, 'vite.config.mjs')], { cwd: root, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`Building the console failed (vite build):\n${run.stdout}\n${run.stderr}`);
}
