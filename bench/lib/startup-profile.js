// Where a start of `serve` spends its CPU, from a V8 CPU profile of it (`node --cpu-prof`): the samples'
// time by the package that was running, so that a start-up can be read in shares that repeat from run
// to run even on a loaded machine, where its wall time does not.

/** The package a script belongs to: `undici`, `@sinclair/typebox`, `payments-gate` (the build), or undefined. */
export function packageOf(url) {
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
    const name = packageOf(frame.url)
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
