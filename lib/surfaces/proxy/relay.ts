import type { IncomingMessage, ServerResponse } from 'node:http'
import { sendRejection } from '../../http/answer.js'
import { answerFault } from './answer-fault.js'
import { BoundedBody } from './bounded-body.js'
import type { Exchange } from './exchange.js'
import { serverErrorReplacement } from './faults.js'
import { relayedHeaders } from './hop-by-hop.js'

/**
 * Passes the backend's answer to a request passed through to the client:
 * status, headers and body streamed unchanged, except a 5xx, which is read
 * first (up to `errorBodyLimit` bytes) so that a body not in the error format
 * can be replaced. Payments have their own relay, on undici's callbacks
 * (payment-relay.ts), with the same rules.
 */
export function relay(proxyRes: IncomingMessage, res: ServerResponse, exchange: Exchange, errorBodyLimit: number): void {
  const status = proxyRes.statusCode as number
  // Report mode passes the backend's answer as it came (docs/rollout.md).
  if (status >= 500 && exchange.mode !== 'report') {
    exchange.backendError = 'serverError'
    inspectServerError(proxyRes, res, exchange, errorBodyLimit)
    return
  }
  res.writeHead(status, proxyRes.statusMessage, relayedHeaders(proxyRes.rawHeaders))
  proxyRes.on('error', () => {
    // The status is out: only a cut connection tells the client the answer is incomplete.
    if (res.destroyed) return
    exchange.backendError = 'reset'
    res.destroy()
  })
  proxyRes.pipe(res)
}

function inspectServerError(proxyRes: IncomingMessage, res: ServerResponse, exchange: Exchange, limit: number): void {
  const body = new BoundedBody(limit)
  proxyRes.on('data', (chunk: Buffer) => body.add(chunk))
  // Nothing has gone to the client yet, so the reset can still be told as a 500.
  proxyRes.on('error', () => answerFault(res, exchange, 'reset'))
  proxyRes.on('end', () => {
    const bytes = body.bytes()
    const replacement = serverErrorReplacement(proxyRes.statusCode as number, bytes, proxyRes.headers['retry-after'])
    if (replacement === undefined) {
      const passed = bytes as Buffer
      res.writeHead(proxyRes.statusCode as number, proxyRes.statusMessage, relayedHeaders(proxyRes.rawHeaders, passed.length))
      res.end(passed)
      return
    }
    exchange.errorName = replacement.body.errorName
    sendRejection(res, replacement)
  })
}
