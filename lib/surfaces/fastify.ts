import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import type { FastifyError, FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest } from 'fastify'
import type { Checks, Reported, Verdict } from '../checks/index.js'
import { INTERNAL_ERROR, type Rejection } from '../errors.js'
import { answerOf, writeAnswer, type Answer } from '../http/answer.js'
import { inTurn } from '../http/pipelining.js'
import { ABORTED, readBody } from '../http/read-body.js'
import { screenBody, screenHead, type Admitted } from '../http/screen.js'
import type { Operation, RecurringRequest, SaleRequest } from '../schema/payment.js'
import { registeredTracer } from '../tracing.js'
import { holdsClaim, markStarted, markThrew, markTracked, threwMarked } from './answer-capture.js'
import { answerFor, THREW, THREW_UNPROTECTED, type HandlerProtection, type Replay } from './retry-protection.js'
import {
  contextOf,
  endScreening,
  eitherOperation,
  internalError,
  isClientError,
  operationOfTarget,
  passedAsItCame,
  routeReader,
  screeningOf,
  type GateContext,
  type GateLogger,
  type GateReport,
  type Screening,
} from './shared.js'
import type { FastifyGateOptions, FastifyGatePlugin } from './types.js'

// Fastify's own way to type decorations; loaded through `payments-gate/fastify`, since it needs Fastify's types.
declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the payments-gate plugin on a request that passed every check. */
    paymentsGate?: GateContext
    /** In report mode, set on every payment passed on: its entity read, and the user's (docs/rollout.md). */
    paymentsGateReport?: GateReport
  }
}

/** The document each operation's route gets. */
interface Documents {
  sale: SaleRequest
  recurring: RecurringRequest
}

/**
 * A route behind the plugin, as Fastify's route generic: `app.post<PaymentsGateRoute<'sale'>>(path, handler)`
 * types `request.body` as the operation's document, which it is wherever `request.paymentsGate` is set (in
 * report mode a body enforce would refuse comes as it came, with `request.paymentsGate` undefined).
 */
export interface PaymentsGateRoute<O extends Operation = Operation> {
  Body: Documents[O]
}

const BODY_READ_ELSEWHERE =
  "payments-gate: the request body went to another content-type parser than the plugin's. Register no parser of your own for the v6 media type."
/** The standard 500, like every internal failure: the reason goes to the log, meant for whoever registered the parser. */
const BODY_READ_ELSEWHERE_ANSWER = answerOf(INTERNAL_ERROR)

/** Writes an answer through Fastify: the same status, headers and bytes as every other surface. */
function write(reply: FastifyReply, answer: Answer): FastifyReply {
  // A Buffer body, so Fastify does not append `; charset=utf-8` to the JSON type as it does for a string.
  return reply.code(answer.status).headers(answer.headers).send(answer.body)
}

/**
 * A replay, on node's response as it was recorded: the capture recorded what the client got, after the application's
 * `onSend` hooks (a payload wrapped, compressed), so through them a second time it would change again. Fastify's
 * reply is hijacked; the retry's `X-Request-Id`, set on node's response, goes with it.
 */
function replayed(reply: FastifyReply, answer: Answer): void {
  reply.hijack()
  writeAnswer(reply.raw, answer)
}

/**
 * A body that could not be read, as an error for Fastify: the client left
 * before it was complete (nobody is listening any more), or it was too large
 * for another route of the application.
 */
function bodyError(outcome: Rejection | typeof ABORTED): Error {
  return outcome === ABORTED
    ? Object.assign(new Error('payments-gate: the client aborted the request body'), { statusCode: 400 })
    : Object.assign(new Error(outcome.body.message), { statusCode: outcome.status })
}

/**
 * Where the plugin keeps a request's state: private decorations, set up once, instead of per-request weak maps.
 * ADMITTED holds a request admitted whose body no parser of the plugin's has read yet.
 */
const ADMITTED = Symbol('payments-gate admitted')
const REFUSED = Symbol('payments-gate refused')
const SCREENING = Symbol('payments-gate screening')
/** With retry protection, the node response of a request admitted: the parser captures its handler's answer there. */
const RESPONSE = Symbol('payments-gate response')

interface Screened {
  [ADMITTED]: Admitted | undefined
  /** A refusal, or a replay of retry protection, answered in preValidation. */
  [REFUSED]: Rejection | Replay | undefined
  [SCREENING]: Screening | undefined
  [RESPONSE]: ServerResponse | undefined
}

type GateRequest = FastifyRequest & Screened

type Done = (error?: Error) => void

/** A preParsing hook's callback: the stream the content-type parser reads instead of the request, when given. */
type Replaced = (error?: Error | null, payload?: Readable) => void

/** A content-type parser's callback. */
type Parsed = (error: Error | null, body?: unknown) => void

/**
 * The Fastify plugin. It skips encapsulation (as fastify-plugin would), so
 * its hooks and its content-type parser apply to the instance it is
 * registered on. Credentials and headers are checked in `onRequest`, before
 * the body is read; the body is read and checked by a content-type parser for
 * the v6 media type, so Fastify never parses it a second time (report mode reads
 * a JSON type's body in `preParsing`, `readHeldJson`); a refused body
 * is answered in `preValidation`, before any route schema or handler. The
 * hooks take callbacks and the state rides on decorations set up once: a
 * promise, a closure or a weak-map entry per request and hook is what made the
 * plugin dearer than the schema route it replaces (docs/performance-history.md).
 */
export function fastifyPlugin(checks: Checks, logger?: GateLogger, protection?: HandlerProtection): FastifyGatePlugin {
  const tracer = registeredTracer()
  const routeOperation = routeReader(checks)
  const internal = (reply: FastifyReply, error: unknown): FastifyReply => write(reply, internalError(error, logger))

  /** The head screened: refused, or admitted for its body to be read by the parser. */
  function headScreened(
    request: GateRequest,
    reply: FastifyReply,
    done: Done,
    screening: Screening,
    head: Admitted | Rejection,
  ): void {
    if (!head.ok) {
      endScreening(screening, head)
      write(reply, answerOf(head))
      return
    }
    request[ADMITTED] = head
    request[SCREENING] = screening
    if (protection !== undefined) request[RESPONSE] = reply.raw
    done()
  }

  /**
   * The request's operation, by the route Fastify matched (`routeOptions.url`, its prefix included,
   * parameterised or not) and by the target as sent, read as a mounted target (docs/middleware-reference.md, mounts).
   */
  function operationOf(request: GateRequest): Operation | Rejection | undefined {
    const sent = operationOfTarget(checks.targetOf(request.raw.url, true))
    const route = request.routeOptions.url
    // No route matched: Fastify answers 404 from its not-found handler, which is no payment handler.
    return route === undefined ? sent : eitherOperation(sent, routeOperation(route))
  }

  function screen(request: GateRequest, reply: FastifyReply, done: Done): void {
    const operation = operationOf(request)
    if (operation === undefined) {
      done()
      return
    }
    if (typeof operation === 'object') {
      // Refused whatever else the request holds: screenHead only adds `Connection: close` for an unread body.
      void screenHead(checks, request.raw, operation).then((head) => write(reply, answerOf(head as Rejection)))
      return
    }
    const screening = screeningOf(tracer, operation, request.raw)
    // On node's response, which Fastify's headers join when it sends: a handler that hijacks the reply keeps it too.
    reply.raw.setHeader('x-request-id', screening.requestId)
    // Never undefined: the path is an operation's.
    void screenHead(checks, request.raw, operation).then(
      (head) => headScreened(request, reply, done, screening, head as Admitted | Rejection),
      (error: unknown) => {
        endScreening(screening, 500)
        internal(reply, error)
      },
    )
  }

  /** The verdict on a v6 body the parser read: the document for the route, or the refusal kept for preValidation. */
  function bodyScreened(request: GateRequest, parsed: Parsed, outcome: Verdict | Replay | typeof ABORTED): void {
    const screening = request[SCREENING] as Screening
    endScreening(screening, outcome === ABORTED ? 0 : outcome)
    if (outcome === ABORTED) return parsed(bodyError(ABORTED))
    if (!outcome.ok || outcome.ok === 'replay') {
      request[REFUSED] = outcome
      return parsed(null, undefined)
    }
    if (outcome.ok === true) {
      request.paymentsGate = contextOf(outcome, screening)
      return parsed(null, outcome.document)
    }
    request.paymentsGateReport = outcome
    const passed = passedAsItCame(outcome)
    if (passed !== undefined) request.paymentsGate = contextOf(passed, screening)
    parsed(null, outcome.received)
  }

  /**
   * Report mode, a request admitted with its Content-Type's refusal held (a JSON type other than the
   * v6 type, `checks.holdable`): Fastify hands its body to its parser for that type, never to the
   * plugin's, so the body is read and checked here, before any parser. That parser gets the same
   * bytes, and preValidation hands the route the document the checks read, whatever the parser made
   * of them (docs/middleware-reference.md, report mode).
   */
  function readHeldJson(request: GateRequest, reply: FastifyReply, payload: Readable, done: Replaced): void {
    const head = request[ADMITTED]
    // Only Accept's refusal and a JSON type's are ever held; Accept's comes with the v6 type, for the plugin's parser.
    if (head?.refused?.body.headerName !== 'Content-Type') return done()
    request[ADMITTED] = undefined
    const screened = (outcome: Verdict | typeof ABORTED) => heldJsonScreened(request, reply, done, outcome)
    void screenBody(checks, payload, head).then(screened, done)
  }

  function heldJsonScreened(
    request: GateRequest,
    reply: FastifyReply,
    done: Replaced,
    outcome: Verdict | typeof ABORTED,
  ): void {
    endScreening(request[SCREENING], outcome === ABORTED ? 0 : outcome)
    if (outcome === ABORTED) return done(bodyError(ABORTED))
    if (!outcome.ok) {
      write(reply, answerOf(outcome))
      return
    }
    // With a refusal held, the verdict is enforce's answer or a report of it, never a pass.
    request.paymentsGateReport = outcome as Reported
    done(null, Readable.from([(outcome as Reported).body], { objectMode: false }))
  }

  /**
   * A request admitted whose body no parser of the plugin's read: the application registered its own
   * parser for a spelling of the v6 media type, which Fastify chose over the plugin's. The gate never
   * held the bytes the handler would get, so nothing is handed on (docs/middleware.md, Fastify).
   */
  function readElsewhere(request: GateRequest, reply: FastifyReply): void {
    request[ADMITTED] = undefined
    // The route matched, not the target: a query string may hold what must not be logged.
    logger?.error({ route: request.routeOptions.url }, BODY_READ_ELSEWHERE)
    endScreening(request[SCREENING], BODY_READ_ELSEWHERE_ANSWER.status)
    write(reply, BODY_READ_ELSEWHERE_ANSWER)
  }

  const plugin: FastifyPluginCallback<FastifyGateOptions> = (fastify, options, done) => {
    fastify.decorateRequest('paymentsGate', undefined)
    fastify.decorateRequest('paymentsGateReport', undefined)
    fastify.decorateRequest(ADMITTED, undefined)
    fastify.decorateRequest(REFUSED, undefined)
    fastify.decorateRequest(SCREENING, undefined)
    if (protection !== undefined) {
      fastify.decorateRequest(RESPONSE, undefined)
      protectHandlers(fastify)
    }
    const jsonParser = fastify.getDefaultJsonParser('error', 'error')

    fastify.addHook('onRequest', (request, reply, next) => {
      inTurn(reply.raw, () => screen(request as GateRequest, reply, next))
    })

    const { request: mediaType } = checks.mediaTypes
    fastify.addContentTypeParser(mediaType, (request: FastifyRequest, payload: IncomingMessage, parsed: Parsed) => {
      const head = (request as GateRequest)[ADMITTED]
      ;(request as GateRequest)[ADMITTED] = undefined
      if (head === undefined) {
        // Another route of the application that takes the v6 media type: plain JSON, as Fastify would parse it.
        void readBody(payload, checks.bodyLimit).then((bytes) => {
          // Its answer goes to `parsed`; what it returns is not a promise to wait on.
          if (Buffer.isBuffer(bytes)) void jsonParser(request, bytes.toString('utf8'), parsed)
          else parsed(bodyError(bytes))
        })
        return
      }
      const screened = (outcome: Verdict | Replay | typeof ABORTED) =>
        bodyScreened(request as GateRequest, parsed, outcome)
      if (protection === undefined) void screenBody(checks, payload, head).then(screened, parsed)
      else
        void protection
          .screenBody(payload, head, (request as GateRequest)[RESPONSE] as ServerResponse)
          .then(screened, parsed)
    })

    // Only report mode holds a refusal of the head (screenHead): enforce mode adds no hook to every request.
    if (checks.mode === 'report') {
      fastify.addHook('preParsing', (request, reply, payload, done) =>
        readHeldJson(request as GateRequest, reply, payload, done),
      )
    }

    fastify.addHook('preValidation', (request, reply, next) => {
      // First of every preValidation hook: one of the application's that answers or fails leaves the handler unstarted.
      if (
        protection !== undefined &&
        holdsClaim(reply.raw) &&
        (request.routeOptions.config as unknown as Record<symbol, unknown>)[TRACKED_ROUTE] === true
      )
        markTracked(reply.raw)
      if ((request as GateRequest)[ADMITTED] !== undefined) return readElsewhere(request as GateRequest, reply)
      const outcome = (request as GateRequest)[REFUSED]
      if (outcome?.ok === 'replay') return replayed(reply, outcome.answer)
      if (outcome !== undefined) {
        write(reply, answerFor(outcome))
        return
      }
      // Report mode: the body as the checks read it, also where Fastify's parser for a JSON type read it too.
      const report = request.paymentsGateReport
      if (report !== undefined) request.body = report.received
      next()
    })

    if (options.errorHandler === true) {
      // A payment let through with no claim held: its handler may have charged before the error (Fastify does not
      // say whether a hook after the gate's or the handler threw), so its outcome is unknown (docs/middleware.md).
      fastify.setErrorHandler((error: FastifyError, request, reply) => {
        if (isClientError(error)) return reply.send(error)
        const payment = request.paymentsGate ?? request.paymentsGateReport
        if (payment === undefined || holdsClaim(reply.raw)) return internal(reply, error)
        return write(reply, internalError(error, logger, THREW_UNPROTECTED))
      })
    }
    done()
  }
  // The public type leaves the instance's type to Fastify (types.ts), so that the package's declarations need none of it.
  return Object.assign(plugin, {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: 'payments-gate',
  }) as FastifyGatePlugin
}

/**
 * Fastify's hooks for a handler of a protected payment that throws: each route registered from now on marks
 * its payment when its handler starts (a wrapper made once per route), `onError` marks the claim of a payment
 * whose handler started, and `onSend` replaces the error's reply with the unknown outcome, which the capture
 * then records as the client gets it (docs/middleware.md, retry protection).
 */
function protectHandlers(fastify: FastifyInstance): void {
  fastify.addHook('onRoute', (route) => {
    const handler = route.handler as (this: unknown, request: FastifyRequest, reply: FastifyReply) => unknown
    route.handler = function (this: unknown, request: FastifyRequest, reply: FastifyReply) {
      markStarted(reply.raw)
      return handler.call(this, request, reply)
    } as typeof route.handler
    // Its handler's start is marked, so an answer that ends before it (a hook's 500) releases the key: the plugin's
    // preValidation, first of every instance's, marks such a route's payment tracked; a claim made after that hook
    // (a body read elsewhere) by the route's own first hook. A route registered before the plugin has neither: its
    // answers are recorded by their status.
    route.config = { ...route.config, [TRACKED_ROUTE]: true }
    const hooks = route.preValidation
    route.preValidation = [tracking, ...(hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks])]
  })
  fastify.addHook('onError', (_request, reply, _error, done) => {
    markThrew(reply.raw)
    done()
  })
  fastify.addHook('onSend', (_request, reply, payload, done) => {
    if (!threwMarked(reply.raw)) return done(null, payload)
    // An onSend hook that ran before this one (compression registered before the plugin) described the error's body.
    for (const name of REPRESENTATION_HEADERS) reply.removeHeader(name)
    reply.code(THREW.status).headers(THREW.headers)
    done(null, THREW.body)
  })
}

/** What a reply's headers say of its body, untrue of another body (RFC 9110 sections 8.3 to 8.8 and 14.4). */
const REPRESENTATION_HEADERS = [
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-range',
  'etag',
  'last-modified',
] as const

/** The mark, in a route's config, of a route registered after the plugin: its handler's start is marked. */
const TRACKED_ROUTE = Symbol('payments-gate tracked route')

function tracking(_request: FastifyRequest, reply: FastifyReply, done: Done): void {
  markTracked(reply.raw)
  done()
}
