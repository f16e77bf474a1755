import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Checks, Passed } from '../checks/index.js'
import { writeAnswer } from '../http/answer.js'
import { inTurn } from '../http/pipelining.js'
import { ABORTED } from '../http/read-body.js'
import { screen } from '../http/screen.js'
import { registeredTracer } from '../tracing.js'
import { answerFor, type HandlerProtection } from './retry-protection.js'
import {
  endScreening,
  internalError,
  operationOfTarget,
  passedAsItCame,
  startScreening,
  type GateLogger,
  type GateReport,
} from './shared.js'

/**
 * What the node handler calls for every request it does not answer itself:
 * with the passed request and its id for the two operations, with
 * `undefined` for any other path. The request's body has been read when
 * `passed` is given. In report mode (docs/rollout.md) `report` is given for
 * every request of the two operations that passed BasicAuth and named an entity
 * the user may act for, and `passed`, its document as it came, only when every
 * check passed.
 */
export type NodeNext = (
  req: IncomingMessage,
  res: ServerResponse,
  passed: Passed | undefined,
  requestId: string | undefined,
  report?: GateReport,
) => void

/**
 * A plain `node:http` request handler running the shared request path, answering refusals as the proxy does;
 * with `protection`, a payment's retries get its first answer (docs/middleware.md, retry protection).
 */
export function nodeHandler(
  checks: Checks,
  next: NodeNext,
  logger?: GateLogger,
  protection?: HandlerProtection,
): (req: IncomingMessage, res: ServerResponse) => void {
  const tracer = registeredTracer()
  return (req, res) =>
    inTurn(res, () => {
      // No mount point to know of: an operation's path under any prefix is screened (docs/middleware-reference.md, mounts).
      const operation = operationOfTarget(checks.targetOf(req.url, true))
      const screening = typeof operation === 'string' ? startScreening(tracer, operation, req, res) : undefined
      const screened =
        protection === undefined ? screen(checks, req, operation) : protection.screen(req, res, operation)
      screened.then(
        (outcome) => {
          if (outcome === ABORTED) return endScreening(screening, 0)
          if (outcome === undefined) return next(req, res, undefined, undefined)
          endScreening(screening, outcome)
          if (outcome.ok === true) {
            if (protection === undefined) next(req, res, outcome, screening?.requestId)
            else void protection.run(next, req, res, outcome, screening?.requestId)
          } else if (outcome.ok === 'report') next(req, res, passedAsItCame(outcome), screening?.requestId, outcome)
          else writeAnswer(res, answerFor(outcome))
        },
        (error: unknown) => {
          endScreening(screening, 500)
          writeAnswer(res, internalError(error, logger))
        },
      )
    })
}
