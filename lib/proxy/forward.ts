import { Agent, type ClientRequest, type IncomingMessage } from 'node:http'
import type * as HttpProxy from 'http-proxy-3'
import type { Duplex } from 'node:stream'
import type { Span, Tracer } from '@opentelemetry/api'
import { NO_RULES, type BackendErrorSource } from '../backend-errors/rules.js'
import { CodedError } from '../coded-error.js'
import { DEFAULTS } from '../defaults.js'
import { backendConnections, type TargetTls } from '../tls/backend.js'
import { startBackendSpan } from '../tracing.js'
import { answerFault } from './answer-fault.js'
import { backendPaths } from './backend-path.js'
import type { Exchange, GatewayResponse } from './exchange.js'
import { faultKind } from './faults.js'
import { forwardedRequestHeaders } from './hop-by-hop.js'
import { PaymentRelay, type OnSettled } from './payment-relay.js'
import { PaymentsInFlight } from './payments-in-flight.js'
import { relay } from './relay.js'
import { Pool } from './undici.js'
import { addForwardedHeaders } from './x-forwarded.js'

export type { BackendOutcome, OnSettled } from './payment-relay.js'

/**
 * http-proxy-3 serves the paths that are not payments, which a gateway in front of a payments-only backend
 * may never see: it is loaded by the first such request, rather than by every start (with follow-redirects
 * and debug, a dozen modules: docs/performance.md, start-up). Resolving it here, at start-up, makes a
 * missing package fail the start rather than a request.
 */
import.meta.resolve('http-proxy-3')

export interface ForwarderOptions {
  /** The backend, an `http:` or `https:` URL; its path, if any, is put in front of the request's. */
  target: URL
  /** For an `https:` target: its CA bundle, client certificate and server name (lib/tls/backend.ts). Default: the system's roots. */
  targetTls?: TargetTls | undefined
  /** How long the backend may stay silent, in ms. */
  timeout: number
  /** Most connections open to the backend at once, per engine; further requests wait for one. */
  maxSockets?: number
  /** Largest error body read to decide what the client gets of it (docs/backend-faults.md). */
  errorBodyLimit?: number
  /** Largest answer (body and headers, lib/idempotency/answer-size.ts) handed whole to a payment's `settled` callback; none when unset. */
  keepAnswerBytes?: number
  /** The rules naming the backend's error answers to payments; none when unset. */
  backendErrors?: BackendErrorSource
  /** The registered SDK's tracer: each call gets a client span, sent to the backend as its parent. */
  tracer?: Tracer | undefined
}

export interface Forwarder {
  /**
   * Sends a request to the backend once and relays its answer, on the path
   * `req.url` holds in origin form (the router's reading, lib/proxy/server.ts)
   * behind the target's own (backend-path.ts). With `payload`
   * (the validated document, serialized), that is the body sent, and
   * `settled` is told once how the call ended; without, the request's own
   * body is streamed as it comes.
   */
  forward(req: IncomingMessage, res: GatewayResponse, payload?: Buffer, settled?: OnSettled): void
  /** Resolves once no payment is at the backend, its client still there or not. */
  settled(): Promise<void>
  /**
   * Ends every payment still at the backend: those written get their unknown outcome (payment-relay.ts, `cut`).
   * Returns the request ids of those whose clients had left.
   */
  cut(): string[]
  /** Closes the connections to the backend. */
  close(): void
}

/**
 * A `101 Switching Protocols` the gateway never asked for (it forwards no `Upgrade`: docs/backend-faults.md): a broken
 * answer, a 500. Without this listener node's client drops the request with no event, and the client would wait. Told
 * as the request's error, as node has let go of the socket and would tell nothing of its end.
 */
function onBackendUpgrade(this: ClientRequest, _answer: IncomingMessage, socket: Duplex): void {
  socket.destroy()
  this.emit('error', new CodedError('EBACKENDUPGRADE', 'the backend switched protocols unasked (101)'))
  this.destroy()
}

/**
 * Two engines. Payments go through undici: its `Pool.dispatch` controller
 * callbacks map one to one onto the relay (payment-relay.ts) and cost about half the CPU of
 * http-proxy-3 with a buffered body. Every other path stays on http-proxy-3,
 * which streams a body of any size untouched.
 */
export function createForwarder(options: ForwarderOptions): Forwarder {
  const { timeout, tracer, target } = options
  const errorBodyLimit = options.errorBodyLimit ?? DEFAULTS.errorBodyLimit
  const maxSockets = options.maxSockets ?? DEFAULTS.maxSockets
  // One bounded keep-alive pool: without it every request opens a connection
  // (several times slower) and the backend's `Connection: close` reaches clients.
  const agentOptions = {
    keepAlive: true,
    maxSockets,
    timeout: DEFAULTS.backendIdleTimeout,
    scheduling: 'lifo',
  } as const
  const secure = backendConnections(target, options.targetTls, timeout)
  const agent = secure?.agent(agentOptions) ?? new Agent(agentOptions)
  // Idle connections are let go before the backend's own limit (DEFAULTS.backendIdleTimeout), or
  // `backendKeepAliveMargin` before the limit a backend announces (`Keep-Alive: timeout=N`), none
  // kept when that leaves nothing: a payment is never written to a socket the backend is closing.
  // One request per connection at a time (no pipelining), and no retry: undici
  // sends a request again only when it was pipelined behind a failed one, and
  // a Pool without interceptors never does.
  const pool = new Pool(options.target.origin, {
    connections: maxSockets,
    // HTTP/1.1 only: the relay reads the raw header list HTTP/1.1 hands over (payment-relay.ts), and undici 8 would offer h2 by default.
    allowH2: false,
    pipelining: 1,
    keepAliveTimeout: DEFAULTS.backendIdleTimeout,
    keepAliveTimeoutThreshold: DEFAULTS.backendKeepAliveMargin,
    // A TLS connector brings its own connect timeout (lib/tls/backend.ts).
    connect: secure?.connect,
    connectTimeout: timeout,
    headersTimeout: timeout,
    bodyTimeout: timeout,
  })
  const pathOf = backendPaths(options.target)
  const inFlight = new PaymentsInFlight()
  const settings = {
    inFlight,
    errorBodyLimit,
    keepAnswerBytes: options.keepAnswerBytes,
    backendErrors: options.backendErrors ?? { rules: NO_RULES },
  }
  // Called as the request's own `timeout` listener: one function for every request.
  function onBackendTimeout(this: ClientRequest): void {
    this.destroy(new CodedError('EBACKENDTIMEOUT', `the backend did not answer within ${timeout} ms`))
  }
  /** The backend's answer to each request passed through, once its head came: whether it came whole. */
  const answers = new WeakMap<object, IncomingMessage>()

  // `toProxy`: http-proxy-3 puts `req.url` as it is behind the target's path, joined as backendPaths joins
  // them, instead of reading it again with `new URL()`, which drops a fragment, applies dot segments and
  // takes an absolute form's path: the backend gets the path the router read (lib/checks/route.ts, parseTarget).
  function passThrough({ createProxyServer }: typeof HttpProxy): HttpProxy.ProxyServer {
    const proxy = createProxyServer({ target: options.target, agent, selfHandleResponse: true, toProxy: true })
    proxy.on('proxyReq', (proxyReq) => {
      proxyReq.setTimeout(timeout, onBackendTimeout)
      proxyReq.on('upgrade', onBackendUpgrade)
    })
    proxy.on('proxyRes', (proxyRes, _req, res) => {
      answers.set(res, proxyRes)
      relay(proxyRes, res, (res as GatewayResponse).exchange as Exchange, errorBodyLimit)
    })
    // http-proxy-3 throws on an error nobody listens to. The request is never
    // sent again: a payment reaches the backend at most once.
    proxy.on('error', (error, _req, res) => {
      // Bytes past the end of an answer that came whole (a 204 with a body, a body longer than its length): node's
      // client fails the request after the answer's end, and the relay is already passing that answer on, whole.
      if (answers.get(res)?.complete === true) return
      const gatewayResponse = res as GatewayResponse
      answerFault(gatewayResponse, gatewayResponse.exchange as Exchange, faultKind(error), error)
    })
    return proxy
  }
  let proxy: HttpProxy.ProxyServer | undefined
  let loading: Promise<HttpProxy.ProxyServer> | undefined
  // The requests that come while it loads wait for it; one whose client has left by then is not sent.
  // Nothing was sent when it cannot load: the client is told to try again (docs/backend-faults.md, refused).
  function passLater(req: IncomingMessage, res: GatewayResponse): void {
    loading ??= import('http-proxy-3').then((engine) => {
      proxy = passThrough(engine)
      return proxy
    })
    loading.then(
      (loaded) => {
        if (!res.destroyed) loaded.web(req, res)
      },
      (error: Error) => answerFault(res, res.exchange as Exchange, 'refused', error),
    )
  }

  return {
    forward(req, res, payload, settled) {
      const headers = forwardedRequestHeaders(req.headers, payload === undefined)
      addForwardedHeaders(headers, req)
      const exchange = res.exchange as Exchange
      headers['x-request-id'] = exchange.requestId
      if (tracer !== undefined)
        exchange.backendSpan = startBackendSpan(tracer, exchange.span as Span, req.method as string, target, headers)
      if (payload === undefined) {
        req.headers = headers
        if (proxy === undefined) passLater(req, res)
        else proxy.web(req, res)
        return
      }
      headers['content-length'] = String(payload.length)
      // `idempotent: false`, undici's default for a POST, said outright: such a request is never pipelined nor sent again.
      const call = {
        method: req.method as string,
        path: pathOf(req.url as string),
        headers,
        body: payload,
        idempotent: false,
        // The name an https backend must prove is the configured one, never the client's Host (lib/tls/backend.ts).
        servername: secure?.dispatchName,
      }
      // Never written past its deadline: `--timeout` after its claim began, or from now (docs/idempotency-reference.md, the in-flight window).
      new PaymentRelay(res, settings, settled, exchange.sendBy ?? performance.now() + timeout).send(pool, call)
    },
    settled: () => inFlight.settled(),
    cut: () => inFlight.cut(),
    close() {
      agent.destroy()
      // Settles without error, also when already destroyed (a second drain).
      void pool.destroy()
    },
  }
}
