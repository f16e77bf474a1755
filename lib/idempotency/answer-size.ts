import type { IdempotencyStoreOptions, RecordedAnswer } from './store.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'

/** The bytes of a flat header list: every name and value. */
export function headerBytes(headers: readonly string[]): number {
  let bytes = 0
  for (const item of headers) bytes += Buffer.byteLength(item)
  return bytes
}

/**
 * The one measure of an answer against the one limit (`maxAnswerBytes`): its
 * body and every header name and value. The relay stops keeping a body by it
 * (payment-relay.ts), the store refuses to hold more by it.
 */
export function answerBytes(answer: RecordedAnswer): number {
  return answer.body.length + headerBytes(answer.headers)
}

/**
 * The answer to keep: the backend's, or the configured stand-in when the
 * backend's is over the bound, so a store never holds more than it promised
 * (docs/idempotency-reference.md, what is stored).
 */
export function keptAnswer(answer: RecordedAnswer, options: IdempotencyStoreOptions): RecordedAnswer {
  const max = options.maxAnswerBytes ?? IDEMPOTENCY_DEFAULTS.maxAnswerBytes
  return answerBytes(answer) > max ? options.oversizedAnswer : answer
}
