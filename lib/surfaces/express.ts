import type { Checks } from '../checks/index.js'
import { INTERNAL_ERROR, type Rejection } from '../errors.js'
import { answerOf, writeAnswer } from '../http/answer.js'
import { inTurn } from '../http/pipelining.js'
import { ABORTED } from '../http/read-body.js'
import { screenBody, screenHead } from '../http/screen.js'
import type { Operation } from '../schema/payment.js'
import { registeredTracer } from '../tracing.js'
import { threwOn } from './answer-capture.js'
import { answerFor, THREW_UNPROTECTED, type HandlerProtection } from './retry-protection.js'
import {
  contextOf,
  endScreening,
  eitherOperation,
  internalError,
  isClientError,
  operationOfTarget,
  passedAsItCame,
  startScreening,
  type GateLogger,
  type Screening,
} from './shared.js'
import type { ExpressErrorMiddleware, ExpressMiddleware, ExpressRequest } from './types.js'

const BODY_ALREADY_READ =
  'payments-gate: the request body was already read by another body parser. Mount the payments-gate middleware before express.json() and the like.'
/** The standard 500, like every internal failure: the reason goes to the log, meant for whoever mounted the middleware. */
const BODY_ALREADY_READ_ANSWER = answerOf(INTERNAL_ERROR)

/**
 * The operation a request names, or the refusal of its target, read as a
 * mounted target, an operation's path under any mount point (when the gate
 * runs, Express has not yet chosen a route below it): on the target as the
 * client sent it (`req.originalUrl`), and on what Express routes below the
 * gate's mount point (`req.url`, whose path is `req.path` under `req.baseUrl`)
 * when a middleware in front rewrote it (docs/middleware-reference.md, mounts).
 */
function operationOfMounted(checks: Checks, req: ExpressRequest): Operation | Rejection | undefined {
  const sent = operationOfTarget(checks.targetOf(req.originalUrl, true))
  // Unless rewritten, the mount point and what lies below it are the target as sent.
  if ((req.baseUrl ?? '') + req.url === req.originalUrl) return sent
  return eitherOperation(sent, operationOfTarget(checks.targetOf(req.url, true)))
}

/**
 * Connect/Express middleware. A refusal is answered here; a request that
 * passed goes on with `req.body` set to the validated, rewritten document and
 * `req.paymentsGate` to its operation, entity and user; other paths go on
 * untouched. It reads the body itself, so it must come before any body parser.
 * With `protection`, a payment's retries get its first answer (docs/middleware.md, retry protection).
 */
export function expressMiddleware(
  checks: Checks,
  logger?: GateLogger,
  protection?: HandlerProtection,
): ExpressMiddleware {
  const tracer = registeredTracer()
  return (req, res, next) =>
    inTurn(res, () => {
      const operation = operationOfMounted(checks, req)
      const screening = typeof operation === 'string' ? startScreening(tracer, operation, req, res) : undefined
      screenHead(checks, req, operation)
        .then(async (head) => {
          if (head === undefined) return next()
          if (!head.ok) {
            endScreening(screening, head)
            return writeAnswer(res, answerOf(head))
          }
          // A consumed stream never ends again: waiting on it would hang the request. The stream tells, not
          // `req.body`, which body-parser 1 (Express 4) sets to `{}` on every request whose type it does not take.
          if (req.readableEnded) {
            logger?.error({ path: req.path }, BODY_ALREADY_READ)
            endScreening(screening, BODY_ALREADY_READ_ANSWER.status)
            return writeAnswer(res, BODY_ALREADY_READ_ANSWER)
          }
          const outcome =
            protection === undefined ? await screenBody(checks, req, head) : await protection.screenBody(req, head, res)
          if (outcome === ABORTED) return endScreening(screening, 0)
          endScreening(screening, outcome)
          if (!outcome.ok || outcome.ok === 'replay') return writeAnswer(res, answerFor(outcome))
          if (outcome.ok === 'report') {
            // The body as it came: what the application gets in report mode (docs/middleware.md).
            req.body = outcome.received
            req.paymentsGateReport = outcome
            const passed = passedAsItCame(outcome)
            // An admitted request was on an operation's path, so it is being screened.
            if (passed !== undefined) req.paymentsGate = contextOf(passed, screening as Screening)
          } else {
            req.body = outcome.document
            req.paymentsGate = contextOf(outcome, screening as Screening)
          }
          next()
        })
        .catch((error: unknown) => {
          endScreening(screening, 500)
          writeAnswer(res, internalError(error, logger))
        })
    })
}

/**
 * Express error-handling middleware, mounted last: an error thrown by the
 * application becomes the standard 500 `internalErrorOccurred` body (logged,
 * never shown), saying the outcome is unknown when a payment's route threw.
 * Errors that carry a 4xx status are left to Express.
 */
export function expressErrorHandler(logger?: GateLogger): ExpressErrorMiddleware {
  return (error: unknown, req, res, next) => {
    // A protected payment's route threw: its outcome is unknown (docs/middleware.md, retry protection). An error
    // before any route matched (a middleware's) is answered as it would be, and settled by its status.
    if (req.route !== undefined && threwOn(res, error)) return
    if (res.headersSent || isClientError(error)) return next(error)
    // Report mode hands the handler a payment enforce would refuse too: `paymentsGateReport` alone marks it.
    const payment = req.route !== undefined && (req.paymentsGate ?? req.paymentsGateReport) !== undefined
    writeAnswer(res, internalError(error, logger, payment ? THREW_UNPROTECTED : undefined))
  }
}
