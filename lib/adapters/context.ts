import type { Logger } from 'pino'
import type { ServerResponse } from 'node:http'
import type { Principal } from '../checks/auth.js'
import { sendError } from '../respond.js'
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

/**
 * A failure of the gate (an authenticator that threw) or of the application
 * (an error-handling middleware): logged, answered as the standard 500,
 * its details never shown to the client.
 */
export function failed(res: ServerResponse, error: unknown, logger: GateLogger | undefined): void {
  logger?.error({ err: error }, 'payments-gate: internal error')
  sendError(res, 'internalErrorOccurred')
}

