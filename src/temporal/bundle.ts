import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, type WorkflowBundlePath, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { logger } from '../logger';

/**
 * The workflow bundle (webpack, by the SDK) and its build id. `npm run build` bundles
 * workflows/ once (src/bundle-workflows.ts) into dist/workflow-bundle/, with the bundle's
 * SHA-256 beside it; a worker run from dist/ loads that file. Run from the TypeScript sources
 * (tsx, the tests) it bundles at start instead. Either way the build id is the SHA-256 of the
 * bundle's code, so the same workflow code gives the same build id (webpack's module names are
 * relative to the project root, not to the working directory or the checkout's location).
 */

/** The project root: from src/temporal/ (sources) or dist/src/temporal/ (compiled). */
const COMPILED = __filename.endsWith('.js');
export const PROJECT_ROOT = path.resolve(__dirname, '..', '..', ...(COMPILED ? ['..'] : []));
/** Where `npm run build` puts the bundle: dist/workflow-bundle/. */
export const BUNDLE_DIR = path.join(PROJECT_ROOT, 'dist', 'workflow-bundle');
export const BUNDLE_FILE = 'workflows.js';
export const BUILD_ID_FILE = 'build-id';

/** The workflows' entry module: workflows/index.ts in a checkout; the compiled one where only dist/ was shipped. */
export function workflowsPath(): string {
  const source = path.join(PROJECT_ROOT, 'workflows', 'index.ts');
  if (fs.existsSync(source)) return source;
  return require.resolve(path.join(__dirname, '..', '..', 'workflows'));
}

/** The build id of a bundle: the SHA-256 of its code, in hex. */
export function buildIdOf(code: string | Buffer): string {
  return crypto.createHash('sha256').update(code).digest('hex');
}

const sdkLogger = {
  info: () => undefined,
  debug: () => undefined,
  trace: () => undefined,
  log: () => undefined,
  warn: (m: string, meta?: Record<string, unknown>) => logger.warn(meta ?? {}, m),
  error: (m: string, meta?: Record<string, unknown>) => logger.error(meta ?? {}, m),
};

/** Bundles the workflow code (webpack, a few seconds). `entry` defaults to workflows/. */
export async function bundleWorkflows(entry = workflowsPath()): Promise<WorkflowBundleWithSourceMap & { buildId: string }> {
  const bundle = await bundleWorkflowCode({
    workflowsPath: entry,
    logger: sdkLogger,
    // Module names in the bundle are relative to webpack's context (the working directory by
    // default): the project root makes them, and so the build id, the same from anywhere.
    webpackConfigHook: (config) => ({ ...config, context: PROJECT_ROOT }),
  });
  return { ...bundle, buildId: buildIdOf(bundle.code) };
}

/** Writes a bundle and its build id into `dir` (the build step). */
export function writeBundle(dir: string, bundle: { code: string; buildId: string }): void {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, BUNDLE_FILE), bundle.code);
  fs.writeFileSync(path.join(dir, BUILD_ID_FILE), `${bundle.buildId}\n`);
}

/**
 * The prebuilt bundle of `dir`, or null when there is none. Its code is hashed again and must
 * match the build id written beside it: a bundle changed or half-copied after the build stops
 * the worker instead of running under a build id that is not its own.
 */
export function readPrebuiltBundle(dir = BUNDLE_DIR): { option: WorkflowBundlePath; buildId: string } | null {
  const codePath = path.join(dir, BUNDLE_FILE);
  if (!fs.existsSync(codePath)) return null;
  const buildId = buildIdOf(fs.readFileSync(codePath));
  const written = fs.readFileSync(path.join(dir, BUILD_ID_FILE), 'utf8').trim();
  if (written !== buildId) throw new Error(`${codePath} does not match its build id (${path.join(dir, BUILD_ID_FILE)}: ${written}, the file's SHA-256: ${buildId}); run \`npm run build\` again`);
  return { option: { codePath }, buildId };
}

export interface WorkerBundle {
  option: WorkflowBundlePath | WorkflowBundleWithSourceMap;
  buildId: string;
  origin: 'prebuilt' | 'bundled at start';
}

/**
 * What a worker runs: compiled (dist/), the bundle `npm run build` made (none is an error: the
 * build id must be the one the build printed); from the TypeScript sources, bundled now.
 */
export async function loadWorkerBundle(): Promise<WorkerBundle> {
  if (COMPILED) {
    const prebuilt = readPrebuiltBundle();
    if (!prebuilt) throw new Error(`No workflow bundle in ${BUNDLE_DIR}: run \`npm run build\` (it bundles the workflows after compiling)`);
    return { ...prebuilt, origin: 'prebuilt' };
  }
  const bundle = await bundleWorkflows();
  return { option: bundle, buildId: bundle.buildId, origin: 'bundled at start' };
}
