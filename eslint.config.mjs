// ESLint (type-aware, through typescript-eslint), run by `npm test` (`npm run lint`).
// - promises: none left floating, none passed where a callback's result is ignored;
// - workflow files import only @temporalio/workflow, other workflow files and types (the rule of
//   Temporal's samples: anything else would run non-deterministic code inside a workflow);
// - imports in one order;
// - imports point down only (README, Architecture): entry points → the composition root
//   (src/app.ts, src/runtime.ts, src/worker-runtime.ts) → feature folders (and activities/, workflows/) → shared layers
//   (src/http, db, temporal, infra, openapi) → src/config and src/logger.ts; db and temporal
//   import nothing of http (they throw DomainError, which the http layer answers).
import fs from 'node:fs';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const SHARED = ['http', 'db', 'temporal', 'infra', 'openapi'];
const BOTTOM = ['config'];
// Every other folder under src/ is a feature: a new one is covered without editing this list.
const FEATURES = fs
  .readdirSync(new URL('./src', import.meta.url), { withFileTypes: true })
  .filter((d) => d.isDirectory() && !SHARED.includes(d.name) && !BOTTOM.includes(d.name))
  .map((d) => `./src/${d.name}`)
  .concat(['./activities', './workflows']);
const ROOT_AND_ENTRIES = ['app', 'runtime', 'worker-runtime', 'main', 'api', 'worker', 'cli', 'migrate', 'bundle-workflows'].map((f) => `./src/${f}.ts`);
const upward = (message) => ({ message: `${message} Imports point down only: entry points → composition root → features → shared layers → config and logger.` });
const LAYER_ZONES = [
  { target: SHARED.map((d) => `./src/${d}`), from: [...FEATURES, ...ROOT_AND_ENTRIES], ...upward('A shared layer must not import a feature or the composition root: pass what it needs in.') },
  {
    target: ['./src/db', './src/temporal'],
    from: './src/http',
    message: 'The db and temporal layers know nothing of HTTP: throw a DomainError (src/db/domain-error.ts; src/http/errors.ts answers it), take what a caller needs passed in. Imports point down only.',
  },
  { target: FEATURES, from: ROOT_AND_ENTRIES, ...upward('A feature must not import the composition root or an entry point.') },
  { target: ['./src/config', './src/logger.ts'], from: ['./src', './activities', './workflows'], except: ['./config', './logger.ts'], ...upward('config and logger import nothing of the service.') },
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tools/**', '.tmp/**', 'coverage/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  {
    // web/console and web/widget (the browser pages and script, TSX) are checked with their own tsconfigs (found by the project service).
    files: ['**/*.ts', 'web/console/**/*.tsx', 'web/widget/**/*.tsx'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin, 'import-x': importX },
    // Resolves './x' to './x.ts', so no-restricted-paths sees where each import lands.
    settings: { 'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.tsx', '.js', '.json'] })] },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // Where a require() or new Function() is needed, a disable comment says why.
      '@typescript-eslint/no-require-imports': 'error',
      'no-new-func': 'error',
      'import-x/order': [
        'error',
        {
          groups: ['builtin', 'external', 'internal', ['parent', 'sibling', 'index']],
          'newlines-between': 'never',
          alphabetize: { order: 'asc', caseInsensitive: true },
        },
      ],
      'import-x/no-duplicates': 'error',
      'import-x/no-restricted-paths': ['error', { zones: LAYER_ZONES }],
    },
  },
  {
    // Workflow code: deterministic, sandboxed. Types may come from anywhere (they vanish at build).
    files: ['workflows/**/*.ts', 'bench/workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              // bench/workflows/index.ts re-exports the service's workflows beside the bench ones.
              regex: '^(?!@temporalio/workflow$|\\./|\\.\\./\\.\\./workflows$)',
              allowTypeImports: true,
              message: 'Workflow files import only @temporalio/workflow, other workflow files (./) and types (import type).',
            },
          ],
        },
      ],
    },
  },
);
