import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Rejection } from '../../errors.js'
import { sendRejection } from '../../http/answer.js'
import type { Exchange } from './exchange.js'
import { faultAnswer, isErrorFormat, standardServerError } from './faults.js'
import { responseHeaders } from './hop-by-hop.js'

/**
 * Passes the backend's answer to the client: status, headers and body
 * streamed unchanged, except a 5xx, which is read first (up to `errorBodyLimit`
 * bytes) so that a body not in the error format can be replaced.
 */
export function relay(proxyRes: IncomingMessage, res: ServerResponse, exchange: Exchange, errorBodyLimit: number): void {
  const status = proxyRes.statusCode as number
  if (status >= 500) {
    exchange.backendError = 'serverError'
    inspectServerError(proxyRes, res, exchange, errorBodyLimit)
    return
  }
  res.writeHead(status, proxyRes.statusMessage, responseHeaders(proxyRes))
  proxyRes.on('error', () => {
    // The status is out: only a cut connection tells the client the answer is incomplete.
    if (res.destroyed) return
    exchange.backendError = 'reset'
    res.destroy()
  })
  proxyRes.pipe(res)
}

function inspectServerError(proxyRes: IncomingMessage, res: ServerResponse, exchange: Exchange, limit: number): void {
  const status = proxyRes.statusCode as number
  const chunks: Buffer[] = []
  let size = 0
  proxyRes.on('data', (chunk: Buffer) => {
    size += chunk.length
    if (size <= limit) chunks.push(chunk)
  })
  proxyRes.on('error', () => {
    // Nothing has gone to the client yet, so the reset can still be told as a 500.
    exchange.backendError = 'reset'
    exchange.errorName = 'internalErrorOccurred'
    sendRejection(res, faultAnswer('reset'))
  })
  proxyRes.on('end', () => {
    const body = Buffer.concat(chunks)
    if (size <= limit && isErrorFormat(body)) {
      res.writeHead(status, proxyRes.statusMessage, responseHeaders(proxyRes, body.length))
      res.end(body)
      return
    }
    const standard = standardServerError(status)
    exchange.errorName = standard.body.errorName
    sendRejection(res, retryAfter(standard, proxyRes.headers['retry-after']))
  })
}

/** A backend's `Retry-After` on its 503 still tells the client when to come back. */
function retryAfter(rejection: Rejection, value: string | undefined): Rejection {
  return value === undefined ? rejection : { ...rejection, headers: { 'Retry-After': value } }
}
