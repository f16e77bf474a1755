// Loaded with --import into a child process: appends a line to the file named by PAYMENTS_GATE_TEST_LOADS
// for every package the child resolves, so a test can tell which dependencies a configuration loads.
import { appendFileSync } from 'node:fs'
import { registerHooks } from 'node:module'

registerHooks({
  resolve(specifier, context, next) {
    if (/^[@a-z]/.test(specifier) && !specifier.startsWith('node:'))
      appendFileSync(process.env.PAYMENTS_GATE_TEST_LOADS, `package loaded: ${specifier}\n`)
    return next(specifier, context)
  },
})
