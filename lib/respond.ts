import type { ServerResponse } from 'node:http'
import { ERROR_CONTENT_TYPE, reject, serializeError, type ErrorName, type Rejection, type RejectOptions } from './errors.js'

/**
 * Answers a refusal: status, the rejection's own headers, the error body from
 * the one serializer. `close` ends the connection after the answer, for a
 * refusal whose body was not (or not wholly) read, so that the rest of it is
 * not read on a keep-alive connection.
 */
export function sendRejection(res: ServerResponse, rejection: Rejection, close = false): void {
  if (res.headersSent) {
    // Too late for a status: cutting the connection is the only honest answer.
    res.destroy()
    return
  }
  const payload = serializeError(rejection.body)
  res.statusCode = rejection.status
  res.setHeader('content-type', ERROR_CONTENT_TYPE)
  res.setHeader('content-length', Buffer.byteLength(payload))
  if (rejection.headers !== undefined) {
    for (const name of Object.keys(rejection.headers)) res.setHeader(name, rejection.headers[name] as string)
  }
  if (close) res.setHeader('connection', 'close')
  res.end(payload)
}

/**
 * For a service's own code: answer any error of the table in the standard
 * format, e.g. `sendError(res, 'entityIsNotConfigured')`.
 */
export function sendError(res: ServerResponse, errorName: ErrorName, options?: RejectOptions): void {
  sendRejection(res, reject(errorName, options))
}
