import { ServerResponse, type IncomingMessage } from 'node:http'
import type { Logger } from '../../log.js'
import type { BackendErrorKind, Metrics, RetryProtectionOutcome } from '../../metrics.js'

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
  readonly started: number
  entity: string | undefined
  user: string | undefined
  errorName: string | undefined
  backendError: BackendErrorKind | undefined
  /** What retry protection did with a payment that passed every check. */
  retryProtection: RetryProtectionOutcome | undefined
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

  /**
   * Every answer's head goes through here (`end()` without it too), so an
   * answer that starts while the gateway drains says `Connection: close` and
   * its connection ends with it. Asked here rather than by walking a registry
   * of the responses in flight when the drain starts: a Set churned by every
   * request kept those responses reachable from the old generation and made
   * every young-generation GC several times as expensive (docs/performance.md).
   */
  override writeHead(...args: [number, ...unknown[]]): this {
    if (this.exchange?.gateway.draining === true) this.shouldKeepAlive = false
    return Reflect.apply(super.writeHead, this, args) as this
  }
}

/** A call to the backend on behalf of one response. */
export interface BackendCall {
  /** The response closed: if its answer is not complete, the client left and the call stops. */
  responseClosed(): void
}

export interface Recorder {
  readonly logger: Logger
  readonly metrics: Metrics | undefined
}

/** Starts the record of a request; `record` writes it out when the response closes. */
export function track(res: GatewayResponse, gateway: GatewayState, operation: string): Exchange {
  const exchange: Exchange = { gateway, operation, started: performance.now(), entity: undefined, user: undefined, errorName: undefined, backendError: undefined, retryProtection: undefined }
  res.exchange = exchange
  return exchange
}

/** The log line and metrics of a closed response. */
export function record(res: GatewayResponse, exchange: Exchange, recorder: Recorder): void {
  const seconds = (performance.now() - exchange.started) / 1000
  // A response that never sent its head has no status: the client left, or the connection was cut.
  const status = res.headersSent ? res.statusCode : 0
  const { operation } = exchange
  recorder.metrics?.request(operation, status, exchange.errorName, seconds)
  if (exchange.backendError !== undefined) recorder.metrics?.backendError(exchange.backendError)
  recorder.logger.info({
    method: res.req.method,
    path: res.req.url,
    operation,
    entity: exchange.entity,
    user: exchange.user,
    status,
    errorName: exchange.errorName,
    backendError: exchange.backendError,
    retryProtection: exchange.retryProtection,
    complete: res.writableFinished,
    durationMs: Math.round(seconds * 1e4) / 10,
  })
}
