// The tests run the TypeScript of lib/ and test/ as it is (node --import=./test/typescript.mjs). Node
// strips the types, replacing each with white space, so every line and column stays where it
// was and coverage is measured on the file as written. What Node does not do is find a module whose
// import names the compiled `.js` file, as tsc wants: this hook finds the `.ts` beside it. And every
// process would strip every file again (Node's WebAssembly stripper, about a third of a gateway's start):
// the load hook keeps what it stripped, by file and content. Node's compile cache would keep that too, but
// with V8's compiled code, whose functions then lose their block coverage (Node's docs, module compile cache).
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { registerHooks, stripTypeScriptTypes } from 'node:module'
import { fileURLToPath } from 'node:url'
import { threadId } from 'node:worker_threads'
// Packages of many small modules load as bundles (test/bundled.mjs).
import './bundled.mjs'

/** A path, relative or absolute, as opposed to a package name; with what follows it (`?query`, `#hash`) apart. */
const PATH = /^((?:\.{1,2}\/|\/|file:)[^?#]*)\.js([?#].*)?$/

registerHooks({
  resolve(specifier, context, next) {
    const match = PATH.exec(specifier)
    // From a TypeScript file, `x.js` names `x.ts` (no `.js` sits beside a `.ts` here): tried first, so that each
    // import of lib/ is one lookup, not a failed one and its error, then the right one.
    if (match !== null && context.parentURL?.endsWith('.ts')) {
      try {
        return next(`${match[1]}.ts${match[2] ?? ''}`, context)
      } catch (error) {
        if (error?.code !== 'ERR_MODULE_NOT_FOUND') throw error
        return next(specifier, context)
      }
    }
    try {
      return next(specifier, context)
    } catch (error) {
      if (error?.code !== 'ERR_MODULE_NOT_FOUND' || match === null) throw error
      return next(`${match[1]}.ts${match[2] ?? ''}`, context)
    }
  },
})

/**
 * Where the stripped files are kept: one file a module, its first line the digest of the source it was stripped from
 * and the length of the stripped text that follows, so that a file cut short is never taken for it.
 */
const CACHE = fileURLToPath(new URL('../node_modules/.cache/payments-gate-stripped/', import.meta.url))
const digest = (text) => createHash('sha1').update(text).digest('hex')
const utf8 = new TextDecoder()

/** Node's own stripper; its warning that the function is experimental is not the test's output (a child's stderr is asserted). */
function strip(source) {
  const emitWarning = process.emitWarning
  process.emitWarning = () => undefined
  try {
    return stripTypeScriptTypes(source)
  } finally {
    process.emitWarning = emitWarning
  }
}

/** Kept for the next process; a cache that cannot be written only costs the next one the stripping. */
function keep(file, text) {
  try {
    mkdirSync(CACHE, { recursive: true })
    // Whole or not at all: other processes, and other threads of this one, read it meanwhile.
    const aside = `${file}.${process.pid}.${threadId}`
    writeFileSync(aside, text)
    renameSync(aside, file)
  } catch {
    // Read-only or full: nothing kept.
  }
}

registerHooks({
  load(url, context, next) {
    const loaded = next(url, context)
    if (loaded.format !== 'module-typescript') return loaded
    const source = typeof loaded.source === 'string' ? loaded.source : utf8.decode(loaded.source)
    const file = `${CACHE}${digest(url)}`
    const key = `${digest(`${process.version}\n${source}`)} `
    let kept
    try {
      kept = readFileSync(file, 'utf8')
    } catch {
      // Not kept yet.
    }
    if (kept?.startsWith(key)) {
      const end = kept.indexOf('\n')
      const text = kept.slice(end + 1)
      if (text.length === Number(kept.slice(key.length, end)))
        return { format: 'module', source: text, shortCircuit: true }
    }
    const stripped = strip(source)
    keep(file, `${key}${stripped.length}\n${stripped}`)
    return { format: 'module', source: stripped, shortCircuit: true }
  },
})
