import { loadPolicyDir } from '../policy/load.js'
import { EXIT_NO, EXIT_OK, UsageError, type Command } from './io.js'

export const usage = 'payments-gate check-policies DIR'

/**
 * Validates every policy file of a folder, as the gateway would load it: a
 * summary and exit 0 when all are good, else one `file: reason` line per
 * refused file on stdout and exit 1. Meant for CI before a policy change ships.
 */
export const run: Command = async (args, io) => {
  const [dir] = args
  if (dir === undefined || args.length > 1 || dir.startsWith('-')) throw new UsageError(`give one DIR (usage: ${usage})`)
  const { policies, problems } = await loadPolicyDir(dir)
  for (const { file, reason } of problems) io.stdout.write(`${file}: ${reason}\n`)
  if (problems.length > 0) return EXIT_NO
  const entities = [...policies.keys()]
  io.stdout.write(`${entities.length} valid ${entities.length === 1 ? 'policy' : 'policies'} in ${dir}: ${entities.join(', ')}\n`)
  return EXIT_OK
}
