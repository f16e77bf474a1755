import { ServerResponse, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http'
import type { Answer } from '../http/answer.js'
import type { Span } from '@opentelemetry/api'
import type { Logger } from '../log.js'
import type { BackendErrorKind, Metrics, RetryProtectionOutcome } from '../metrics.js'
import type { InFlight } from '../rate-limit/in-flight.js'
import { endSpan } from '../tracing.js'

/**
 * What is known about one request as it goes through the gateway, filled in
 * along the way and written out once, as one log line and its metrics, when
 * its answer is over.
 */
export interface Exchange {
  /** The state of the gateway that took the request. */
  readonly gateway: GatewayState
  /** `sale`, `recurring`, or `other` for a path passed through. */
  readonly operation: string
  /** Its id (docs/logs-and-metrics.md, request ids): sent to the backend, on every answer, in the log line. */
  readonly requestId: string
  readonly started: number
  /** Who called: the connection's peer, or behind trusted proxies the client they name (x-forwarded.ts). */
  readonly remoteAddress: string | undefined
  entity: string | undefined
  user: string | undefined
  errorName: string | undefined
  backendError: BackendErrorKind | undefined
  /** Why the backend call failed: node's or undici's error code (a refused certificate's included), for the log line. */
  backendErrorCode: string | undefined
  /** The names of the backend's headers that node would refuse to write, dropped from the answer (backend-head.ts). */
  droppedHeaders: string[] | undefined
  /** What retry protection did with a payment that passed every check. */
  retryProtection: RetryProtectionOutcome | undefined
  /** `report` when the request is passed on as it came (docs/rollout.md): the relays then pass the backend's answer as it came too. */
  mode: 'report' | undefined
  /** Report mode: the error name enforce mode would have answered. */
  wouldRefuse: string | undefined
  /** Report mode: the rewrites enforce mode would have made. */
  wouldRewrite: readonly string[] | undefined
  /** Report mode: what retry protection would have done, from a read-only look at its store. */
  wouldRetryProtection: RetryProtectionOutcome | undefined
  /** A payment: the time (performance.now()) after which it is never written to the backend, `--timeout` after its claim began (docs/idempotency.md). */
  sendBy: number | undefined
  /** Refused by the rate limit (429) or the in-flight cap (503), for the log line (docs/logs-and-metrics.md). */
  limited: 'rateLimited' | 'shed' | undefined
  /** A payment the rate limit admitted: the RateLimit fields its answer carries, [name, value, ...]. */
  rateLimitFields: readonly string[] | undefined
  /** The in-flight cap's place it holds until its backend call is over (`releasePlace`). */
  inFlight: InFlight | undefined
  /** Its server span, when an OpenTelemetry SDK is registered (docs/tracing.md). */
  span: Span | undefined
  /** The span of its call to the backend, until that call is over. */
  backendSpan: Span | undefined
  /** Its answer when node's parser or timeout refused its body, written on the socket (client-error.ts), and node's code. */
  belowHttp: { readonly status: number; readonly code: string | undefined } | undefined
}

/** What every response of one gateway reads when its answer starts. */
export interface GatewayState {
  /** From `withdraw()` on (the shutdown delay, then the drain): every answer ends its connection. */
  draining: boolean
}

/**
 * The gateway's responses carry their request's record, so that the
 * forwarder's events and the close listener reach it without a per-request
 * closure or a weak map (both are garbage on the hot path).
 */
export class GatewayResponse extends ServerResponse<IncomingMessage> {
  exchange: Exchange | undefined = undefined
  /** The backend call of a payment being forwarded, told when the response closes (payment-relay.ts). */
  backendCall: BackendCall | undefined = undefined

  // Rest arguments: node also passes the server's response options, which its types leave out.
  constructor(...args: [IncomingMessage]) {
    super(...args)
    // Listened for from the start of the request, whatever step it is in: a payment whose client left is never written.
    this.on('close', onResponseClose)
  }

  /**
   * Every answer's head goes through here (`end()` without it too), so an
   * answer that starts while the gateway drains says `Connection: close` and
   * its connection ends with it. Asked here rather than by walking a registry
   * of the responses in flight when the drain starts: a Set churned by every
   * request kept those responses reachable from the old generation and made
   * every young-generation GC several times as expensive (docs/performance-history.md).
   */
  override writeHead(...args: [number, ...unknown[]]): this {
    const exchange = this.exchange
    if (exchange !== undefined) {
      if (exchange.gateway.draining) this.shouldKeepAlive = false
      withRequestId(args, exchange.requestId, exchange.rateLimitFields)
    }
    return Reflect.apply(super.writeHead, this, args) as this
  }
}

/** One listener for every response (its `this`): no closure per request. */
function onResponseClose(this: GatewayResponse): void {
  this.backendCall?.responseClosed()
}

/**
 * `writeHead`'s arguments with `X-Request-Id` added to its headers, and the RateLimit fields of a payment the
 * limit admitted, to a copy of the caller's: a relayed answer's list is also what retry protection records,
 * and a replay must carry the id of the request it answers, never the fields of the first. Headers that
 * already carry this id are the request's own (`withOwnId`): no copy.
 */
function withRequestId(args: unknown[], id: string, fields: readonly string[] | undefined): void {
  const last = args.length - 1
  const headers = args[last]
  if (Array.isArray(headers))
    args[last] =
      fields === undefined
        ? [...(headers as string[]), 'x-request-id', id]
        : [...headers, 'x-request-id', id, ...fields]
  else if (typeof headers === 'object') {
    if ((headers as OutgoingHttpHeaders)['x-request-id'] !== id || fields !== undefined)
      args[last] = withFields({ ...headers, 'x-request-id': id }, fields)
  } else args.push(withFields({ 'x-request-id': id }, fields))
}

function withFields(headers: OutgoingHttpHeaders, fields: readonly string[] | undefined): OutgoingHttpHeaders {
  if (fields !== undefined) for (let i = 0; i < fields.length; i += 2) headers[fields[i] as string] = fields[i + 1]
  return headers
}

/** Gives back the in-flight cap's place a payment holds, once: its backend call is over, or it was never forwarded. */
export function releasePlace(exchange: Exchange): void {
  const place = exchange.inFlight
  if (place === undefined) return
  exchange.inFlight = undefined
  place.leave()
}

/**
 * An answer made for this request alone (`answerOf` builds fresh headers each time) with the request's
 * id added to its own headers, so that `writeHead` need not copy them: a refusal's path is short, and a
 * copy of its headers was a visible share of it (docs/performance-history.md).
 */
export function withOwnId(answer: Answer, exchange: Exchange): Answer {
  answer.headers['x-request-id'] = exchange.requestId
  return answer
}

/** A call to the backend on behalf of one response. */
export interface BackendCall {
  /** The response closed: if its answer is not complete, the client left (docs/backend-faults.md, a client that leaves). */
  responseClosed(): void
}

export interface Recorder {
  readonly logger: Logger
  readonly metrics: Metrics | undefined
}

/** Starts the record of a request; `record` writes it out when the response closes. */
export function track(
  res: GatewayResponse,
  gateway: GatewayState,
  operation: string,
  requestId: string,
  remoteAddress: string | undefined,
): Exchange {
  const exchange: Exchange = {
    gateway,
    operation,
    requestId,
    started: performance.now(),
    remoteAddress,
    entity: undefined,
    user: undefined,
    errorName: undefined,
    backendError: undefined,
    backendErrorCode: undefined,
    droppedHeaders: undefined,
    retryProtection: undefined,
    mode: undefined,
    wouldRefuse: undefined,
    wouldRewrite: undefined,
    wouldRetryProtection: undefined,
    sendBy: undefined,
    limited: undefined,
    rateLimitFields: undefined,
    inFlight: undefined,
    span: undefined,
    backendSpan: undefined,
    belowHttp: undefined,
  }
  res.exchange = exchange
  return exchange
}

/** The log line and metrics of a closed response. */
export function record(res: GatewayResponse, exchange: Exchange, recorder: Recorder): void {
  const seconds = (performance.now() - exchange.started) / 1000
  // A response that never sent its head has no status: the client left, or the connection was cut, or was refused.
  const status = res.headersSent ? res.statusCode : (exchange.belowHttp?.status ?? 0)
  const { operation } = exchange
  recorder.metrics?.request(operation, status, exchange.errorName, seconds)
  if (exchange.backendError !== undefined) recorder.metrics?.backendError(exchange.backendError)
  if (exchange.mode !== undefined) recordReport(exchange, recorder.metrics)
  if (exchange.span !== undefined) endSpans(exchange, exchange.span, status)
  recorder.logger.info({
    method: res.req.method,
    path: res.req.url,
    requestId: exchange.requestId,
    remoteAddress: exchange.remoteAddress,
    operation,
    entity: exchange.entity,
    user: exchange.user,
    status,
    errorName: exchange.errorName,
    backendError: exchange.backendError,
    backendErrorCode: exchange.backendErrorCode,
    droppedHeaders: exchange.droppedHeaders,
    retryProtection: exchange.retryProtection,
    mode: exchange.mode,
    wouldRefuse: exchange.wouldRefuse,
    wouldRewrite: exchange.wouldRewrite,
    wouldRetryProtection: exchange.wouldRetryProtection,
    limited: exchange.limited,
    code: exchange.belowHttp?.code,
    complete: res.writableFinished,
    durationMs: Math.round(seconds * 1e4) / 10,
  })
}

/** Report mode's metrics: what enforce mode would have refused or rewritten (docs/rollout.md). */
function recordReport(exchange: Exchange, metrics: Metrics | undefined): void {
  const { operation, wouldRefuse, wouldRewrite } = exchange
  // Report mode passes on only a payment whose entity it read (docs/rollout.md).
  const entity = exchange.entity as string
  if (wouldRefuse !== undefined) metrics?.wouldRefuse(operation, wouldRefuse, entity)
  if (wouldRewrite !== undefined) for (const rewrite of wouldRewrite) metrics?.wouldRewrite(operation, rewrite, entity)
}

/** The call to the backend is over: its span ends with the backend's status, or how the call failed. */
export function backendCallDone(exchange: Exchange, status: number, fault?: BackendErrorKind): void {
  const span = exchange.backendSpan
  if (span === undefined) return
  exchange.backendSpan = undefined
  endSpan(span, { status, backendError: fault })
}

function endSpans(exchange: Exchange, span: Span, status: number): void {
  // Still open only for a path passed through, whose answer is the backend's own status, or a client gone first.
  backendCallDone(exchange, status, exchange.backendError)
  endSpan(span, {
    status,
    errorName: exchange.errorName,
    entity: exchange.entity,
    retryProtection: exchange.retryProtection,
    backendError: exchange.backendError,
  })
}
