import { readBackendErrors } from '../backend-errors/rules.js'
import { CodedError } from '../coded-error.js'
import { isErrorName } from '../errors.js'
import { readFailure } from '../file-error.js'
import { parseFlags, type CommandSpec } from './flags.js'
import { EXIT_NO, EXIT_OK, type Command } from './io.js'
import { reportLine } from './output.js'

export const spec: CommandSpec<Record<never, never>> = {
  name: 'check-backend-errors',
  usage: 'FILE',
  description:
    'Checks a --backend-errors rules file as the gateway loads it: a summary and exit 0 when it is valid, else one "file: reason" line per problem on stdout and exit 1. Meant for CI before a rules change ships.',
  env: false,
  positionals: 1,
  flags: {},
}

export const run: Command = async (args, io) => {
  const [file] = parseFlags(spec, args, io.env).positionals
  if (file === undefined)
    throw new CodedError('EUSAGE', 'give the rules file to check: payments-gate check-backend-errors FILE')
  const rules = await readBackendErrors(file).catch((error: unknown) => {
    throw new CodedError('EUSAGE', `${file}: ${readFailure(error)}; give a readable rules file`)
  })
  if (Array.isArray(rules)) {
    for (const reason of rules) io.stdout.write(reportLine(`${file}: ${reason}`))
    return EXIT_NO
  }
  const count = rules.rules.length
  const defined = [...rules.names.keys()].filter((name) => !isErrorName(name))
  const names = defined.length === 0 ? '' : `; names defined: ${defined.join(', ')}`
  io.stdout.write(reportLine(`${count} valid ${count === 1 ? 'rule' : 'rules'} in ${file}${names}`))
  return EXIT_OK
}
