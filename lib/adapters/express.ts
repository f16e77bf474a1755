import type { ErrorRequestHandler, RequestHandler } from 'express'
import type { Checks } from '../gate.js'
import { ABORTED } from '../read-body.js'
import { sendError, sendRejection } from '../respond.js'
import { inTurn, screenBody, screenHead } from '../screen.js'
import { failed, type GateContext, type GateLogger } from './context.js'

declare global {
  // Express's own way to extend its request type (declaration merging on the global namespace).
  namespace Express {
    interface Request {
      /** Set by the payments-gate middleware on a request that passed every check. */
      paymentsGate?: GateContext
    }
  }
}

const BODY_ALREADY_READ =
  'payments-gate: the request body was already read by another body parser. Mount the payments-gate middleware before express.json() and the like.'

/**
 * Connect/Express middleware. A refusal is answered here; a request that
 * passed goes on with `req.body` set to the validated, rewritten document and
 * `req.paymentsGate` to its operation, entity and user; other paths go on
 * untouched. It reads the body itself, so it must come before any body parser.
 */
export function expressMiddleware(checks: Checks, logger?: GateLogger): RequestHandler {
  return (req, res, next) => inTurn(res, () => {
    screenHead(checks, req)
      .then(async (head) => {
        if (head === undefined) return next()
        if (!head.ok) return sendRejection(res, head.rejection, head.close)
        // A consumed stream never ends again: waiting on it would hang the request.
        if (req.readableEnded || req.body !== undefined) {
          logger?.error({ path: req.path }, BODY_ALREADY_READ)
          return sendError(res, 'internalErrorOccurred', { message: BODY_ALREADY_READ })
        }
        const outcome = await screenBody(checks, req, head)
        if (outcome === ABORTED) return
        if (!outcome.ok) return sendRejection(res, outcome.rejection, outcome.close)
        req.body = outcome.document
        req.paymentsGate = { operation: outcome.operation, entity: outcome.entity, principal: outcome.principal }
        next()
      })
      .catch((error: unknown) => failed(res, error, logger))
  })
}

/**
 * Express error-handling middleware, mounted last: an error thrown by the
 * application becomes the standard 500 `internalErrorOccurred` body (logged,
 * never shown). Errors that carry a 4xx status are left to Express.
 */
export function expressErrorHandler(logger?: GateLogger): ErrorRequestHandler {
  return (error: unknown, _req, res, next) => {
    if (res.headersSent || isClientError(error)) return next(error)
    failed(res, error, logger)
  }
}

/** An error with a 4xx `status` or `statusCode`, as http-errors and body-parser make them. */
export function isClientError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown }
  const code = typeof status === 'number' ? status : statusCode
  return typeof code === 'number' && code >= 400 && code < 500
}
