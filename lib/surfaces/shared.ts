import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Span, Tracer } from '@opentelemetry/api'
import type { Logger } from 'pino'
import type { Principal } from '../checks/auth.js'
import type { Checks, Passed, Reported, Verdict } from '../checks/index.js'
import type { RequestTarget } from '../checks/route.js'
import { INTERNAL_ERROR, reject, type Rejection } from '../errors.js'
import { answerOf, type Answer } from '../http/answer.js'
import { requestIdOf } from '../http/request-id.js'
import type { RetryProtectionOutcome } from '../metrics.js'
import type { Operation } from '../schema/payment.js'
import { endSpan, startCheckSpan } from '../tracing.js'
import type { Replay } from './retry-protection.js'

/** What the application learns about a request that passed every check. */
export interface GateContext {
  readonly operation: Operation
  /** The request's `merchant.entity`. */
  readonly entity: string
  /** The authenticated user. */
  readonly principal: Principal
  /** The request's id, also on its answer as `X-Request-Id` (docs/middleware.md, request ids). */
  readonly requestId: string
}

/** Where the gate reports policy reloads and internal errors: a pino logger. */
export type GateLogger = Pick<Logger, 'info' | 'warn' | 'error'>

/**
 * What the application learns, in report mode, about a request of the two operations that passed
 * BasicAuth and named an entity the user may act for: the verdict of the checks as report mode gives
 * it (docs/rollout.md), with the body's bytes as they came.
 */
export type GateReport = Reported & {
  /**
   * With retry protection (`createGate`'s `idempotency`), on a payment every check passed: what it would
   * have done, from a look at the store that claims nothing (docs/middleware.md, retry protection).
   */
  readonly wouldRetryProtection?: RetryProtectionOutcome
}

/** What a surface screens a request on: its operation, the refusal of a target that is not one, or undefined for a path not ours. */
export function operationOfTarget(target: RequestTarget | Rejection): Operation | Rejection | undefined {
  return target.ok ? target.operation : target
}

/** A request that one reading takes for the sale and another for the recurring authorization, as the router refuses a target so read. */
const AMBIGUOUS = reject('requestIsMalformed')

/**
 * What two readings of one request make of it: the operation either names (the request is checked if
 * any reading takes it for a payment), a refusal either holds, and a refusal when they name two.
 */
export function eitherOperation(
  one: Operation | Rejection | undefined,
  other: Operation | Rejection | undefined,
): Operation | Rejection | undefined {
  if (other === undefined || one === other) return one
  if (one === undefined || typeof other === 'object') return other
  return typeof one === 'object' ? one : AMBIGUOUS
}

/**
 * The operation of a route as the framework declared it (`/:tenant/payments/sales/migrateCardOnFile`,
 * a sub-app's `/v6/payments/...`), read as a mounted target is read: an operation's path after any
 * mount point or path parameter (docs/middleware-reference.md, mounts); undefined for any other route, `*` and
 * `/payments/*` included (the request's own path decides those). A route's path is the same for every
 * request it matches, so each is read once, when it first matches.
 */
export function routeReader(checks: Checks): (route: string) => Operation | undefined {
  const read = new Map<string, Operation | undefined>()
  return (route) => {
    if (read.has(route)) return read.get(route)
    const target = checks.targetOf(route, true)
    const operation = target.ok ? target.operation : undefined
    read.set(route, operation)
    return operation
  }
}

/** The context of a request that went through `screen`, which always authenticates. */
export function contextOf(passed: Passed, screening: Screening): GateContext {
  return {
    operation: passed.operation,
    entity: passed.entity,
    principal: passed.principal as Principal,
    requestId: screening.requestId,
  }
}

/** A request on an operation's path while a middleware screens it: its id and, with a registered SDK, its span. */
export interface Screening {
  readonly requestId: string
  readonly span: Span | undefined
}

/**
 * Starts screening a request on an operation's path. Its id (the client's
 * `X-Request-Id` when sane) is set on the response, so that every answer
 * carries it, the gate's refusals and the application's own; its span is a
 * child of the application's active context (docs/tracing.md).
 */
export function startScreening(
  tracer: Tracer | undefined,
  operation: Operation,
  req: IncomingMessage,
  res: ServerResponse,
): Screening {
  const screening = screeningOf(tracer, operation, req)
  res.setHeader('x-request-id', screening.requestId)
  return screening
}

/**
 * `startScreening` for a host that sets the id on its own reply: a header set on node's response
 * makes node's `writeHead` set each of the host's headers one by one (Fastify, docs/performance-history.md).
 */
export function screeningOf(tracer: Tracer | undefined, operation: Operation, req: IncomingMessage): Screening {
  const requestId = requestIdOf(req.headers['x-request-id'])
  return { requestId, span: tracer === undefined ? undefined : startCheckSpan(tracer, operation, requestId) }
}

/**
 * The screening is over: the verdict of the checks, a replay of retry protection, or the status the
 * middleware answered itself (500 for an internal error, 0 when the client
 * left). Nothing to do for a path not screened, or without an SDK.
 */
export function endScreening(screening: Screening | undefined, verdict: Verdict | Replay | number): void {
  const span = screening?.span
  if (span === undefined) return
  if (typeof verdict === 'number') endSpan(span, { status: verdict })
  else if (verdict.ok === 'replay') endSpan(span, { status: verdict.answer.status })
  else if (verdict.ok) endSpan(span, { entity: verdict.entity })
  else endSpan(span, { status: verdict.status, errorName: verdict.body.errorName })
}

/**
 * In report mode, the request as the application gets it when every check passed: the document as
 * it came, not rewritten; undefined when enforce mode would have refused it.
 */
export function passedAsItCame(report: Reported): Passed | undefined {
  if (report.wouldRefuse !== undefined) return undefined
  return {
    ok: true,
    operation: report.operation,
    entity: report.entity,
    document: report.received as Passed['document'],
    principal: report.principal,
    policy: report.policy as Passed['policy'],
  }
}

const INTERNAL_ANSWER = answerOf(INTERNAL_ERROR)

/**
 * A failure of the gate (an authenticator that threw) or of the application
 * (an error-handling middleware): logged, answered as the standard 500
 * (`answer`, when the failure was a payment's handler), its details never shown to the client.
 */
export function internalError(error: unknown, logger: GateLogger | undefined, answer = INTERNAL_ANSWER): Answer {
  logger?.error({ err: error }, 'payments-gate: internal error')
  return answer
}

/** An error with a 4xx `status` or `statusCode`, as http-errors, body-parser and Fastify make them: left to the host framework. */
export function isClientError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown }
  const code = typeof status === 'number' ? status : statusCode
  return typeof code === 'number' && code >= 400 && code < 500
}
