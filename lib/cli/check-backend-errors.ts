import { readBackendErrors } from '../backend-errors/rules.js'
import { isErrorName } from '../errors.js'
import { EXIT_NO, EXIT_OK, UsageError, type Command } from './io.js'

export const usage = 'payments-gate check-backend-errors FILE'

/**
 * Validates a `--backend-errors` rules file as the gateway would load it: a
 * summary and exit 0 when it is good, else one `file: reason` line per reason
 * on stdout and exit 1. Meant for CI before a rules change ships.
 */
export const run: Command = async (args, io) => {
  const [file] = args
  if (file === undefined || args.length > 1 || file.startsWith('-')) throw new UsageError(`give one FILE (usage: ${usage})`)
  const rules = await readBackendErrors(file)
  if (Array.isArray(rules)) {
    for (const reason of rules) io.stdout.write(`${file}: ${reason}\n`)
    return EXIT_NO
  }
  const count = rules.rules.length
  const defined = [...rules.names.keys()].filter((name) => !isErrorName(name))
  const names = defined.length === 0 ? '' : `; names defined: ${defined.join(', ')}`
  io.stdout.write(`${count} valid ${count === 1 ? 'rule' : 'rules'} in ${file}${names}\n`)
  return EXIT_OK
}
