import { readFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { serializeError, type Rejection } from '../errors.js'
import { buildChecks } from '../checks/index.js'
import { DEFAULTS } from '../defaults.js'
import { loadPolicyDir } from '../policy/load.js'
import { OPERATIONS, type Operation } from '../schema/payment.js'
import { EXIT_NO, EXIT_OK, UsageError, readAll, type Command, type Io } from './io.js'
import { parseByteCount } from './numbers.js'

export const usage = 'payments-gate validate --operation sale|recurring [--policies DIR] [--body-limit BYTES] FILE|-'

/**
 * Runs a body through the same checks as the gateway (the headers taken as
 * right, no credentials) and prints what the gateway would do: the error body
 * it would answer (exit 1), or the document it would forward (exit 0).
 */
export const run: Command = async (args, io) => {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      operation: { type: 'string' },
      policies: { type: 'string', default: DEFAULTS.policies },
      'body-limit': { type: 'string' },
    },
  })
  const operation = values.operation as Operation
  if (!OPERATIONS.includes(operation)) throw new UsageError(`--operation must be sale or recurring (usage: ${usage})`)
  const [file] = positionals
  if (file === undefined || positionals.length > 1) throw new UsageError(`give one FILE, or - for stdin (usage: ${usage})`)
  const { policies, problems } = await loadPolicyDir(values.policies)
  const [problem] = problems
  if (problem !== undefined) throw new UsageError(`${problem.file}: ${problem.reason}`)
  const bodyLimit = values['body-limit'] === undefined ? undefined : parseByteCount('--body-limit', values['body-limit'])
  const checks = buildChecks({ policies, bodyLimit })
  const body = file === '-' ? await readAll(io.stdin) : await readFile(file)
  const verdict = checks.checkBody(operation, body)
  if (verdict.ok === false) return refused(io, verdict, '')
  // An entity in report mode (docs/rollout.md): what enforce would do is still the answer, with a note.
  const note = verdict.ok === 'report' ? ' (its entity is in report mode: the gateway forwards the body as it came)' : ''
  if (verdict.ok === 'report' && verdict.wouldRefuse !== undefined) return refused(io, verdict.wouldRefuse, note)
  io.stderr.write(`clean: the gateway would forward this ${operation} request for entity ${verdict.entity}${note}\n`)
  io.stdout.write(`${JSON.stringify(verdict.document)}\n`)
  return EXIT_OK
}

function refused(io: Io, rejection: Rejection, note: string): number {
  io.stderr.write(`refused: ${rejection.status} ${rejection.body.errorName}${note}\n`)
  io.stdout.write(`${serializeError(rejection.body)}\n`)
  return EXIT_NO
}
