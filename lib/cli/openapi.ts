import { parseArgs } from 'node:util'
import { loadBackendErrors } from '../backend-errors/rules.js'
import { buildOpenApi } from '../openapi.js'
import { EXIT_OK, UsageError, type Command } from './io.js'

export const usage = 'payments-gate openapi [--vendor NAME] [--base-path PATH] [--backend-errors FILE]'

/**
 * Prints the OpenAPI 3.1 document of both operations. `--vendor`,
 * `--base-path` and `--backend-errors` (or their `PAYMENTS_GATE_*` variables,
 * as for `serve`) make it describe the gateway as it is deployed.
 */
export const run: Command = async (args, io) => {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { vendor: { type: 'string' }, 'base-path': { type: 'string' }, 'backend-errors': { type: 'string' } },
  })
  if (positionals.length > 0) throw new UsageError(`takes no file (usage: ${usage})`)
  const rules = values['backend-errors'] ?? io.env.PAYMENTS_GATE_BACKEND_ERRORS
  const document = buildOpenApi({
    backendErrors: rules === undefined ? undefined : await loadBackendErrors(rules),
    vendor: values.vendor ?? io.env.PAYMENTS_GATE_VENDOR,
    basePath: values['base-path'] ?? io.env.PAYMENTS_GATE_BASE_PATH,
  })
  io.stdout.write(`${JSON.stringify(document, null, 2)}\n`)
  return EXIT_OK
}
