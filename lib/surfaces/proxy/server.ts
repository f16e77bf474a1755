import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { DEFAULTS, IDEMPOTENCY_DEFAULTS } from '../../defaults.js'
import { reject, type Rejection } from '../../errors.js'
import type { Gate } from '../../gate.js'
import { answerOf, writeAnswer } from '../../http/answer.js'
import { answerClientError } from '../../http/client-error.js'
import { listen } from '../../http/listen.js'
import { inTurn } from '../../http/pipelining.js'
import { ABORTED } from '../../http/read-body.js'
import { screen } from '../../http/screen.js'
import type { Logger } from '../../log.js'
import type { RecordedAnswer } from '../../idempotency/store.js'
import type { Metrics } from '../../metrics.js'
import type { Operation } from '../../schema/payment.js'
import { GatewayResponse, record, track, type Exchange, type GatewayState } from './exchange.js'
import { createForwarder } from './forward.js'

/** The reverse proxy's options: the gate whose checks it runs, the backend, and its server's limits. */
export interface GatewayOptions {
  /** The gate built by `createGate`: its checks screen every request. */
  gate: Gate
  /** The backend, an `http:` URL. */
  target: string | URL
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
}

export interface Gateway {
  readonly server: Server<typeof IncomingMessage, typeof GatewayResponse>
  /** Listening, and not draining: what `/readyz` reports. */
  readonly ready: boolean
  listen(port: number, host?: string): Promise<AddressInfo>
  /**
   * The first step of stopping: not ready any more, and every answer from now
   * on says `Connection: close`, while new connections are still accepted and
   * served, so that clients move to other instances as the load balancers
   * learn that this one is leaving (docs/deployment.md, stopping).
   */
  withdraw(): void
  /**
   * Withdraws, stops accepting, answers 503 to new requests on open
   * connections, lets the requests in flight finish, then closes. After
   * `graceMs` the connections still open are cut.
   */
  drain(graceMs?: number): Promise<void>
}

const DRAINING = reject('serviceUnavailable', { close: true })
const INTERNAL_ERROR = reject('internalErrorOccurred', { close: true })

/**
 * A recorded answer, sent again as it was, marked as a replay (the IETF draft
 * "The Idempotency-Key HTTP Header Field"; docs/idempotency.md).
 */
function replay(res: GatewayResponse, answer: RecordedAnswer): void {
  res.writeHead(answer.status, [...answer.headers, 'Idempotent-Replayed', 'true'])
  res.end(answer.body)
}

/** The reverse proxy: every request is screened by the shared checks, then answered or forwarded once. */
export function createGateway(options: GatewayOptions): Gateway {
  const { gate, logger, metrics } = options
  const { checks } = gate
  const recorder = { logger, metrics }
  const protection = gate.retryProtection
  const forwarder = createForwarder({
    target: new URL(options.target),
    timeout: gate.timeout,
    maxSockets: options.maxSockets,
    keepAnswerBytes: protection === undefined ? undefined : IDEMPOTENCY_DEFAULTS.maxAnswerBytes,
  })
  const server = createServer({
    ServerResponse: GatewayResponse,
    // Request smuggling: node's strict parser refuses CL+TE, duplicate lengths, bare LF. Never loosen it.
    insecureHTTPParser: false,
    maxHeaderSize: options.maxHeaderSize ?? DEFAULTS.maxHeaderSize,
    headersTimeout: options.headersTimeout ?? DEFAULTS.headersTimeout,
    requestTimeout: options.requestTimeout ?? DEFAULTS.requestTimeout,
    connectionsCheckingInterval: options.timeoutCheckInterval ?? DEFAULTS.timeoutCheckInterval,
    keepAliveTimeout: options.keepAliveTimeout ?? DEFAULTS.keepAliveTimeout,
  })
  const state: GatewayState = { draining: false }
  /** The listener is closed: a request on a connection still open gets 503, and idle connections are closed. */
  let closing = false
  let listening = false

  function refuse(res: GatewayResponse, exchange: Exchange, rejection: Rejection): void {
    exchange.errorName = rejection.body.errorName
    writeAnswer(res, answerOf(rejection))
  }

  async function handle(req: IncomingMessage, res: GatewayResponse, exchange: Exchange, operation: Operation | undefined, expectsContinue: boolean): Promise<void> {
    if (closing) {
      refuse(res, exchange, DRAINING)
      return
    }
    const screened = await screen(checks, req, operation, expectsContinue ? () => res.writeContinue() : undefined)
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
    exchange.entity = screened.entity
    exchange.user = screened.principal?.username
    const payload = Buffer.from(JSON.stringify(screened.document))
    if (protection === undefined) {
      forwarder.forward(req, res, payload)
      return
    }
    let guarded = protection.guard(screened, payload)
    if (guarded instanceof Promise) guarded = await guarded
    exchange.retryProtection = guarded.outcome
    metrics?.retryProtection(guarded.outcome)
    if (guarded.kind === 'forward') {
      const { ticket } = guarded
      forwarder.forward(req, res, payload, ticket && ((outcome) => protection.settle(ticket, outcome)))
    } else if (guarded.kind === 'replay') {
      replay(res, guarded.answer)
    } else {
      refuse(res, exchange, guarded.rejection)
    }
  }

  // One listener for every response (its `this`), so that no closure is made per request.
  function onClose(this: GatewayResponse): void {
    record(this, this.exchange as Exchange, recorder)
    // A connection whose last answer just ended is idle now: let a drain close it.
    if (closing) setImmediate(closeIdle)
  }
  const closeIdle = () => server.closeIdleConnections()

  function onRequest(req: IncomingMessage, res: GatewayResponse, expectsContinue: boolean): void {
    // Looked up once: the label of the log line and metrics (a 405 keeps its operation's), and screen()'s route.
    const operation = checks.operationOf(req.url)
    const exchange = track(res, state, operation ?? 'other')
    res.on('close', onClose)
    handle(req, res, exchange, operation, expectsContinue).catch((error: unknown) => {
      logger.error({ err: error, path: req.url }, 'request failed')
      refuse(res, exchange, INTERNAL_ERROR)
    })
  }

  // A response never given a socket would also never close: inTurn drops its request before it is tracked.
  server.on('request', (req: IncomingMessage, res: GatewayResponse) => inTurn(res, () => onRequest(req, res, false)))
  // With this listener node leaves `Expect: 100-continue` to us: the 100 is sent only once the head passed.
  server.on('checkContinue', (req: IncomingMessage, res: GatewayResponse) => inTurn(res, () => onRequest(req, res, true)))
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    const refusal = answerClientError(error, socket)
    if (refusal === undefined) return
    const { status, body } = refusal
    metrics?.request('unrouted', status, body.errorName, 0)
    logger.info({ status, errorName: body.errorName, code: error.code }, 'refused below HTTP')
  })

  return {
    server,
    get ready() {
      return listening && !state.draining
    },
    async listen(port, host) {
      const address = await listen(server, port, host)
      listening = true
      return address
    },
    withdraw() {
      // Answers not yet started will say `Connection: close` (GatewayResponse.writeHead), so their connections end with them.
      state.draining = true
    },
    drain(graceMs = DEFAULTS.graceMs) {
      state.draining = true
      closing = true
      return new Promise((resolve) => {
        const cut = setTimeout(() => server.closeAllConnections(), graceMs)
        server.close(() => {
          clearTimeout(cut)
          listening = false
          forwarder.close()
          resolve()
        })
        server.closeIdleConnections()
      })
    },
  }
}
