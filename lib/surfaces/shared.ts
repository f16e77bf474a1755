import type { Logger } from 'pino'
import type { Principal } from '../checks/auth.js'
import type { Passed } from '../checks/index.js'
import { INTERNAL_ERROR } from '../errors.js'
import { answerOf, type Answer } from '../http/answer.js'
import type { Operation } from '../schema/payment.js'

/** What the application learns about a request that passed every check. */
export interface GateContext {
  readonly operation: Operation
  /** The request's `merchant.entity`. */
  readonly entity: string
  /** The authenticated user. */
  readonly principal: Principal
}

/** Where the gate reports policy reloads and internal errors: a pino logger. */
export type GateLogger = Pick<Logger, 'info' | 'warn' | 'error'>

/** The context of a request that went through `screen`, which always authenticates. */
export function contextOf(passed: Passed): GateContext {
  return { operation: passed.operation, entity: passed.entity, principal: passed.principal as Principal }
}

/**
 * A failure of the gate (an authenticator that threw) or of the application
 * (an error-handling middleware): logged, answered as the standard 500,
 * its details never shown to the client.
 */
export function internalError(error: unknown, logger: GateLogger | undefined): Answer {
  logger?.error({ err: error }, 'payments-gate: internal error')
  return answerOf(INTERNAL_ERROR)
}

/** An error with a 4xx `status` or `statusCode`, as http-errors, body-parser and Fastify make them: left to the host framework. */
export function isClientError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown }
  const code = typeof status === 'number' ? status : statusCode
  return typeof code === 'number' && code >= 400 && code < 500
}

