import { CodedError } from '../coded-error.js'
import { readFailure } from '../file-error.js'
import { loadPolicyDir } from '../policy/load.js'
import { NO_POLICIES } from '../policy/store.js'
import { parseFlags, type CommandSpec } from './flags.js'
import { EXIT_NO, EXIT_OK, type Command } from './io.js'
import { reportLine } from './output.js'

export const spec: CommandSpec<Record<never, never>> = {
  name: 'check-policies',
  usage: 'DIR',
  description:
    'Checks every *.json policy file of DIR as the gateway loads it: a summary and exit 0 when all are valid, else one "file: reason" line per invalid file on stdout and exit 1. Meant for CI before a policy change ships.',
  env: false,
  positionals: 1,
  flags: {},
}

export const run: Command = async (args, io) => {
  const [dir] = parseFlags(spec, args, io.env).positionals
  if (dir === undefined) throw new CodedError('EUSAGE', 'give the folder to check: payments-gate check-policies DIR')
  const { policies, problems } = await loadPolicyDir(dir).catch((error: unknown) => {
    throw new CodedError('EUSAGE', `${dir}: ${readFailure(error)}; give a readable folder of policy files`)
  })
  for (const { file, reason } of problems) io.stdout.write(reportLine(`${file}: ${reason}`))
  if (problems.length > 0) return EXIT_NO
  // The gateway refuses such a folder, at start and at reload (docs/policies.md).
  if (policies.size === 0) {
    io.stdout.write(reportLine(`${dir}: ${NO_POLICIES}`))
    return EXIT_NO
  }
  const entities = [...policies.keys()]
  io.stdout.write(
    reportLine(
      `${entities.length} valid ${entities.length === 1 ? 'policy' : 'policies'} in ${dir}: ${entities.join(', ')}`,
    ),
  )
  return EXIT_OK
}
