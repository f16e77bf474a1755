// Loaded with --import into a child process: appends a line to the file named by PAYMENTS_GATE_TEST_LOADS
// when a module of the OpenTelemetry SDK is resolved, so a test can tell that `serve` without the OTEL_
// variables loads none of it. A file written synchronously, not stderr: the hooks run on a thread of
// their own, whose stderr reaches the parent asynchronously and can be lost under load.
import { register } from 'node:module'

const hook = `import { appendFileSync } from 'node:fs'
export async function resolve(specifier, context, next) {
  if (/^@opentelemetry\\/(sdk|exporter|resources)/.test(specifier)) appendFileSync(process.env.PAYMENTS_GATE_TEST_LOADS, 'otel module loaded: ' + specifier + '\\n')
  return next(specifier, context)
}`
register(`data:text/javascript,${encodeURIComponent(hook)}`)
