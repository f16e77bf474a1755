import type { IncomingMessage, ServerResponse } from 'node:http'
import { NO_RULES } from '../backend-errors/rules.js'
import { CodedError } from '../coded-error.js'
import { answerFault } from './answer-fault.js'
import { clientAnswer, inspected, reasonOf } from './backend-answer.js'
import { reasonPhrase } from './backend-head.js'
import { BoundedBody } from './bounded-body.js'
import type { Exchange } from './exchange.js'
import { relayedHeaders } from './hop-by-hop.js'

/**
 * Passes the backend's answer to a request passed through to the client:
 * status, headers and body streamed unchanged, except a 5xx, which is read
 * first (up to `errorBodyLimit` bytes) and answered as backend-answer.ts
 * decides. The rules of `--backend-errors` are for the two operations, whose
 * relay is payment-relay.ts: here a 5xx gets its name by status. A reason
 * phrase node would refuse to write is left out (backend-head.ts).
 */
export function relay(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  exchange: Exchange,
  errorBodyLimit: number,
): void {
  guarded(proxyRes, res, exchange, () => start(proxyRes, res, exchange, errorBodyLimit))
}

/**
 * Runs a step of the relay inside http-proxy-3's events, where a throw would end the process: whatever
 * the backend sent that still makes node throw (a status below 100, which node's client passes on) is answered as a broken answer (a 500 before the head
 * went out, a cut connection after it: docs/backend-faults.md), never a crash.
 */
function guarded(proxyRes: IncomingMessage, res: ServerResponse, exchange: Exchange, step: () => void): void {
  try {
    step()
  } catch (error) {
    // The rest of that answer is not read: its connection goes, it cannot carry another request.
    proxyRes.destroy()
    answerFault(res, exchange, 'reset', error as Error)
  }
}

function start(proxyRes: IncomingMessage, res: ServerResponse, exchange: Exchange, errorBodyLimit: number): void {
  const status = proxyRes.statusCode as number
  // node's client hands other 1xx answers on as information, a 101 without `Upgrade` as the final answer: a broken one.
  if (status < 200) throw new CodedError('EBACKENDUPGRADE', `the backend answered ${status} as its final answer`)
  if (status >= 500) exchange.backendError = 'serverError'
  // No header filter here: node's client parser refuses every header writeHead would (backend-head.ts).
  const raw = proxyRes.rawHeaders
  const reason = reasonPhrase(proxyRes.statusMessage)
  // Report mode passes the backend's answer as it came (docs/rollout.md).
  if (inspected(status, false) && exchange.mode !== 'report') {
    inspect(proxyRes, res, exchange, errorBodyLimit, raw, reason)
    return
  }
  res.writeHead(status, reason, relayedHeaders(raw, undefined, status === 204))
  proxyRes.on('error', () => {
    // The status is out: only a cut connection tells the client the answer is incomplete.
    if (res.destroyed) return
    exchange.backendError = 'reset'
    res.destroy()
  })
  proxyRes.pipe(res)
}

function inspect(
  proxyRes: IncomingMessage,
  res: ServerResponse,
  exchange: Exchange,
  limit: number,
  raw: string[],
  reason: string | undefined,
): void {
  const body = new BoundedBody(limit)
  proxyRes.on('data', (chunk: Buffer) => body.add(chunk))
  // Nothing has gone to the client yet, so the reset can still be told as a 500.
  proxyRes.on('error', () => answerFault(res, exchange, 'reset'))
  proxyRes.on('end', () =>
    guarded(proxyRes, res, exchange, () => {
      const answer = clientAnswer(proxyRes.statusCode as number, raw, body.bytes(), NO_RULES)
      if (answer.errorName !== undefined) exchange.errorName = answer.errorName
      res.writeHead(answer.status, reasonOf(answer, proxyRes.statusCode as number, reason), answer.headers)
      res.end(answer.body)
    }),
  )
}
