import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * `npm run start:api` runs the API alone: it must not load what only a worker process runs. The
 * worker SDK brings its native core bridge, the activities bring their clients, and the AWS SDK
 * is for a process configured for S3; together about 13 MiB of the API's resident memory at rest
 * (README, Memory). The entry point itself is started, with a configuration it refuses at once
 * (no DATABASE_URL), after every static import has loaded; the modules it loaded are read at exit.
 */
const root = path.join(__dirname, '..');

function modulesLoadedBy(entry: string, env: NodeJS.ProcessEnv): string[] {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-modules-'));
  const out = path.join(dir, 'loaded.json');
  const preload = path.join(dir, 'record.cjs');
  fs.writeFileSync(preload, `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify(Object.keys(require.cache))));\n`);
  try {
    const r = spawnSync(process.execPath, ['--require', preload, '--import', 'tsx', path.join(root, 'src', entry)], { cwd: root, env, encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).toContain('needs DATABASE_URL');
    return (JSON.parse(fs.readFileSync(out, 'utf8')) as string[]).map((f) => path.relative(root, f).split(path.sep).join('/'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const WORKER_ONLY = [/^node_modules\/@temporalio\/worker\//, /^node_modules\/@temporalio\/core-bridge\//, /^activities\//, /^src\/worker-runtime\.ts$/, /^src\/temporal\/worker\.ts$/];
const S3_ONLY = [/^node_modules\/@aws-sdk\//, /^src\/infra\/object-storage-s3\.ts$/];

const baseEnv = () => {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'silent' };
  delete env.DATABASE_URL;
  delete env.TEMPORAL_ADDRESS;
  return env;
};

test('the API process loads its routes, but neither the worker SDK, the activities nor the AWS SDK', () => {
  const loaded = modulesLoadedBy('api.ts', { ...baseEnv(), STORAGE_DRIVER: 'local' });
  // What the API does load is there (so the checks below look at a real module list).
  expect(loaded).toEqual(expect.arrayContaining(['src/app.ts', 'src/runtime.ts', 'src/customers/routes.ts', 'src/infra/object-storage.ts']));
  expect(loaded.some((f) => f.startsWith('node_modules/@temporalio/client/'))).toBe(true);
  for (const pattern of [...WORKER_ONLY, ...S3_ONLY]) expect(loaded.filter((f) => pattern.test(f))).toEqual([]);
});

test('the worker process loads the worker SDK and the activities', () => {
  const loaded = modulesLoadedBy('worker.ts', baseEnv());
  for (const pattern of WORKER_ONLY) expect(loaded.filter((f) => pattern.test(f)).length).toBeGreaterThan(0);
});
