import type { Passed } from '../checks/index.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { reject, type Rejection } from '../errors.js'
import { answerOf, flatHeaders, type Answer } from '../http/answer.js'
import type { RetryProtectionOutcome } from '../metrics.js'
import type { BackendOutcome } from '../surfaces/proxy/forward.js'
import { faultAnswer } from '../surfaces/proxy/faults.js'
import { fingerprint } from './fingerprint.js'
import { idempotencyKey } from './key.js'
import type { Claim, IdempotencyStore, RecordedAnswer } from './store.js'

/** A claimed key: what `settle` needs to record or release it once the backend's outcome is known. */
export interface Ticket {
  readonly key: string
  readonly token: string
}

/** What retry protection decided for one payment that passed every check (docs/idempotency.md). */
export type Guard = (
  /** Forward it; settle the ticket with the outcome. No ticket: forward unprotected (the store failed, failure `open`). */
  | { readonly kind: 'forward'; readonly ticket: Ticket | undefined }
  /** Answer this refusal: 409 in flight, 422 another payment, 503 the store failed (failure `closed`). */
  | { readonly kind: 'refuse'; readonly rejection: Rejection }
  /** Replay the recorded answer. */
  | { readonly kind: 'replay'; readonly answer: RecordedAnswer }
) & {
  /** The decision, as the log line and the metrics name it. */
  readonly outcome: RetryProtectionOutcome
}

export interface RetryProtectionOptions {
  readonly store: IdempotencyStore
  /** `closed` (default): refuse with 503 when the store cannot be reached; `open`: forward unprotected. */
  readonly failure?: 'closed' | 'open'
  /** Told of every store failure, so it can be logged and counted. */
  readonly onStoreError?: (error: unknown) => void
}

/** Retry protection as the proxy runs it: guard before forwarding, settle after. */
export interface RetryProtection {
  guard(passed: Passed, payload: Buffer): Guard | Promise<Guard>
  /** Records or releases the ticket's key as the outcome says; store failures go to `onStoreError`, never thrown. */
  settle(ticket: Ticket, outcome: BackendOutcome): void
  close(): Promise<void>
}

const UNPROTECTED: Guard = Object.freeze({ kind: 'forward', ticket: undefined, outcome: 'unprotected' })
const IN_PROGRESS: Guard = Object.freeze({
  kind: 'refuse',
  rejection: reject('paymentIsInProgress', { headers: { 'Retry-After': String(IDEMPOTENCY_DEFAULTS.retryAfterSeconds) } }),
  outcome: 'inProgress',
})
const ALREADY_USED: Guard = Object.freeze({ kind: 'refuse', rejection: reject('transactionReferenceIsAlreadyUsed'), outcome: 'alreadyUsed' })
const STORE_UNAVAILABLE: Guard = Object.freeze({
  kind: 'refuse',
  rejection: reject('serviceUnavailable', { message: 'Retry protection is unavailable, so the payment was not forwarded. Retry later.' }),
  outcome: 'storeUnavailable',
})

/** A refusal as an answer to record: what the client got. */
function recorded(answer: Answer): RecordedAnswer {
  return { status: answer.status, headers: flatHeaders(answer), body: answer.body }
}

/** Recorded instead of a backend answer too large to keep: the payment happened, its answer cannot be replayed. */
export const OVERSIZED_ANSWER = recorded(
  answerOf(
    reject('transactionReferenceIsAlreadyUsed', {
      message: 'This transactionReference was already used: its payment was processed, but the answer was too large to keep for replay.',
    }),
  ),
)

/** What the client got when the backend timed out or reset: the outcome is unknown, so this is what a retry gets; also what a claim left without an answer becomes. */
export const UNKNOWN_OUTCOME = recorded(answerOf(faultAnswer('timeout')))

/**
 * Whether an outcome frees the key for a retry: the backend refused the
 * request (4xx: the client fixes it and retries), said it is unavailable
 * (503), or was never reached. Anything else may have moved money, so it is
 * recorded and replayed, never forwarded again.
 */
function releases(outcome: BackendOutcome): boolean {
  if (outcome.kind === 'refused') return true
  if (outcome.kind !== 'answered') return false
  return (outcome.status >= 400 && outcome.status < 500) || outcome.status === 503
}

/** The backend's answer as the client got it, or the stand-in when the forwarder did not keep its body. */
function answerToKeep({ status, headers, body }: { status: number; headers: readonly string[]; body: Buffer | undefined }): RecordedAnswer {
  return body === undefined ? OVERSIZED_ANSWER : { status, headers, body }
}

export function createRetryProtection(options: RetryProtectionOptions): RetryProtection {
  const { store } = options
  const failOpen = options.failure === 'open'
  const onStoreError = options.onStoreError

  function decide(key: string, claim: Claim): Guard {
    switch (claim.state) {
      case 'claimed':
        return { kind: 'forward', ticket: { key, token: claim.token }, outcome: 'claimed' }
      case 'inFlight':
        return IN_PROGRESS
      case 'mismatch':
        return ALREADY_USED
      default:
        return { kind: 'replay', answer: claim.answer, outcome: 'replayed' }
    }
  }

  function failed(error: unknown): Guard {
    onStoreError?.(error)
    return failOpen ? UNPROTECTED : STORE_UNAVAILABLE
  }

  function settled(result: void | Promise<void>): void {
    if (result instanceof Promise) result.catch(failedQuietly)
  }
  const failedQuietly = (error: unknown) => onStoreError?.(error)

  return {
    guard(passed, payload) {
      const key = idempotencyKey(passed.entity, passed.document.transactionReference)
      let claim: Claim | Promise<Claim>
      try {
        claim = store.claim(key, fingerprint(passed.operation, payload))
      } catch (error) {
        return failed(error)
      }
      return claim instanceof Promise ? claim.then((found) => decide(key, found), failed) : decide(key, claim)
    },
    settle(ticket, outcome) {
      try {
        if (releases(outcome)) settled(store.release(ticket.key, ticket.token))
        else if (outcome.kind !== 'answered') settled(store.record(ticket.key, ticket.token, UNKNOWN_OUTCOME))
        else settled(store.record(ticket.key, ticket.token, answerToKeep(outcome)))
      } catch (error) {
        failedQuietly(error)
      }
    },
    close: () => store.close(),
  }
}
