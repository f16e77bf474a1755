import { buildOpenApi } from '../openapi.js'
import { parseFlags, type CommandSpec } from './flags.js'
import { EXIT_OK, type Command } from './io.js'
import { SHARED_FLAGS } from './options.js'

const { vendor, basePath } = SHARED_FLAGS

/** Checked by the same code as `serve`'s: a vendor `serve` refuses makes no document either. */
export const spec: CommandSpec<{ vendor: typeof vendor; basePath: typeof basePath }> = {
  name: 'openapi',
  usage: '[flags]',
  description:
    'Prints the OpenAPI 3.1 document of both operations. --vendor and --base-path, or their PAYMENTS_GATE_* variables as for serve, make it describe the gateway as it is deployed.',
  env: true,
  positionals: 0,
  flags: { vendor, basePath },
}

export const run: Command = async (args, io) => {
  const { values } = parseFlags(spec, args, io.env)
  io.stdout.write(`${JSON.stringify(buildOpenApi(values), null, 2)}\n`)
  return EXIT_OK
}
