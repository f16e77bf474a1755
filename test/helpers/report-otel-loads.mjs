// Loaded with --import into a child process: says on stderr when a module of the OpenTelemetry SDK is resolved,
// so a test can tell that `serve` without the OTEL_ variables loads none of it.
import { register } from 'node:module'

const hook = `export async function resolve(specifier, context, next) {
  if (/^@opentelemetry\\/(sdk|exporter|resources)/.test(specifier)) process.stderr.write('otel module loaded: ' + specifier + '\\n')
  return next(specifier, context)
}`
register(`data:text/javascript,${encodeURIComponent(hook)}`)
