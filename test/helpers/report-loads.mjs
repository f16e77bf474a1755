// Loaded with --import into a child process: appends a line to the file named by PAYMENTS_GATE_TEST_LOADS
// for every module the child loads from a package, as its path in node_modules (`undici/lib/dispatcher/pool.js`),
// so a test can tell which dependencies a configuration loads, and which of their files; and at exit node's own
// modules it loaded, as `node:internal/...` (process.moduleLoadList).
import { appendFileSync } from 'node:fs'
import { registerHooks } from 'node:module'

const PACKAGES = '/node_modules/'

registerHooks({
  load(url, context, next) {
    const at = url.lastIndexOf(PACKAGES)
    if (at >= 0) appendFileSync(process.env.PAYMENTS_GATE_TEST_LOADS, `${url.slice(at + PACKAGES.length)}\n`)
    return next(url, context)
  },
})

process.on('exit', () => {
  const own = process.moduleLoadList
    .filter((name) => name.startsWith('NativeModule '))
    .map((name) => `node:${name.slice(13)}\n`)
  appendFileSync(process.env.PAYMENTS_GATE_TEST_LOADS, own.join(''))
})
