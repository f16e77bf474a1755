import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Checks, Passed } from '../checks/index.js'
import { answerOf, writeAnswer } from '../http/answer.js'
import { inTurn } from '../http/pipelining.js'
import { ABORTED } from '../http/read-body.js'
import { screen } from '../http/screen.js'
import { internalError, passedAsItCame, type GateLogger, type GateReport } from './shared.js'

/**
 * What the node handler calls for every request it does not answer itself:
 * with the passed request for the two operations, with `undefined` for any
 * other path. The request's body has been read when `passed` is given. In
 * report mode (docs/rollout.md) `report` is given for every request of the two
 * operations that passed BasicAuth, and `passed`, its document as it came,
 * only when every check passed.
 */
export type NodeNext = (req: IncomingMessage, res: ServerResponse, passed: Passed | undefined, report?: GateReport) => void

/** A plain `node:http` request handler running the shared request path, answering refusals as the proxy does. */
export function nodeHandler(checks: Checks, next: NodeNext, logger?: GateLogger): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) =>
    inTurn(res, () => {
      screen(checks, req, checks.operationOf(req.url)).then(
        (outcome) => {
          if (outcome === ABORTED) return
          if (outcome === undefined || outcome.ok === true) next(req, res, outcome)
          else if (outcome.ok === 'report') next(req, res, passedAsItCame(outcome), outcome)
          else writeAnswer(res, answerOf(outcome))
        },
        (error: unknown) => writeAnswer(res, internalError(error, logger)),
      )
    })
}
