import type { IdempotencyStoreOptions, RecordedAnswer } from './store.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'

/** The bytes an answer holds: its body and every header name and value. */
export function answerBytes(answer: RecordedAnswer): number {
  let bytes = answer.body.length
  for (const item of answer.headers) bytes += Buffer.byteLength(item)
  return bytes
}

/**
 * The answer to keep: the backend's, or the configured stand-in when the
 * backend's is over the bound, so a store never holds more than it promised
 * (docs/idempotency.md, what is stored).
 */
export function keptAnswer(answer: RecordedAnswer, options: IdempotencyStoreOptions): RecordedAnswer {
  const max = options.maxAnswerBytes ?? IDEMPOTENCY_DEFAULTS.maxAnswerBytes
  return answerBytes(answer) > max ? options.oversizedAnswer : answer
}
