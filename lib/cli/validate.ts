import { maskCardNumbers } from '../card-mask.js'
import { CodedError } from '../coded-error.js'
import { serializeError, type Rejection } from '../errors.js'
import { buildChecks } from '../checks/index.js'
import { readFailure } from '../file-error.js'
import { loadPolicyDir } from '../policy/load.js'
import { readFileHead } from '../read-file.js'
import { OPERATIONS, type Operation } from '../schema/payment.js'
import { option, parseFlags, toggle, type CommandSpec } from './flags.js'
import { EXIT_NO, EXIT_OK, readAll, type Command, type Io } from './io.js'
import { SHARED_FLAGS } from './options.js'
import { unreadable } from './startup.js'

function parseOperation(text: string): Operation {
  if (!OPERATIONS.includes(text as Operation)) throw new CodedError('EINVALID', 'must be sale or recurring')
  return text as Operation
}

const VALIDATE_FLAGS = {
  operation: option({
    value: 'sale|recurring',
    summary: 'the operation whose path the body would be posted to',
    required: true,
    parse: parseOperation,
  }),
  policies: SHARED_FLAGS.policies,
  bodyLimit: SHARED_FLAGS.bodyLimit,
  showCardNumbers: toggle(
    'print card numbers whole, for those who need the exact bytes; by default they are masked to their first six and last four digits, as in the logs',
  ),
}

export const spec: CommandSpec<typeof VALIDATE_FLAGS> = {
  name: 'validate',
  usage: '--operation sale|recurring [flags] FILE|-',
  description:
    'Runs a body (a file, or - for stdin) through the same checks as the gateway, the headers taken as right and no credentials, and prints what the gateway would do: the document it would forward (exit 0) or the error body it would answer (exit 1).',
  env: false,
  positionals: 1,
  flags: VALIDATE_FLAGS,
}

/**
 * Runs a body through the same checks as the gateway (the headers taken as
 * right, no credentials) and prints what the gateway would do: the error body
 * it would answer (exit 1), or the document it would forward (exit 0). Card
 * numbers are masked as the logs mask them unless asked for whole.
 */
export const run: Command = async (args, io) => {
  const { values, positionals, where } = parseFlags(spec, args, io.env)
  const [file] = positionals
  if (file === undefined)
    throw new CodedError(
      'EUSAGE',
      `give the body: a FILE, or - for stdin (usage: payments-gate validate ${spec.usage})`,
    )
  const { policies, problems } = await loadPolicyDir(values.policies).catch((error: unknown) => {
    throw unreadable(error, where)
  })
  const [problem] = problems
  if (problem !== undefined) throw unreadable(new CodedError('EPOLICY', `${problem.file}: ${problem.reason}`), where)
  const checks = buildChecks({ policies, bodyLimit: values.bodyLimit })
  // Read no further than one byte past --body-limit: the gateway stops there too and answers 413.
  const body =
    file === '-'
      ? await readAll(io.stdin, values.bodyLimit)
      : await readFileHead(file, values.bodyLimit).catch((error: unknown) => {
          throw new CodedError(
            'EUSAGE',
            `${file}: ${readFailure(error)}; give the path of a file holding the body, or - for stdin`,
          )
        })
  const shown = values.showCardNumbers ? (text: string) => text : maskCardNumbers
  const verdict = checks.checkBody(values.operation, body)
  if (verdict.ok === false) return refused(io, shown, verdict, '')
  // An entity in report mode (docs/rollout.md): what enforce would do is still the answer, with a note.
  const note =
    verdict.ok === 'report' ? ' (its entity is in report mode: the gateway forwards the body as it came)' : ''
  if (verdict.ok === 'report' && verdict.wouldRefuse !== undefined) return refused(io, shown, verdict.wouldRefuse, note)
  io.stderr.write(
    `clean: the gateway would forward this ${values.operation} request for entity ${verdict.entity}${note}\n`,
  )
  io.stdout.write(`${shown(JSON.stringify(verdict.document))}\n`)
  return EXIT_OK
}

function refused(io: Io, shown: (text: string) => string, rejection: Rejection, note: string): number {
  io.stderr.write(`refused: ${rejection.status} ${rejection.body.errorName}${note}\n`)
  io.stdout.write(`${shown(serializeError(rejection.body))}\n`)
  return EXIT_NO
}
