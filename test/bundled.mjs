// Loaded by test/typescript.mjs, so in every test process and in every child the tests start with it. A package of
// many small modules costs each process Node's loader work for every one of them (resolving, reading, compiling,
// linking): TypeBox's 218 files cost a process more than the rest of its import, and tap loads a few hundred more
// before a test starts. The packages below are loaded as esbuild bundles of their entry points instead, built once
// into node_modules/.cache and reused by every process after, as dist/cli.js bundles them for `serve`
// (scripts/bundle-cli.js). A bundle keeps what the modules do: every statement and name kept, the entry points of a
// package sharing one copy of each of its modules, its imports of other packages resolved from the package's own
// folder, the names an `import` of a CommonJS entry point sees unchanged. Only what Node resolves to one of the
// package's entry points is redirected: a package with ES and CommonJS builds keeps its CommonJS build for `require`.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire, registerHooks } from 'node:module'
import { dirname, join, sep } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { threadId } from 'node:worker_threads'

/**
 * The packages loaded as bundles: many modules each, none read from its own folder at run time, and none reached
 * beyond the entry points. Not tap's core, which tap's test class imports while the core imports it (a bundle would run
 * that cycle in another order), nor its process-info hook, loaded before this one; not Ajv, whose compiled validators
 * require its modules by their paths.
 */
const PACKAGES = new Set([
  '@opentelemetry/api',
  '@sinclair/typebox',
  '@tapjs/error-serdes',
  'diff',
  'mkdirp',
  'prom-client',
  'rimraf',
  'tap-parser',
  'tap-yaml',
  'tcompare',
  'yaml',
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
  for (
    let folder = dirname(file);
    folder.startsWith(`${packageFolder}${sep}`) || folder === packageFolder;
    folder = dirname(folder)
  ) {
    const manifest = join(folder, 'package.json')
    if (existsSync(manifest)) return JSON.parse(readFileSync(manifest, 'utf8')).type === 'module'
  }
  return false
}

/** A package being bundled: its own imports, made while its entry points are resolved, load it as it is. */
const BUILDING = Symbol('building')

/** What every bundle keeps of its modules: all of their statements, and the names of their functions and classes. */
const EXACT = {
  bundle: true,
  platform: 'node',
  packages: 'external',
  treeShaking: false,
  ignoreAnnotations: true,
  keepNames: true,
  logLevel: 'silent',
}

/** ES entry points: one module each, sharing the chunks that hold the modules they have in common. */
function bundleModules(esbuild, entries, out) {
  esbuild.buildSync({
    ...EXACT,
    entryPoints: Object.fromEntries(entries.map((file, i) => [`entry${i}`, file])),
    outdir: out,
    outExtension: { '.js': '.mjs' },
    splitting: true,
    format: 'esm',
  })
  return Object.fromEntries(entries.map((file, i) => [pathToFileURL(file).href, `entry${i}.mjs`]))
}

/**
 * CommonJS entry points: one bundle holds the package's modules once, and each entry point is a module that exports
 * its part, its names written out for Node's reader of CommonJS exports (an `import { name }` of it gets the names it
 * gets from the package itself, read here from a process of its own).
 */
function bundleCommonJs(esbuild, entries, out) {
  const urls = entries.map((file) => pathToFileURL(file).href)
  const read = spawnSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const urls = ${JSON.stringify(urls)}
      const names = []
      for (const url of urls) names.push(Object.keys(await import(url)).filter((name) => name !== 'default' && name !== 'module.exports'))
      console.log(JSON.stringify(names))`,
    ],
    { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '', _TAPJS_PROCESSINFO_COVERAGE_: '0' } },
  )
  const names = JSON.parse(read.stdout)
  esbuild.buildSync({
    ...EXACT,
    stdin: {
      contents: `module.exports = [${entries.map((file) => `require(${JSON.stringify(file)})`).join(', ')}]`,
      resolveDir: dirname(entries[0]),
      sourcefile: 'entries.cjs',
    },
    outfile: join(out, 'package.cjs'),
    format: 'cjs',
  })
  entries.forEach((_, i) => {
    const exported = names[i].map((name) => `${JSON.stringify(name)}: _`).join(', ')
    writeFileSync(
      join(out, `entry${i}.cjs`),
      `module.exports = require('./package.cjs')[${i}]\n0 && (module.exports = { ${exported} })\n`,
    )
  })
  return Object.fromEntries(urls.map((url, i) => [url, `entry${i}.cjs`]))
}

/**
 * The package's bundle, built if it is not kept yet: the URL of each entry point mapped to its bundled module.
 * Undefined when it cannot be built (no esbuild, a read-only folder): the package then loads as it is.
 */
function build(name) {
  let aside
  try {
    // Its real path, as Node resolves its files (node_modules may be a link, as in a mutation run's sandbox).
    const folder = realpathSync(fileURLToPath(new URL(`node_modules/${name}/`, ROOT)))
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
      // Each subpath of the exports map, as an import and as a require resolve it (a pattern names no one file).
      const require = createRequire(ROOT)
      const entries = Object.keys(manifest.exports ?? { '.': null })
        .filter((subpath) => !subpath.includes('*') && !subpath.endsWith('/') && subpath !== './package.json')
        .flatMap((subpath) =>
          [
            () => fileURLToPath(import.meta.resolve(`${name}${subpath.slice(1)}`)),
            () => require.resolve(`${name}${subpath.slice(1)}`),
          ].flatMap((resolve) => {
            try {
              return [resolve()]
            } catch {
              return []
            }
          }),
        )
      const modules = [...new Set(entries.filter((file) => isModule(file, folder)))]
      const commonJs = [...new Set(entries.filter((file) => !isModule(file, folder)))]
      if (modules.length + commonJs.length === 0) return undefined
      // Built aside, then renamed whole: other processes, and other threads of this one, read it meanwhile.
      aside = `${out}.${process.pid}.${threadId}`
      const urls = {
        ...(modules.length > 0 ? bundleModules(esbuild, modules, aside) : {}),
        ...(commonJs.length > 0 ? bundleCommonJs(esbuild, commonJs, aside) : {}),
      }
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
    if (aside !== undefined) rmSync(aside, { recursive: true, force: true })
    return undefined
  }
}

/** Each package's bundle in this process. */
const bundles = new Map()
/** The folder URL of each bundle, and the entry point its imports of other packages resolve from. */
const origins = new Map()

/** The package's bundle, built or read on the first import of it in this process. */
function bundleOf(name) {
  if (!bundles.has(name)) {
    bundles.set(name, BUILDING)
    bundles.set(name, build(name))
  }
  return bundles.get(name)
}

registerHooks({
  resolve(specifier, context, next) {
    const name = packageName(specifier)
    if (name === undefined) return next(specifier, context)
    // From a bundle, a package resolves as from the bundled package's own folder.
    const parent = context.parentURL?.slice(0, context.parentURL.lastIndexOf('/') + 1)
    const origin = parent === undefined ? undefined : origins.get(parent)
    const resolved = next(specifier, origin === undefined ? context : { ...context, parentURL: origin })
    if (!PACKAGES.has(name)) return resolved
    const bundle = bundleOf(name)
    const url = bundle === BUILDING ? undefined : bundle?.get(resolved.url)
    if (url === undefined) return resolved
    return { url, format: url.endsWith('.cjs') ? 'commonjs' : 'module', shortCircuit: true }
  },
})

// `node test/bundled.mjs`, before the suite (package.json's pretest): every bundle built once, rather than by each of
// the first test processes at once.
if (import.meta.main) for (const name of PACKAGES) bundleOf(name)
