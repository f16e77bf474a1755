import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from '../log.js'
import type { BackendErrorKind, Metrics } from '../metrics.js'

/**
 * What is known about one request as it goes through the gateway, filled in
 * along the way and written out once, as one log line and its metrics, when
 * its answer is over.
 */
export interface Exchange {
  /** `sale`, `recurring`, or `other` for a path passed through. */
  readonly operation: string
  entity?: string
  user?: string
  errorName?: string
  backendError?: BackendErrorKind
}

export interface Recorder {
  readonly logger: Logger
  readonly metrics: Metrics | undefined
}

/** Starts the record of a request; the log line and metrics follow when the response closes. */
export function track(req: IncomingMessage, res: ServerResponse, operation: string, recorder: Recorder): Exchange {
  const started = performance.now()
  const exchange: Exchange = { operation }
  res.once('close', () => {
    const seconds = (performance.now() - started) / 1000
    // A response that never sent its head has no status: the client left, or the connection was cut.
    const status = res.headersSent ? res.statusCode : 0
    recorder.metrics?.request(operation, status, exchange.errorName, seconds)
    if (exchange.backendError !== undefined) recorder.metrics?.backendError(exchange.backendError)
    recorder.logger.info({
      method: req.method,
      path: req.url,
      operation,
      entity: exchange.entity,
      user: exchange.user,
      status,
      errorName: exchange.errorName,
      backendError: exchange.backendError,
      complete: res.writableFinished,
      durationMs: Math.round(seconds * 1e4) / 10,
    })
  })
  return exchange
}
