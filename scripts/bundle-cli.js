// The package's command, dist/cli.js, bundled after tsc into one file with the packages it always loads, and
// made executable. Node's module loader (resolving, reading, compiling and linking each of some 600 files) was
// most of `serve`'s start (docs/performance.md, start-up); one file is read and compiled once. The library
// (dist/index.js and the adapters) stays one module per file: an application's own bundler or loader reads it.
// The bundle's modules run from dist/, as lib/package-files.ts expects; tsc writes the file without the
// executable bit, which `npx payments-gate` in a clone needs (README.md).
import { chmodSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import fastJson from 'fast-json-stringify'

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url))
const errors = fileURLToPath(new URL('../dist/errors.js', import.meta.url))
const { errorBodySchema } = await import(new URL('../dist/errors.js', import.meta.url))

/**
 * The error body's serializer written here, once, by fast-json-stringify's standalone mode, for dist/errors.js
 * alone: what it builds at start-up is the same for every start, and building it loads Ajv and a dozen
 * modules more. The serializer's code needs fast-json-stringify's runtime part alone. Asked for another
 * schema than the one it was written for, it fails the start.
 */
const errorSerializer = {
  name: 'error-serializer-standalone',
  setup(build) {
    build.onResolve({ filter: /^fast-json-stringify$/ }, ({ importer }) =>
      importer === errors ? { path: 'error-body', namespace: 'error-serializer' } : undefined,
    )
    build.onLoad({ filter: /^/, namespace: 'error-serializer' }, () => ({
      contents: [
        `const serialize = (function () { const module = { exports: {} }; ${fastJson(errorBodySchema, { mode: 'standalone' })}; return module.exports })()`,
        `const written = ${JSON.stringify(JSON.stringify(errorBodySchema))}`,
        'module.exports = function fastJson(schema) {',
        '  if (JSON.stringify(schema) !== written) throw new Error("dist/cli.js holds the serializer of the error body alone: rebuild it (npm run build)")',
        '  return serialize',
        '}',
      ].join('\n'),
      resolveDir: fileURLToPath(new URL('..', import.meta.url)),
    }))
  },
}

/**
 * `node:http` as its CommonJS module, not through `import`: node builds an ES module's view of a built-in by
 * reading every export, and one of node:http's loads node's own copy of undici (for its WebSocket), which the
 * gateway never uses and which costs more than the rest of the start. `require` reads an export when used.
 */
const httpAsCommonJs = {
  name: 'node-http-as-commonjs',
  setup(build) {
    build.onResolve({ filter: /^(?:node:)?http$/ }, () => ({ path: 'node:http', namespace: 'node-http' }))
    build.onLoad({ filter: /^/, namespace: 'node-http' }, () => ({
      contents: "module.exports = process.getBuiltinModule('node:http')",
    }))
  },
}

await build({
  entryPoints: [cli],
  outfile: cli,
  allowOverwrite: true,
  bundle: true,
  platform: 'node',
  format: 'esm',
  // The oldest Node served (package.json engines): the code is kept as written, nothing down-levelled.
  target: 'node24',
  // Loaded from node_modules as they are, not bundled: ioredis and http-proxy-3 only by the configuration that
  // uses them (lib/idempotency/redis-client.ts, lib/proxy/forward.ts); the OpenTelemetry API, whose one
  // CommonJS build an application's SDK and prom-client share with the gateway (lib/tracing.ts); pino, whose
  // transports load files of their own by path.
  external: ['ioredis', 'http-proxy-3', '@opentelemetry/*', 'pino'],
  // The CommonJS packages bundled (prom-client, fast-json-stringify's serializer) call require, which an ES module lacks.
  banner: {
    js: "import { createRequire as createRequireOfBundle } from 'node:module'\nconst require = createRequireOfBundle(import.meta.url)",
  },
  plugins: [httpAsCommonJs, errorSerializer],
  legalComments: 'inline',
  logLevel: 'warning',
})
chmodSync(cli, 0o755)
