import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { BackendErrorSource } from '../backend-errors/rules.js'
import { DEFAULTS, IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import type { Principal } from '../checks/auth.js'
import { UNMET_EXPECTATION } from '../checks/headers.js'
import { MISSING_HOST } from '../checks/route.js'
import type { Checks, Reported } from '../checks/index.js'
import { closing, INTERNAL_ERROR, SERVICE_UNAVAILABLE, type Rejection } from '../errors.js'
import { answerOf, writeAnswer } from '../http/answer.js'
import { answerClientError, answerConnect, pendingResponse, type BelowHttpAnswer } from '../http/client-error.js'
import { listen } from '../http/listen.js'
import { inTurn } from '../http/pipelining.js'
import { ABORTED } from '../http/read-body.js'
import { requestIdOf } from '../http/request-id.js'
import { screen } from '../http/screen.js'
import { acceptErrorLog, type Logger } from '../log.js'
import type { Metrics } from '../metrics.js'
import type { Mode } from '../policy/policy.js'
import type { Operation } from '../schema/payment.js'
import type { TargetTls } from '../tls/backend.js'
import type { TlsSource } from '../tls/files.js'
import { createSecureServer } from '../tls/listener.js'
import type { KeyPair } from '../tls/pem.js'
import { registeredTracer, startServerSpan } from '../tracing.js'
import { checkBounded } from '../option-values.js'
import { InFlight } from '../rate-limit/in-flight.js'
import {
  GatewayResponse,
  record,
  releasePlace,
  track,
  withOwnId,
  type Exchange,
  type GatewayState,
} from './exchange.js'
import { createForwarder } from './forward.js'
import { UnderWay } from './payments-in-flight.js'
import { reportLimit, SHED } from './rate-limits.js'
import {
  createPayments,
  inFlightWindowMs,
  lentRetryProtection,
  protectedPayment,
  type RetryProtectionOptions,
} from './retry-protection.js'
import { clientAddress } from './x-forwarded.js'

/**
 * The reverse proxy's options: the checks it runs, the backend, retry protection, and its server's limits.
 * From a gate: `createGateway({ checks: gate.checks, backendErrors: gate.backendErrors, target, logger })`.
 */
export interface GatewayOptions extends RetryProtectionOptions {
  /** The checks that screen every request: a gate's (`gate.checks`), or `buildChecks(...)`'s. */
  checks: Checks
  /** The backend, an `http:` or `https:` URL. */
  target: string | URL
  /** For an `https:` target: its CA bundle, client certificate and server name. Default: the system's roots, the target's host. */
  targetTls?: TargetTls
  /** Serve HTTPS with this certificate and key, each new one for new connections (docs/deployment-reference.md, TLS). Default: plain HTTP. */
  tls?: TlsSource<KeyPair>
  /** How long the backend may stay silent, in ms, and how long a payment may wait for a connection to it. Default 30000. */
  timeout?: number
  logger: Logger
  metrics?: Metrics
  /** Time allowed to receive the request's headers, in ms. Default 10000. */
  headersTimeout?: number
  /** Time allowed to receive the whole request, in ms. Default 30000. */
  requestTimeout?: number
  /** How often those two timeouts are checked, in ms. Default 1000 (node's own is 30000, too coarse for a 10 s limit). */
  timeoutCheckInterval?: number
  /** Largest request head, in bytes. Default 16384. */
  maxHeaderSize?: number
  /** How long an idle client connection is kept open, in ms. Default 5000. */
  keepAliveTimeout?: number
  /** Most connections open to the backend at once. Default 256. */
  maxSockets?: number
  /** Proxies in front of the gateway whose `X-Forwarded-For` entries are believed, for the log line's `remoteAddress`. Default 0. */
  trustProxy?: number
  /**
   * The rules naming the backend's error answers (docs/backend-faults.md): a gate's
   * (`gate.backendErrors`), or e.g. `await watchBackendErrors(FILE)`. Default: names by status only.
   */
  backendErrors?: BackendErrorSource
  /**
   * `enforce`, or `report`: pass requests on as they came and report what enforce would do (docs/rollout.md).
   * Default: the checks' `mode`.
   */
  mode?: Mode
  /**
   * Most payments this process forwards at once, at least 1: one more is answered 503 `serviceUnavailable`
   * with `Retry-After: 1` before its policy and rate limit, unless retry protection answers it (a replay, 409)
   * (docs/deployment-reference.md, backend protection).
   * Default: no cap.
   */
  backendMaxInFlight?: number
}

export interface Gateway {
  readonly server: Server<typeof IncomingMessage, typeof GatewayResponse>
  /** Listening, and not draining: what `/readyz` reports. */
  readonly ready: boolean
  /** Waits for retry protection's store (a Redis: until it answers, or its command timeout), then listens. */
  listen(port: number, host?: string): Promise<AddressInfo>
  /**
   * The first step of stopping: not ready any more, and every answer from now
   * on says `Connection: close`, while new connections are still accepted and
   * served, so that clients move to other instances as the load balancers
   * learn that this one is leaving (docs/deployment-reference.md, stopping).
   */
  withdraw(): void
  /**
   * Withdraws, stops accepting, answers 503 to new requests on open
   * connections, lets the requests in flight finish, payments and claims whose clients left included, then closes.
   * After `graceMs` the payments still at the backend get their unknown outcome and the connections still
   * open are cut: by default the in-flight window (three times `timeout` and a margin), so that no payment
   * still in its window is cut (docs/deployment-reference.md, stopping). Retry protection's store is closed
   * last, once every payment's answer is recorded.
   */
  drain(graceMs?: number): Promise<void>
}

const DRAINING = closing(SERVICE_UNAVAILABLE)
const FAILED = closing(INTERNAL_ERROR)

/**
 * The reverse proxy: every request is screened by the shared checks, then
 * answered or forwarded once, payments under retry protection. Throws the
 * one-line `EIDEMPOTENCY` error for a store spec it does not take.
 */
/** A server span's name: the method and operation (`POST sale`), or the method alone for a path passed through. */
function spanName(method: string, operation: Operation | undefined): string {
  return operation === undefined ? method : `${method} ${operation}`
}

export function createGateway(options: GatewayOptions): Gateway {
  const { checks, logger, metrics } = options
  checkBounded('backendMaxInFlight', options.backendMaxInFlight)
  const inFlight = options.backendMaxInFlight === undefined ? undefined : new InFlight(options.backendMaxInFlight)
  const timeout = options.timeout ?? DEFAULTS.timeout
  const mode = options.mode ?? checks.mode
  const recorder = { logger, metrics }
  const trustProxy = options.trustProxy ?? DEFAULTS.trustProxy
  const protectedPayments = options.idempotency !== 'off'
  // Built from a gate with retry protection and given none of its own: the gate's (docs/middleware.md).
  const lent = lentRetryProtection(checks, { idempotency: options.idempotency, timeout })
  // Asked once: without a registered SDK no request makes a span (docs/tracing.md).
  const tracer = registeredTracer()
  const forwarder = createForwarder({
    tracer,
    target: new URL(options.target),
    targetTls: options.targetTls,
    timeout,
    maxSockets: options.maxSockets,
    keepAnswerBytes: protectedPayments ? IDEMPOTENCY_DEFAULTS.maxAnswerBytes : undefined,
    backendErrors: options.backendErrors,
  })
  const payments = createPayments(forwarder, { ...options, timeout, metrics }, lent)
  const serverOptions = {
    ServerResponse: GatewayResponse,
    // Request smuggling: node's strict parser refuses CL+TE, duplicate lengths, bare LF. Never loosen it.
    insecureHTTPParser: false,
    // Asked in onRequest instead, so that the refusal is in the error format and logged.
    requireHostHeader: false,
    maxHeaderSize: options.maxHeaderSize ?? DEFAULTS.maxHeaderSize,
    headersTimeout: options.headersTimeout ?? DEFAULTS.headersTimeout,
    requestTimeout: options.requestTimeout ?? DEFAULTS.requestTimeout,
    connectionsCheckingInterval: options.timeoutCheckInterval ?? DEFAULTS.timeoutCheckInterval,
    keepAliveTimeout: options.keepAliveTimeout ?? DEFAULTS.keepAliveTimeout,
  }
  const server =
    options.tls === undefined ? createServer(serverOptions) : createSecureServer(serverOptions, options.tls)
  const state: GatewayState = { draining: false }
  // Requests still in their checks, claim or password check: a drain closes the store only after them, so that
  // a claim that lands once its client is gone is released (docs/deployment-reference.md, stopping).
  const handling = new UnderWay()
  /** The listener is closed: a request on a connection still open gets 503, and idle connections are closed. */
  let closed = false
  let listening = false

  function refuse(res: GatewayResponse, exchange: Exchange, rejection: Rejection): void {
    exchange.errorName = rejection.body.errorName
    writeAnswer(res, withOwnId(answerOf(rejection), exchange))
  }

  async function handle(
    req: IncomingMessage,
    res: GatewayResponse,
    exchange: Exchange,
    operation: Operation | Rejection | undefined,
    expectsContinue: boolean,
  ): Promise<void> {
    if (closed) {
      refuse(res, exchange, DRAINING)
      return
    }
    // The address counts towards the login throttle only where the proxies before it are known (docs/credentials.md).
    const client = trustProxy > 0 ? exchange.remoteAddress : undefined
    const continued = expectsContinue ? () => res.writeContinue() : undefined
    // Retry protection looks the key up before the policy (docs/idempotency.md): payments.forward runs it.
    const screened = await screen(checks, req, operation, continued, mode, client, 'entitled')
    if (screened === ABORTED) return
    if (screened === undefined) {
      if (expectsContinue) res.writeContinue()
      forwarder.forward(req, res)
      return
    }
    if (!screened.ok) {
      refuse(res, exchange, screened)
      return
    }
    const placed = place(exchange)
    if (screened.ok === 'report') {
      if (placed) await passAsItCame(req, res, exchange, screened)
      else shed(res, exchange, screened.entity)
      return
    }
    exchange.entity = screened.entity
    exchange.user = screened.principal?.username
    return payments.forward(req, res, exchange, screened, checks.checkPolicy, placed ? undefined : shed)
  }

  /**
   * The in-flight cap, in both modes, before the rate limit: false when it has no place for the payment.
   * Otherwise the payment holds a place until its backend call is over (payment-relay.ts), or until its
   * answer ends when it is not forwarded.
   */
  function place(exchange: Exchange): boolean {
    if (inFlight === undefined) return true
    if (!inFlight.enter()) return false
    exchange.inFlight = inFlight
    return true
  }

  /** A payment the cap had no place for, and retry protection did not answer. */
  function shed(res: GatewayResponse, exchange: Exchange, entity: string): void {
    exchange.entity = entity
    exchange.limited = 'shed'
    metrics?.shed(entity)
    refuse(res, exchange, SHED)
  }

  /**
   * Report mode (docs/rollout.md): the request goes to the backend once, as it came, and its answer
   * comes back as it came; the record says what enforce mode would have done.
   */
  async function passAsItCame(
    req: IncomingMessage,
    res: GatewayResponse,
    exchange: Exchange,
    reported: Reported,
  ): Promise<void> {
    exchange.mode = 'report'
    exchange.entity = reported.entity
    // screen() always authenticates: a report reaching the proxy has its user.
    exchange.user = (reported.principal as Principal).username
    exchange.wouldRefuse = reported.wouldRefuse?.body.errorName
    if (reported.wouldRewrite.length > 0) exchange.wouldRewrite = reported.wouldRewrite
    const { document, body } = reported
    if (document !== undefined) {
      let would = payments.inspect(protectedPayment(reported.operation, reported.entity, reported.received, document))
      if (would instanceof Promise) would = await would
      exchange.wouldRetryProtection = would
      const { policy } = reported
      if (policy?.rateLimit !== undefined)
        await reportLimit(payments.rateLimiter, exchange, reported.entity, policy, metrics)
    }
    forwarder.forward(req, res, Buffer.from(body.buffer, body.byteOffset, body.length))
  }

  // One listener for every response (its `this`), so that no closure is made per request.
  function onClose(this: GatewayResponse): void {
    const exchange = this.exchange as Exchange
    // A payment never handed to the backend: its place is free (a relay gives its own back, payment-relay.ts).
    if (this.backendCall === undefined) releasePlace(exchange)
    record(this, exchange, recorder)
    // A connection whose last answer just ended is idle now: let a drain close it.
    if (closed) setImmediate(closeIdle)
  }
  const closeIdle = () => server.closeIdleConnections()

  /** `refusal`: the request's answer whatever it holds (an expectation it cannot meet). */
  function onRequest(req: IncomingMessage, res: GatewayResponse, expectsContinue: boolean, refusal?: Rejection): void {
    // Read once: the label of the log line and metrics (a 405 keeps its operation's), screen()'s route, and
    // the path both engines send (forward.ts), so that no target is routed on one reading and sent on another.
    const target = checks.targetOf(req.url)
    const operation = target.ok ? target.operation : undefined
    // Before an absolute form's host is written in: the client must send `Host` all the same (RFC 9112 3.2).
    const hostless = !req.headers.host && req.httpVersionMinor === 1
    if (target.ok) {
      // Absolute form, or a path led by several slashes: the backend gets the origin form every reader
      // reads alike (lib/checks/route.ts, forwardedPath), and an absolute form's host for `Host` (RFC 9112 3.2.2).
      req.url = target.path
      if (target.host !== undefined) req.headers.host = target.host
    }
    const exchange = track(
      res,
      state,
      operation ?? 'other',
      requestIdOf(req.headers['x-request-id']),
      clientAddress(req, trustProxy),
    )
    if (tracer !== undefined)
      exchange.span = startServerSpan(
        tracer,
        spanName(req.method as string, operation),
        req.method as string,
        req.headers,
        exchange.operation,
        exchange.requestId,
      )
    res.on('close', onClose)
    handling.enter()
    handle(
      req,
      res,
      exchange,
      refusal ?? (hostless ? MISSING_HOST : target.ok ? operation : target),
      expectsContinue,
    ).then(handling.leave, (error: unknown) => {
      handling.leave()
      logger.error({ err: error, path: req.url }, 'request failed')
      refuse(res, exchange, FAILED)
    })
  }

  // A response never given a socket would also never close: inTurn drops its request before it is tracked.
  server.on('request', (req: IncomingMessage, res: GatewayResponse) => inTurn(res, () => onRequest(req, res, false)))
  // With this listener node leaves `Expect: 100-continue` to us: the 100 is sent only once the head passed.
  server.on('checkContinue', (req: IncomingMessage, res: GatewayResponse) =>
    inTurn(res, () => onRequest(req, res, true)),
  )
  server.on('checkExpectation', (req: IncomingMessage, res: GatewayResponse) =>
    inTurn(res, () => onRequest(req, res, false, UNMET_EXPECTATION)),
  )
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    // Read before the answer closes the socket, which forgets its peer.
    const { remoteAddress } = socket as Socket
    // The request being received, when node read its head: the refusal is its answer, told on its own line.
    const own = pendingResponse<GatewayResponse>(socket)?.exchange
    const refusal = answerClientError(error, socket)
    if (refusal === undefined || own === undefined) return refusedBelowHttp(refusal, error.code, remoteAddress)
    own.errorName = refusal.errorName
    own.belowHttp = { status: refusal.status, code: error.code }
  })
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    const { remoteAddress } = socket as Socket
    refusedBelowHttp(answerConnect(socket, checks.route(req.method, req.url)), 'CONNECT', remoteAddress)
  })
  function refusedBelowHttp(refusal: BelowHttpAnswer | undefined, code: string | undefined, remoteAddress?: string) {
    if (refusal === undefined) return
    const { status, errorName } = refusal
    metrics?.request('unrouted', status, errorName, 0)
    logger.info({ status, errorName, code, remoteAddress }, 'refused below HTTP')
  }

  return {
    server,
    get ready() {
      return listening && !state.draining
    },
    async listen(port, host) {
      await payments.ready()
      const address = await listen(server, port, host, acceptErrorLog(logger))
      listening = true
      return address
    },
    withdraw() {
      // Answers not yet started will say `Connection: close` (GatewayResponse.writeHead), so their connections end with them.
      state.draining = true
    },
    drain(graceMs = inFlightWindowMs(timeout)) {
      state.draining = true
      closed = true
      return new Promise((resolve) => {
        // Told first, so that a payment the deadline cuts still gets its answer and its record.
        const cut = setTimeout(() => {
          const requestIds = forwarder.cut()
          // Their log lines were written when their clients left, before anyone knew how they would end.
          if (requestIds.length > 0)
            logger.warn(
              { requestIds, backendError: 'timeout', backendErrorCode: 'EDRAINED' },
              'payments whose clients had left cut by the drain: their outcome is unknown',
            )
          server.closeAllConnections()
        }, graceMs)
        // A payment whose client left is still read to its end and recorded (docs/idempotency.md).
        server.close(() => {
          resolve(
            // In this order: a request still in its checks may yet hand a payment to the forwarder.
            handling
              .settled()
              .then(() => forwarder.settled())
              .then(() => {
                clearTimeout(cut)
                listening = false
                forwarder.close()
                return payments.close()
              }),
          )
        })
        server.closeIdleConnections()
      })
    },
  }
}
