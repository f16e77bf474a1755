// One lint over the repository (docs/development.md, lint and format): neostandard's rules, as fastify
// runs them, without its style rules (Prettier formats: .prettierrc.json), and typescript-eslint's
// type-checked promise rules on lib/ and test/, the files tsconfig.json holds.
import neostandard from 'neostandard'
import regexp from 'eslint-plugin-regexp'

export default [
  ...neostandard({
    ts: true,
    noStyle: true,
    ignores: ['dist/', 'coverage/', '.tap/', 'reports/', '.stryker-tmp/', 'bench/results/', 'test/fixtures/'],
  }),
  {
    rules: {
      // `==` and `!=` never, `null` included: say `=== undefined` or `=== null`.
      eqeqeq: ['error', 'always'],
      // `void promise` is how the code marks a promise it leaves on purpose, `() => void f()` a result ignored.
      'no-void': 'off',
      // TypeScript already flags a comma whose left side does nothing; `(record(x), answer)` is meant.
      'no-sequences': 'off',
      // Registering a metric is what `new Gauge({ registers })` is for.
      'no-new': 'off',
      // Control characters in a pattern are what the checks refuse (credentials, header values).
      'no-control-regex': 'off',
      // A CommonJS class reached through ESM interop: `new Ajv.default()`.
      'new-cap': ['error', { newIsCap: true, capIsNew: false, properties: false }],
      'promise/param-names': 'off',
      // Prettier moves a long `if (...) statement` body to its own line, which curly's multi-line option refuses.
      curly: 'off',
      // TypeScript reports real redeclarations; a TypeBox schema and its Static type share a name on purpose.
      '@typescript-eslint/no-redeclare': 'off',
    },
  },
  {
    files: ['lib/**/*.ts', 'test/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A promise left alone loses its rejection; one meant to run alone says so with `void`. tap runs the
      // subtests that t.test and t.skip return itself.
      '@typescript-eslint/no-floating-promises': [
        'error',
        { allowForKnownSafePromises: [{ from: 'package', name: 'PromiseWithSubtest', package: '@tapjs/core' }] },
      ],
      // A promise where a boolean or a callback returning void is expected is a bug in waiting.
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  {
    // No pattern in lib/ may take more than linear time on what a client or a backend sends (a media type with
    // thousands of empty parameters once froze the gateway): docs/reliability.md, threat model.
    files: ['lib/**/*.ts'],
    plugins: { regexp },
    rules: {
      'regexp/no-super-linear-backtracking': 'error',
      'regexp/no-super-linear-move': 'error',
    },
  },
]
