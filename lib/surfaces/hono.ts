import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import type { ReadableStream as NodeReadableStream } from 'node:stream/web'
import type { Context, MiddlewareHandler } from 'hono'
import type { RouterRoute } from 'hono/types'
import type { Checks, Reported, Verdict } from '../checks/index.js'
import type { Rejection } from '../errors.js'
import { answerOf, type Answer } from '../http/answer.js'
import { ABORTED } from '../http/read-body.js'
import { screenBody, screenHead, type Admitted } from '../http/screen.js'
import type { Operation } from '../schema/payment.js'
import { registeredTracer } from '../tracing.js'
import { answerFor, type Claimed, type HandlerProtection, type Replay } from './retry-protection.js'
import {
  contextOf,
  eitherOperation,
  endScreening,
  internalError,
  operationOfTarget,
  passedAsItCame,
  routeReader,
  screeningOf,
  type GateContext,
  type GateLogger,
  type GateReport,
  type Screening,
} from './shared.js'
import type { HonoGateMiddleware } from './types.js'

declare module 'hono' {
  // Hono's own way to type `c.get` and `c.set` for every app, since a middleware given to `app.use` types no route;
  // loaded through `payments-gate/hono`, since it needs Hono's types.
  interface ContextVariableMap {
    /** Set by the payments-gate middleware on a request that passed every check. */
    paymentsGate?: GateContext
    /** In report mode, set on every request of the two operations that passed BasicAuth (docs/rollout.md). */
    paymentsGateReport?: GateReport
  }
}

export type { PaymentsGateInput } from './types.js'

/**
 * The request's head in the shape the shared checks read (method and lower-case headers, as node gives
 * them); they read nothing else of it. A header sent twice arrives joined by ", ", as the Fetch API joins it.
 */
function headOf(request: Request): IncomingMessage {
  return { method: request.method, headers: Object.fromEntries(request.headers) } as unknown as IncomingMessage
}

/**
 * An answer as a `Response`: the same status, headers and bytes as every other surface. `Connection:
 * close` goes with it: node's `Response` carries it and @hono/node-server closes the connection after an
 * unread body as the proxy does; a runtime that cannot carry it (HTTP/2, RFC 9113 8.2.2) drops it.
 */
function responseOf(answer: Answer, screening: Screening | undefined): Response {
  const headers = new Headers(screening === undefined ? undefined : { 'x-request-id': screening.requestId })
  for (const name of Object.keys(answer.headers)) {
    // A name a replay holds more than once (`set-cookie`) comes as a list.
    const value = answer.headers[name]
    if (Array.isArray(value)) for (const item of value) headers.append(name, item)
    else headers.set(name, String(value))
  }
  return new Response(new Uint8Array(answer.body), { status: answer.status, headers })
}

/** The body as node reads it: one stream for the shared reader, whose limit keeps it from buffering past `bodyLimit`. */
function bodyOf(request: Request): Readable {
  return request.body === null ? Readable.from([]) : Readable.fromWeb(request.body as NodeReadableStream<Uint8Array>)
}

/**
 * In report mode the application gets the request as it came (docs/rollout.md): the body the gate read,
 * whole (report mode passes on only a body whose entity was read), is put back for its own `c.req.json()`.
 */
function report(c: Context, reported: Reported, screening: Screening): void {
  // A streamed body needs `duplex: 'half'` (the Fetch standard, RequestInit).
  c.req.raw = new Request(c.req.raw, { body: reported.body as Uint8Array<ArrayBuffer>, duplex: 'half' })
  c.req.addValidatedData('json', reported.received as object)
  c.set('paymentsGateReport', reported)
  const passed = passedAsItCame(reported)
  if (passed !== undefined) c.set('paymentsGate', contextOf(passed, screening))
}

/** What is returned when the client left mid-body: nobody reads it, but a Hono middleware that stops must return a `Response`. */
function clientGone(): Response {
  return new Response(null, { status: 400 })
}

/**
 * The request's operation, by the routes Hono matched that run after the gate (each declared path
 * whole, a sub-app's mount and `basePath` included, the route helpers' `matchedRoutes(c)` and
 * `routePath(c)`, read here through `c.req`, as `hono/route` reads them, since importing that helper
 * would make Hono a dependency of every install) and by the request's path and query as Hono routes
 * on them, both read as a mounted target (docs/middleware-reference.md, mounts).
 */
function operationOf(
  c: Context,
  checks: Checks,
  routeOperation: (route: string) => Operation | undefined,
): Operation | Rejection | undefined {
  const { url } = c.req
  let operation = operationOfTarget(checks.targetOf(url.slice(url.indexOf('/', url.indexOf('//') + 2)), true))
  // Deprecated in favour of hono/route, which reads the same match.
  const routes = c.req.matchedRoutes
  for (let at = c.req.routeIndex + 1; at < routes.length; at++)
    operation = eitherOperation(operation, routeOperation((routes[at] as RouterRoute).path))
  return operation
}

/**
 * Hono middleware on the Fetch API's `Request` and `Response`. A refusal is returned as a `Response`; a
 * request that passed goes on with `c.req.valid('json')` set to the validated, rewritten document and
 * `c.get('paymentsGate')` to its operation, entity, user and id; other paths go on untouched.
 */
export function honoMiddleware(
  checks: Checks,
  logger?: GateLogger,
  protection?: HandlerProtection,
): HonoGateMiddleware {
  const tracer = registeredTracer()
  const routeOperation = routeReader(checks)
  const middleware: MiddlewareHandler = async (c, next) => {
    const operation = operationOf(c, checks, routeOperation)
    if (operation === undefined) return next()
    const head = headOf(c.req.raw)
    // Refused whatever else the request holds: screenHead only adds `Connection: close` for an unread body.
    if (typeof operation === 'object')
      return responseOf(answerOf((await screenHead(checks, head, operation)) as Rejection), undefined)
    const screening = screeningOf(tracer, operation, head)
    let outcome: Verdict | Claimed | Replay | typeof ABORTED
    try {
      // Never undefined: the path is an operation's.
      const admitted = (await screenHead(checks, head, operation)) as Admitted | Rejection
      if (admitted.ok === true) {
        outcome =
          protection === undefined
            ? await screenBody(checks, bodyOf(c.req.raw), admitted)
            : await protection.claimBody(bodyOf(c.req.raw), admitted, c.req.raw.signal)
      } else {
        outcome = admitted
      }
    } catch (error) {
      endScreening(screening, 500)
      return responseOf(internalError(error, logger), screening)
    }
    endScreening(screening, outcome === ABORTED ? 0 : outcome.ok === 'claimed' ? outcome.passed : outcome)
    if (outcome === ABORTED) return clientGone()
    if (!outcome.ok || outcome.ok === 'replay') return responseOf(answerFor(outcome), screening)
    // On the application's answer too, as Hono's own requestId middleware sets it.
    c.header('x-request-id', screening.requestId)
    if (outcome.ok === 'report') {
      report(c, outcome, screening)
    } else if (outcome.ok === 'claimed') {
      c.req.addValidatedData('json', outcome.passed.document)
      c.set('paymentsGate', contextOf(outcome.passed, screening))
      return (protection as HandlerProtection).respond(c, next, outcome.ticket, screening.requestId)
    } else {
      c.req.addValidatedData('json', outcome.document)
      c.set('paymentsGate', contextOf(outcome, screening))
    }
    return next()
  }
  // The public type leaves the context's type to Hono (types.ts), so that the package's declarations need none of it.
  return middleware as HonoGateMiddleware
}
