// The tests run the TypeScript of lib/ and test/ as it is, through this loader
// (node --import=./test/typescript.mjs). It compiles each file with esbuild,
// keeping every line where it was: coverage is measured on the compiled code
// and mapped back through the source map, and a compiler that squeezes a file
// onto a few lines (tsx minifies white space) makes never-called functions look
// covered. Imports name the compiled `.js` file, as tsc wants; the loader finds
// the `.ts` beside it.
import { readFile } from 'node:fs/promises'
import { register } from 'node:module'
import { fileURLToPath } from 'node:url'
import { isMainThread } from 'node:worker_threads'
import { transform } from 'esbuild'

// Loaded once on the main thread to register itself, and again in node's loader thread to serve the hooks.
if (isMainThread) register(import.meta.url)

/** A path, relative or absolute, as opposed to a package name; with what follows it (`?query`, `#hash`) apart. */
const PATH = /^((?:\.{1,2}\/|\/|file:)[^?#]*)(.*)$/

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context)
  } catch (error) {
    const [, path, suffix] = PATH.exec(specifier) ?? []
    if (error?.code !== 'ERR_MODULE_NOT_FOUND' || path === undefined || !path.endsWith('.js')) throw error
    return next(`${path.slice(0, -3)}.ts${suffix}`, context)
  }
}

export async function load(url, context, next) {
  // A module imported with a query (tap's mocks do that) is still its file.
  const file = url.replace(/[?#].*$/, '')
  if (!file.startsWith('file:') || !file.endsWith('.ts') || file.includes('/node_modules/')) return next(url, context)
  const path = fileURLToPath(file)
  const { code } = await transform(await readFile(path, 'utf8'), { loader: 'ts', format: 'esm', target: 'node20', sourcemap: 'inline', sourcefile: path })
  return { format: 'module', source: code, shortCircuit: true }
}
