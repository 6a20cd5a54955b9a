import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..');
/** Where `npm run build:widget` puts widget.js and demo.html (the API serves them from CHAT_WIDGET_DIR). */
export const WIDGET_BUILD = path.join(root, 'dist', 'web', 'widget');

function newest(p: string): number {
  const stat = fs.statSync(p);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...fs.readdirSync(p).map((name) => newest(path.join(p, name))));
}

/**
 * Builds the widget (web/widget → dist/web/widget, as `npm run build:widget`) when the build is
 * missing or older than its sources; the widget's test files call it first. About a second.
 * Built into a folder of its own, then moved in place, so two test files never see half a build.
 */
export function buildWidgetIfStale(): string {
  const sources = path.join(root, 'web', 'widget');
  const script = path.join(WIDGET_BUILD, 'widget.js');
  const built = fs.existsSync(script) ? fs.statSync(script).mtimeMs : 0;
  if (built > newest(sources)) return WIDGET_BUILD;
  const out = `${WIDGET_BUILD}.tmp-${process.pid}`;
  const vite = path.join(root, 'node_modules', '.bin', 'vite');
  // NODE_ENV=production as `npm run build` has it: jest sets `test`, which would build Preact's debug code in.
  const run = spawnSync(vite, ['build', '--config', path.join(sources, 'vite.config.ts'), '--outDir', out], { cwd: root, encoding: 'utf8', env: { ...process.env, NODE_ENV: 'production' } });
  if (run.status !== 0) throw new Error(`Building the chat widget failed (vite build):\n${run.stdout}\n${run.stderr}`);
  fs.rmSync(WIDGET_BUILD, { recursive: true, force: true });
  try {
    fs.renameSync(out, WIDGET_BUILD);
  } catch (err) {
    // Another test file's build got there first (same sources, same result): keep that one.
    fs.rmSync(out, { recursive: true, force: true });
    if (!fs.existsSync(script)) throw err;
  }
  return WIDGET_BUILD;
}
