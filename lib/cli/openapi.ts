import { loadBackendErrors } from '../backend-errors/rules.js'
import { buildOpenApi } from '../openapi.js'
import { parseFlags, type CommandSpec } from './flags.js'
import { EXIT_OK, type Command } from './io.js'
import { SHARED_FLAGS } from './options.js'
import { unreadable } from './startup.js'

const { vendor, basePath, backendErrors, bodyLimit } = SHARED_FLAGS

/** Checked by the same code as `serve`'s: a vendor `serve` refuses makes no document either. */
export const spec: CommandSpec<{
  vendor: typeof vendor
  basePath: typeof basePath
  backendErrors: typeof backendErrors
  bodyLimit: typeof bodyLimit
}> = {
  name: 'openapi',
  usage: '[flags]',
  description:
    'Prints the OpenAPI 3.1 document of both operations. --vendor, --base-path, --backend-errors and --body-limit, or their PAYMENTS_GATE_* variables as for serve, make it describe the gateway as it is deployed.',
  env: true,
  positionals: 0,
  flags: { vendor, basePath, backendErrors, bodyLimit },
}

export const run: Command = async (args, io) => {
  const { values, where } = parseFlags(spec, args, io.env)
  const rules =
    values.backendErrors === undefined
      ? undefined
      : await loadBackendErrors(values.backendErrors).catch((error: unknown) => {
          throw unreadable(error, where)
        })
  io.stdout.write(
    `${JSON.stringify(buildOpenApi({ vendor: values.vendor, basePath: values.basePath, backendErrors: rules, bodyLimit: values.bodyLimit }), null, 2)}\n`,
  )
  return EXIT_OK
}
