import { randomBytes } from 'node:crypto'
import { reject, type Rejection } from '../errors.js'
import type { Policy, RateLimit } from '../policy/policy.js'
import { POLICY_FIELD, policyField, SERVICE_FIELD, serviceField } from './fields.js'

/** What counting one payment found (docs/policies.md, rate limit). */
export interface Count {
  /** Counted: fewer than the limit's payments were in the window. */
  readonly admitted: boolean
  /** The payments counted in the window now, this one included when admitted. */
  readonly counted: number
  /**
   * Milliseconds until a payment counted leaves the window: the one whose leaving admits the next payment
   * when this one was refused, the oldest (more quota) when admitted.
   */
  readonly waitMs: number
}

/**
 * Where the payments of each entity are counted: this process's memory, or the retry-protection store's
 * Redis, shared by every gateway on it. A sliding window: a payment counts for `seconds` from the moment the
 * store admitted it, by the store's own clock.
 */
export interface RateLimitStore {
  /**
   * Counts the payment `id` of `entity` when fewer than `limit.payments` were counted in the last `limit.seconds`.
   * Safe to repeat with the same `id`: a payment already counted is not counted again. Rejects (throws, or a
   * rejected promise) when the store cannot be reached; never hangs.
   */
  take(entity: string, limit: RateLimit, id: string): Count | Promise<Count>
  /** Takes the payment `id` out of the count: it was not forwarded after all. Safe to repeat. */
  refund(entity: string, id: string): void | Promise<void>
}

/** What the limit did with a payment, as the log line and the metrics name it (docs/logs-and-metrics.md). */
export type RateLimitOutcome = 'admitted' | 'limited' | 'unchecked' | 'unavailable'

/** The limit's decision on one payment of an entity whose policy has a `rateLimit`. */
export type Admission =
  /** Counted: forward it, its answer with `fields` added ([name, value, ...]); `refund` if it is not forwarded after all. */
  | { readonly outcome: 'admitted'; readonly entity: string; readonly id: string; readonly fields: readonly string[] }
  /** The store failed and `--idempotency-failure` is `open`: not limited, not counted. */
  | { readonly outcome: 'unchecked' }
  /** Over the limit (429), or the store failed and failure is `closed` (503): answer the refusal, forward nothing. */
  | { readonly outcome: 'limited' | 'unavailable'; readonly rejection: Rejection }

export interface RateLimiterOptions {
  /** When the store cannot be reached: `closed` (the default) refuses with 503, `open` lets the payment through. */
  readonly failure?: 'closed' | 'open'
  /** Told of every failure of the store. */
  readonly onError?: (error: unknown) => void
}

const UNCHECKED: Admission = Object.freeze({ outcome: 'unchecked' })
const UNAVAILABLE: Admission = Object.freeze({
  outcome: 'unavailable',
  rejection: reject('serviceUnavailable', {
    message:
      'The rate limit cannot be checked, its store being unavailable, so the payment was not forwarded. Retry later.',
  }),
})

/** Whole seconds, at least 1, never before the moment (RFC 9110 10.2.3, delay-seconds). */
const secondsOf = (ms: number) => Math.max(1, Math.ceil(ms / 1000))

/**
 * The rate limit of docs/policies.md on one store, with the store's failure mode: the one check the proxy and
 * the middleware surfaces run on a payment that passed checks 1 to 13, after retry protection's look-up. A
 * payment refused here was never claimed, so its retry is a new payment.
 */
export class RateLimiter {
  readonly store: RateLimitStore
  readonly #failOpen: boolean
  readonly #onError: ((error: unknown) => void) | undefined
  /** The ids of this process's payments: a random prefix, then a count (a store shared by a fleet tells them apart). */
  readonly #prefix = `${randomBytes(6).toString('base64url')}.`
  #counted = 0

  constructor(store: RateLimitStore, options: RateLimiterOptions = {}) {
    this.store = store
    this.#failOpen = options.failure === 'open'
    this.#onError = options.onError
  }

  /** Counts a payment of `entity` under its policy's limit; undefined when the policy has none. Never rejects. */
  admit(entity: string, policy: Policy): Admission | Promise<Admission> | undefined {
    const limit = policy.rateLimit
    if (limit === undefined) return undefined
    const id = this.#prefix + (++this.#counted).toString(36)
    let count: Count | Promise<Count>
    try {
      count = this.store.take(entity, limit, id)
    } catch (error) {
      return this.#failed(error, entity, id)
    }
    return count instanceof Promise
      ? count.then(
          (found) => decide(entity, policy, limit, id, found),
          (error: unknown) => this.#failed(error, entity, id),
        )
      : decide(entity, policy, limit, id, count)
  }

  /** Takes an admitted payment out of the count: it was not forwarded (a copy of it won its claim). */
  refund(admission: Admission): void {
    if (admission.outcome === 'admitted') this.#refund(admission.entity, admission.id)
  }

  #refund(entity: string, id: string): void {
    try {
      const refunded = this.store.refund(entity, id)
      if (refunded instanceof Promise) refunded.catch((error: unknown) => this.#onError?.(error))
    } catch (error) {
      this.#onError?.(error)
    }
  }

  /** A count that failed, or timed out and may have landed: taken back, and the failure mode decides. */
  #failed(error: unknown, entity: string, id: string): Admission {
    this.#onError?.(error)
    this.#refund(entity, id)
    return this.#failOpen ? UNCHECKED : UNAVAILABLE
  }
}

function decide(entity: string, policy: Policy, limit: RateLimit, id: string, count: Count): Admission {
  const seconds = secondsOf(count.waitMs)
  const policyValue = policyField(policy, limit)
  if (count.admitted) {
    const remaining = Math.max(0, limit.payments - count.counted)
    const fields = [POLICY_FIELD, policyValue, SERVICE_FIELD, serviceField(policy, limit, remaining, seconds)]
    return { outcome: 'admitted', entity, id, fields }
  }
  return {
    outcome: 'limited',
    rejection: reject('requestRateIsTooHigh', {
      message: `This merchant entity's rate limit (${limit.payments} payments in ${limit.seconds} seconds) is reached, so this request was not forwarded and claimed nothing under its transactionReference. Send it again, unchanged, after the time given in Retry-After.`,
      headers: {
        'Retry-After': String(seconds),
        [POLICY_FIELD]: policyValue,
        [SERVICE_FIELD]: serviceField(policy, limit, 0, seconds),
      },
    }),
  }
}
