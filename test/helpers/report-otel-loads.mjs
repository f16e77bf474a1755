// Loaded with --import into a child process: appends a line to the file named by PAYMENTS_GATE_TEST_LOADS
// when a module of the OpenTelemetry SDK is resolved, so a test can tell that `serve` without the OTEL_
// variables loads none of it.
import { appendFileSync } from 'node:fs'
import { registerHooks } from 'node:module'

registerHooks({
  resolve(specifier, context, next) {
    if (/^@opentelemetry\/(sdk|exporter|resources)/.test(specifier))
      appendFileSync(process.env.PAYMENTS_GATE_TEST_LOADS, `otel module loaded: ${specifier}\n`)
    return next(specifier, context)
  },
})
