// Where a start of `serve` spends its CPU, from a V8 CPU profile of it (`node --cpu-prof`): the samples'
// time by the package that was running, so that a start-up can be read in shares that repeat from run
// to run even on a loaded machine, where its wall time does not.

import { readFileSync } from 'node:fs'

/** The line esbuild writes above each module of a bundle: its path from the package's folder. */
const MODULE_START = /^\/\/ ((?:node_modules|dist)\/\S+)$/

/** Each bundle's modules, by url: `[[first line, package], ...]` in order; an empty list for a file that is no bundle. */
const bundles = new Map()

/** The modules of the bundle at `url` (scripts/bundle-cli.js bundles dist/cli.js), read once. */
function modulesOf(url) {
  let modules = bundles.get(url)
  if (modules === undefined) {
    modules = []
    try {
      const lines = readFileSync(new URL(url), 'utf8').split('\n')
      for (let line = 0; line < lines.length; line++) {
        const start = MODULE_START.exec(lines[line])
        if (start !== null) modules.push([line, packageOf(`/${start[1]}`)])
      }
    } catch {
      // Not a file (node's own modules, eval'd code): no modules of its own.
    }
    bundles.set(url, modules)
  }
  return modules
}

/**
 * The package a script belongs to: `undici`, `@sinclair/typebox`, `payments-gate` (the build), or undefined.
 * In a bundle, the package of the module that `line` (0-based, as a profile counts) stands in; its own
 * helpers, before the first module, are the build's.
 */
export function packageOf(url, line) {
  if (line !== undefined && url.startsWith('file:') && url.endsWith('/dist/cli.js')) {
    const modules = modulesOf(url)
    let found
    for (const [first, name] of modules) {
      if (first > line) break
      found = name
    }
    if (modules.length > 0) return found ?? 'payments-gate'
  }
  const at = url.lastIndexOf('/node_modules/')
  if (at >= 0) {
    const [scope, name] = url.slice(at + '/node_modules/'.length).split('/')
    return scope.startsWith('@') ? `${scope}/${name}` : scope
  }
  return url.includes('/dist/') ? 'payments-gate' : undefined
}

/** What loads modules: the time node spends resolving, reading, compiling and linking them. */
export const LOADER = "node's module loader (resolve, read, compile, link)"

/**
 * A sample's category, from the running function up its callers: the first that belongs to a package
 * (its top-level code, or a function of it; node's own functions it calls count for it), or else to
 * node's module loader (resolving, reading and compiling a module, whoever asked for it). V8's garbage
 * collector and its unattributed time are categories of their own; what is left is node's own start.
 */
export function categoryOf(stack) {
  const leaf = stack[0].functionName
  if (leaf === '(garbage collector)') return 'garbage collection'
  if (leaf === '(program)') return 'V8, unattributed (program)'
  for (const frame of stack) {
    const name = packageOf(frame.url, frame.lineNumber)
    if (name !== undefined) return name
    if (frame.url.startsWith('node:internal/modules/')) return LOADER
  }
  return "node's own start"
}

/**
 * The profile's CPU time by category, in ms, largest first, idle left out: `[[category, ms], ...]` and the
 * total. `profile` is the parsed `.cpuprofile`.
 */
export function startupShares(profile) {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  const parents = new Map()
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id)
  const stackOf = (id) => {
    const stack = []
    for (let at = id; at !== undefined; at = parents.get(at)) stack.push(nodes.get(at).callFrame)
    return stack
  }
  const totals = new Map()
  let total = 0
  for (let i = 0; i < profile.samples.length; i++) {
    const stack = stackOf(profile.samples[i])
    if (stack[0].functionName === '(idle)') continue
    const ms = profile.timeDeltas[i] / 1000
    const category = categoryOf(stack)
    totals.set(category, (totals.get(category) ?? 0) + ms)
    total += ms
  }
  return { total, shares: [...totals].sort((a, b) => b[1] - a[1]) }
}
