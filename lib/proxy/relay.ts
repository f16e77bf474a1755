import type { IncomingMessage, ServerResponse } from 'node:http'
import { NO_RULES } from '../backend-errors/rules.js'
import { answerFault } from './answer-fault.js'
import { clientAnswer, inspected } from './backend-answer.js'
import { BoundedBody } from './bounded-body.js'
import type { Exchange } from './exchange.js'
import { relayedHeaders } from './hop-by-hop.js'

/**
 * Passes the backend's answer to a request passed through to the client:
 * status, headers and body streamed unchanged, except a 5xx, which is read
 * first (up to `errorBodyLimit` bytes) and answered as backend-answer.ts
 * decides. The rules of `--backend-errors` are for the two operations, whose
 * relay is payment-relay.ts: here a 5xx gets its name by status.
 */
export function relay(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  exchange: Exchange,
  errorBodyLimit: number,
): void {
  const status = proxyRes.statusCode as number
  if (status >= 500) exchange.backendError = 'serverError'
  // Report mode passes the backend's answer as it came (docs/rollout.md).
  if (inspected(status, false) && exchange.mode !== 'report') {
    inspect(proxyRes, res, exchange, errorBodyLimit)
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

function inspect(proxyRes: IncomingMessage, res: ServerResponse, exchange: Exchange, limit: number): void {
  const body = new BoundedBody(limit)
  proxyRes.on('data', (chunk: Buffer) => body.add(chunk))
  // Nothing has gone to the client yet, so the reset can still be told as a 500.
  proxyRes.on('error', () => answerFault(res, exchange, 'reset'))
  proxyRes.on('end', () => {
    const answer = clientAnswer(proxyRes.statusCode as number, proxyRes.rawHeaders, body.bytes(), NO_RULES)
    if (answer.errorName !== undefined) exchange.errorName = answer.errorName
    res.writeHead(answer.status, proxyRes.statusMessage, answer.headers)
    res.end(answer.body)
  })
}
