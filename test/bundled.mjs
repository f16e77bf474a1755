// Loaded by test/typescript.mjs, so in every test process and in every child the tests start with it. A package of
// many small ES modules costs each process Node's loader work for every one of them (resolving, reading, compiling,
// linking): TypeBox's 218 files cost a process more than the rest of its import, and tap's helpers load a hundred
// more before a test starts. The packages below are loaded as esbuild bundles of their ES entry points instead, built
// once into node_modules/.cache and reused by every process after, as dist/cli.js bundles them for `serve`
// (scripts/bundle-cli.js). A bundle keeps what the modules do: every statement and name kept, the entry points of a
// package sharing one copy of each of its modules, its imports of other packages resolved from the package's own
// folder. Only an import that Node resolves to one of the package's ES entry points is redirected; `require` still
// gets the package's CommonJS build, as without this hook.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire, registerHooks } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { threadId } from 'node:worker_threads'

/**
 * The packages loaded as bundles: ES modules that read no file of their own at run time. Not tap's core, whose own
 * folder locates tap's frames in a stack, nor its mock and process-info hooks, which other imports must share.
 */
const PACKAGES = new Set([
  '@sinclair/typebox',
  '@tapjs/error-serdes',
  'diff',
  'mkdirp',
  'rimraf',
  'tap-parser',
  'tap-yaml',
  'tcompare',
])

const ROOT = new URL('../', import.meta.url)
const CACHE = fileURLToPath(new URL('node_modules/.cache/payments-gate-bundled/', ROOT))

/** `@scope/name` or `name` of a bare specifier; undefined for a path, a URL or a built-in. */
function packageName(specifier) {
  if (/^(?:\.|\/|[a-z]+:)/i.test(specifier)) return undefined
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

/** Whether Node loads the file as an ES module: `.mjs`, or `.js` under a package.json of type module. */
function isModule(file, packageFolder) {
  if (file.endsWith('.mjs')) return true
  if (!file.endsWith('.js')) return false
  for (let folder = dirname(file); folder.startsWith(packageFolder); folder = dirname(folder)) {
    const manifest = join(folder, 'package.json')
    if (existsSync(manifest)) return JSON.parse(readFileSync(manifest, 'utf8')).type === 'module'
  }
  return false
}

/** A package being bundled: its own imports, made while its entry points are resolved, load it as it is. */
const BUILDING = Symbol('building')

/**
 * The package's bundle, built if it is not kept yet: the URL of each ES entry point mapped to its bundled module.
 * Undefined when it cannot be built (no esbuild, a read-only folder): the package then loads as it is.
 */
function build(name) {
  try {
    const folder = fileURLToPath(new URL(`node_modules/${name}/`, ROOT))
    const manifest = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8'))
    const esbuild = createRequire(ROOT)('esbuild')
    // This file's own text too: a bundle built with other options is not this one.
    const self = readFileSync(new URL(import.meta.url))
    const key = createHash('sha1')
      .update(`${name}@${manifest.version} esbuild@${esbuild.version}\n`)
      .update(self)
      .digest('hex')
    const out = join(CACHE, `${name.replace('/', '+')}-${key.slice(0, 16)}`)
    const map = join(out, 'entries.json')
    if (!existsSync(map)) {
      // Each subpath of the exports map, as this process's imports resolve it (a pattern names no one file).
      const entries = Object.keys(manifest.exports ?? { '.': null })
        .filter((subpath) => !subpath.includes('*') && !subpath.endsWith('/') && subpath !== './package.json')
        .flatMap((subpath) => {
          try {
            const file = fileURLToPath(import.meta.resolve(`${name}${subpath.slice(1)}`))
            return isModule(file, folder) ? [file] : []
          } catch {
            return []
          }
        })
      if (entries.length === 0) return undefined
      // Built aside, then renamed whole: other processes, and other threads of this one, read it meanwhile.
      const aside = `${out}.${process.pid}.${threadId}`
      esbuild.buildSync({
        entryPoints: Object.fromEntries(entries.map((file, i) => [`entry${i}`, file])),
        outdir: aside,
        outExtension: { '.js': '.mjs' },
        bundle: true,
        splitting: true,
        format: 'esm',
        platform: 'node',
        packages: 'external',
        treeShaking: false,
        ignoreAnnotations: true,
        keepNames: true,
        logLevel: 'silent',
      })
      const urls = Object.fromEntries(entries.map((file, i) => [pathToFileURL(file).href, `entry${i}.mjs`]))
      writeFileSync(join(aside, 'entries.json'), JSON.stringify({ from: pathToFileURL(entries[0]).href, urls }))
      mkdirSync(CACHE, { recursive: true })
      try {
        renameSync(aside, out)
      } catch {
        // Another process kept the same bundle first.
        rmSync(aside, { recursive: true, force: true })
      }
    }
    const { from, urls } = JSON.parse(readFileSync(map, 'utf8'))
    const folderURL = `${pathToFileURL(out).href}/`
    origins.set(folderURL, from)
    return new Map(Object.entries(urls).map(([file, bundled]) => [file, `${folderURL}${bundled}`]))
  } catch {
    return undefined
  }
}

/** Each package's bundle, built or read once a process, on its first import. */
const bundles = new Map()
/** The folder URL of each bundle, and the entry point its imports of other packages resolve from. */
const origins = new Map()

registerHooks({
  resolve(specifier, context, next) {
    const name = packageName(specifier)
    if (name === undefined) return next(specifier, context)
    // From a bundle, a package resolves as from the bundled package's own folder.
    const parent = context.parentURL?.slice(0, context.parentURL.lastIndexOf('/') + 1)
    const origin = parent === undefined ? undefined : origins.get(parent)
    const resolved = next(specifier, origin === undefined ? context : { ...context, parentURL: origin })
    if (!PACKAGES.has(name)) return resolved
    if (!bundles.has(name)) {
      bundles.set(name, BUILDING)
      bundles.set(name, build(name))
    }
    const bundle = bundles.get(name)
    const url = bundle === BUILDING ? undefined : bundle?.get(resolved.url)
    return url === undefined ? resolved : { url, format: 'module', shortCircuit: true }
  },
})
