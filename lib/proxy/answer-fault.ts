import { STATUS_CODES, type ServerResponse } from 'node:http'
import { sendRejection } from '../http/answer.js'
import { backendCallDone, type Exchange } from './exchange.js'
import { faultAnswer, retriesOf, type FaultKind } from './faults.js'

/**
 * Tells the client that the backend failed, and the record why: 503 or 500
 * (docs/backend-faults.md; a payment's 500 says its outcome is unknown) while
 * nothing of an answer has gone out, else a cut connection (sendRejection),
 * the only honest end of a truncated answer.
 * `error`: what failed, its code logged (docs/logs-and-metrics.md).
 */
export function answerFault(res: ServerResponse, exchange: Exchange, kind: FaultKind, error?: Error): void {
  exchange.backendError = kind
  exchange.backendErrorCode = codeOf(error)
  backendCallDone(exchange, 0, kind)
  // A path passed through is no payment: the table's 500.
  const answer = faultAnswer(kind, exchange.operation === 'other' ? undefined : retriesOf(exchange))
  if (!res.headersSent) exchange.errorName = answer.body.errorName
  // A head node refused to write (a relay's, with something of the backend's in it) leaves its reason
  // on the response, which node would refuse again: the client would get no answer at all.
  res.statusMessage = STATUS_CODES[answer.status] as string
  sendRejection(res, answer)
}

/** What failed, for the log line: its code, else its class (undici's HTTP parser errors lose their code: `HTTPParserError`). */
function codeOf(error: Error | undefined): string | undefined {
  if (error === undefined) return undefined
  return (error as NodeJS.ErrnoException).code ?? (error.name === 'Error' ? undefined : error.name)
}
