import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, posix, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

/**
 * The layers of lib/, top first, as docs/development.md draws them: a file imports from its own layer or
 * one below, never from one above, so the dependency runs one way. An entry ending in `/` is a folder.
 */
const LAYERS: readonly (readonly string[])[] = [
  // What a user starts: the commands and the public API.
  ['cli.ts', 'cli/', 'package-files.ts', 'index.ts', 'fastify.ts', 'hono.ts'],
  // What wires the parts, once: the gate (checks, watched files, adapters), the admin listener, the OpenAPI document.
  ['gate.ts', 'admin.ts', 'openapi.ts'],
  // What serves requests: the reverse proxy and its TLS (the listener takes the proxy's response type), the
  // middleware adapters, the demo backend.
  ['proxy/', 'tls/', 'surfaces/', 'demo/'],
  // A request's way through: reading and answering it, BasicAuth users, the throttle, retry protection's stores.
  ['http/', 'credentials/', 'login-throttle.ts', 'login-throttle-redis.ts', 'idempotency/'],
  // The pure checks, and the rate limit they hand the surfaces (its stores take the client they count in).
  ['checks/', 'rate-limit/'],
  // The files the checks and the proxy read: policies, backend-error rules.
  ['policy/', 'backend-errors/'],
  // The ground everything stands on.
  [
    'schema/',
    'errors.ts',
    'coded-error.ts',
    'defaults.ts',
    'watch.ts',
    'file-error.ts',
    'read-file.ts',
    'log.ts',
    'metrics.ts',
    'tracing.ts',
    'narrative.ts',
    'luhn.ts',
    'card-mask.ts',
    'option-values.ts',
    'shown-url.ts',
    'node-version.ts',
    'supported-node.ts',
    'fold-case.ts',
    'hash-tag.ts',
    'json-text.ts',
  ],
]

const LIB = join(dirname(fileURLToPath(import.meta.url)), '..', 'lib')
/** `from '...'` of an import or an export, and `import('...')`: every relative specifier of a file. */
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*)'(\.{1,2}\/[^']+)'/g

/** The layer of a file of lib/ (a path relative to lib/, with `/`), counted from the top; undefined when it has none. */
function layerOf(file: string): number | undefined {
  const holds = (entry: string) => (entry.endsWith('/') ? file.startsWith(entry) : file === entry)
  const index = LAYERS.findIndex((layer) => layer.some(holds))
  return index === -1 ? undefined : index
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => relative(LIB, join(entry.parentPath, entry.name)).split('\\').join('/'))
    .sort()
}

/** The files of lib/ each file imports, from its text. */
function importsOf(file: string, text: string): string[] {
  const named = [...text.matchAll(SPECIFIER)].map((match) => (match[1] as string).replace(/\.js$/, '.ts'))
  return named.map((specifier) => posix.join(posix.dirname(file), specifier))
}

/** Every import that runs up, as `from -> to`. */
function upward(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const found: string[] = []
  for (const [file, imports] of graph) {
    for (const imported of imports) {
      if ((layerOf(imported) as number) < (layerOf(file) as number)) found.push(`${file} -> ${imported}`)
    }
  }
  return found
}

const files = sources(LIB)
const graph = new Map(files.map((file) => [file, importsOf(file, readFileSync(join(LIB, file), 'utf8'))]))

t.test('every file of lib/ is in one layer, and every import names a file of lib/', async (t) => {
  const unplaced = files.filter((file) => layerOf(file) === undefined)
  t.same(unplaced, [], 'a new file or folder is given its layer here and in docs/development.md')
  t.same(
    [...graph.values()].flat().filter((imported) => !graph.has(imported)),
    [],
  )
  t.ok(files.length > 50 && graph.get('gate.ts')?.includes('checks/index.ts'), 'the imports are read')
})

t.test('no import runs up a layer', async (t) => {
  t.same(upward(graph), [])
})

t.test('an import that runs up is found', async (t) => {
  const one = (file: string, text: string) => upward(new Map([[file, importsOf(file, text)]]))
  t.same(one('proxy/server.ts', "import type { Gate } from '../gate.js'"), ['proxy/server.ts -> gate.ts'])
  t.same(one('checks/auth.ts', "const m = await import('../http/answer.js')"), ['checks/auth.ts -> http/answer.ts'])
  t.same(one('gate.ts', "export { x } from './proxy/server.js'"), [], 'down is fine')
})
