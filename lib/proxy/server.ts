import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { reject, type Rejection } from '../errors.js'
import type { Checks } from '../gate.js'
import { listen } from '../listen.js'
import type { Logger } from '../log.js'
import type { Metrics } from '../metrics.js'
import { ABORTED } from '../read-body.js'
import { sendRejection } from '../respond.js'
import { inTurn, screen } from '../screen.js'
import { answerClientError } from './client-error.js'
import { GatewayResponse, record, track, type Exchange, type GatewayState } from './exchange.js'
import { createForwarder } from './forward.js'

export interface GatewayOptions {
  /** The checks, built once (`buildChecks`). */
  checks: Checks
  /** The backend, an `http:` URL. */
  target: string | URL
  /** How long the backend may stay silent, in ms. Default 30000. */
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
}

export interface Gateway {
  readonly server: Server<typeof IncomingMessage, typeof GatewayResponse>
  /** Listening, and not draining: what `/readyz` reports. */
  readonly ready: boolean
  listen(port: number, host?: string): Promise<AddressInfo>
  /**
   * Stops accepting, answers 503 to new requests on open connections, lets
   * the requests in flight finish, then closes. After `graceMs` the connections
   * still open are cut.
   */
  drain(graceMs?: number): Promise<void>
}

const DRAINING = reject('serviceUnavailable')
const INTERNAL_ERROR = reject('internalErrorOccurred')

/** The reverse proxy: every request is screened by the shared checks, then answered or forwarded once. */
export function createGateway(options: GatewayOptions): Gateway {
  const { checks, logger, metrics } = options
  const recorder = { logger, metrics }
  const forwarder = createForwarder({
    target: new URL(options.target),
    timeout: options.timeout ?? 30000,
    maxSockets: options.maxSockets,
  })
  const server = createServer({
    ServerResponse: GatewayResponse,
    // Request smuggling: node's strict parser refuses CL+TE, duplicate lengths, bare LF. Never loosen it.
    insecureHTTPParser: false,
    maxHeaderSize: options.maxHeaderSize ?? 16384,
    headersTimeout: options.headersTimeout ?? 10000,
    requestTimeout: options.requestTimeout ?? 30000,
    connectionsCheckingInterval: options.timeoutCheckInterval ?? 1000,
    keepAliveTimeout: options.keepAliveTimeout ?? 5000,
  })
  const state: GatewayState = { draining: false }
  let listening = false

  function answer(res: GatewayResponse, exchange: Exchange, rejection: Rejection, close: boolean): void {
    exchange.errorName = rejection.body.errorName
    sendRejection(res, rejection, close)
  }

  async function handle(req: IncomingMessage, res: GatewayResponse, exchange: Exchange, expectsContinue: boolean): Promise<void> {
    if (state.draining) {
      answer(res, exchange, DRAINING, true)
      return
    }
    const screened = await screen(checks, req, expectsContinue ? () => res.writeContinue() : undefined)
    if (screened === ABORTED) return
    if (screened === undefined) {
      if (expectsContinue) res.writeContinue()
      forwarder.forward(req, res)
      return
    }
    if (!screened.ok) {
      answer(res, exchange, screened.rejection, screened.close)
      return
    }
    exchange.entity = screened.entity
    exchange.user = screened.principal.username
    forwarder.forward(req, res, Buffer.from(JSON.stringify(screened.document)))
  }

  // One listener for every response (its `this`), so that no closure is made per request.
  function onClose(this: GatewayResponse): void {
    record(this, this.exchange as Exchange, recorder)
    // A connection whose last answer just ended is idle now: let a drain close it.
    if (state.draining) setImmediate(closeIdle)
  }
  const closeIdle = () => server.closeIdleConnections()

  function onRequest(req: IncomingMessage, res: GatewayResponse, expectsContinue: boolean): void {
    // Labels only: the route itself is decided inside screen().
    const operation = checks.route('POST', req.url) ?? 'other'
    const exchange = track(res, state, operation as string)
    res.on('close', onClose)
    handle(req, res, exchange, expectsContinue).catch((error: unknown) => {
      logger.error({ err: error, path: req.url }, 'request failed')
      answer(res, exchange, INTERNAL_ERROR, true)
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
    drain(graceMs = 10000) {
      // Answers not yet started will say `Connection: close` (GatewayResponse.writeHead), so their connections end with them.
      state.draining = true
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
