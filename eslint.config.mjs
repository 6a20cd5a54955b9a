// ESLint (type-aware, through typescript-eslint), run by `npm test` (`npm run lint`).
// - promises: none left floating, none passed where a callback's result is ignored;
// - workflow files import only @temporalio/workflow, other workflow files and types (the rule of
//   Temporal's samples: anything else would run non-deterministic code inside a workflow);
// - imports in one order.
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.tools/**', '.tmp/**', 'coverage/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin, 'import-x': importX },
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
    },
  },
  {
    // Workflow code: deterministic, sandboxed. Types may come from anywhere (they vanish at build).
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(?!@temporalio/workflow$|\\./)',
              allowTypeImports: true,
              message: 'Workflow files import only @temporalio/workflow, other workflow files (./) and types (import type).',
            },
          ],
        },
      ],
    },
  },
);
