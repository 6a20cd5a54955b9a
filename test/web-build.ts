import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..');
/** Where `npm run build:console` puts the console (the API serves it from CONSOLE_DIR). */
export const CONSOLE_BUILD = path.join(root, 'dist', 'web', 'console');
/** Where `npm run build:widget` puts widget.js and demo.html (the API serves them from CHAT_WIDGET_DIR). */
export const WIDGET_BUILD = path.join(root, 'dist', 'web', 'widget');

/** The newest modification time under a path (a file or a folder's files). */
function newest(p: string): number {
  const stat = fs.statSync(p);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...fs.readdirSync(p).map((name) => newest(path.join(p, name))));
}

/**
 * Builds one of the browser bundles (web/<name> → dist/web/<name>, as `npm run build` does) when
 * its build is missing or older than its sources. About a second. NODE_ENV=production as
 * `npm run build` has it (jest sets `test`, which would build Preact's debug code in). Built into
 * a folder of its own, then moved in place, so two test files never see half a build.
 */
function buildIfStale(what: string, out: string, config: string, marker: string): string {
  const sources = path.join(root, 'web', path.basename(out));
  const built = fs.existsSync(path.join(out, marker)) ? fs.statSync(path.join(out, marker)).mtimeMs : 0;
  if (built > newest(sources)) return out;
  const tmp = `${out}.tmp-${process.pid}`;
  const vite = path.join(root, 'node_modules', '.bin', 'vite');
  const run = spawnSync(vite, ['build', '--config', path.join(sources, config), '--outDir', tmp, '--emptyOutDir'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, NODE_ENV: 'production' },
  });
  if (run.status !== 0) throw new Error(`Building the ${what} failed (vite build):\n${run.stdout}\n${run.stderr}`);
  fs.rmSync(out, { recursive: true, force: true });
  try {
    fs.renameSync(tmp, out);
  } catch (err) {
    // Another test file's build got there first (same sources, same result): keep that one.
    fs.rmSync(tmp, { recursive: true, force: true });
    if (!fs.existsSync(path.join(out, marker))) throw err;
  }
  return out;
}

/** The console's build, fresh (the jest global setup calls it). */
export function buildConsoleIfStale(): string {
  return buildIfStale('console', CONSOLE_BUILD, 'vite.config.mjs', 'index.html');
}

/** The chat widget's build, fresh (the jest global setup and the widget's test files call it). */
export function buildWidgetIfStale(): string {
  return buildIfStale('chat widget', WIDGET_BUILD, 'vite.config.ts', 'widget.js');
}
