/**
 * `npm run build`, after tsc: bundles workflows/ into dist/workflow-bundle/workflows.js and
 * writes its build id (the bundle's SHA-256) to dist/workflow-bundle/build-id. Workers run from
 * dist/ load this bundle and register under that build id (README "Shipping a workflow change").
 */
import { BUNDLE_DIR, bundleWorkflows, writeBundle } from './temporal/bundle';

async function main() {
  const started = Date.now();
  const bundle = await bundleWorkflows();
  writeBundle(BUNDLE_DIR, bundle);
  process.stdout.write(`workflow bundle: ${BUNDLE_DIR} (${Math.round(bundle.code.length / 1024)} KiB, ${Date.now() - started} ms), build id ${bundle.buildId}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bundling the workflows failed: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
