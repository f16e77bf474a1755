import { reject, type Rejection } from '../errors.js'
import { answerOf, writeAnswer } from '../http/answer.js'
import { RedisIdempotencyStore } from '../idempotency/redis.js'
import type { IdempotencyStore } from '../idempotency/store.js'
import type { Metrics, RetryProtectionOutcome } from '../metrics.js'
import type { Policy } from '../policy/policy.js'
import { RateLimiter, type Admission, type RateLimiterOptions } from '../rate-limit/limiter.js'
import { MemoryRateLimitStore } from '../rate-limit/memory.js'
import { RedisRateLimitStore } from '../rate-limit/redis.js'
import type { Exchange, GatewayResponse } from './exchange.js'
import type { BackendOutcome } from './forward.js'
import type { Guard, ProtectedPayment, RetryProtection } from './retry-protection.js'

/**
 * The rate limit counted where retry protection keeps its keys (docs/policies.md, rate limit): in its Redis,
 * shared by every gateway on it; in this process for `memory`, `off` and a store of your own.
 */
export function rateLimiterOf(store: IdempotencyStore | undefined, options: RateLimiterOptions): RateLimiter {
  const counts =
    store instanceof RedisIdempotencyStore ? new RedisRateLimitStore(store.redis) : new MemoryRateLimitStore()
  return new RateLimiter(counts, options)
}

/** A claim made for a payment the limit then refused: never forwarded, so its key is released. */
const NOT_FORWARDED: BackendOutcome = Object.freeze({ kind: 'refused' })

/** What a payment of an entity with a rate limit gets: retry protection's decision, the limit's, or both. */
export interface LimitedGuard {
  /** Retry protection's decision; undefined when the limit refused the payment (nothing claimed). */
  readonly guard: Guard | undefined
  /** The limit's; undefined for a payment retry protection answers, or one its policy refused: neither counted. */
  readonly admission: Admission | undefined
}

/** What retry protection's look finds for a retry it answers itself: such a payment is neither counted nor limited. */
export const ANSWERED: ReadonlySet<RetryProtectionOutcome | undefined> = new Set([
  'inProgress',
  'replayed',
  'alreadyUsed',
  'unknownKey',
])

const refused = (admission: Admission) => admission.outcome === 'limited' || admission.outcome === 'unavailable'

/**
 * Retry protection's look-up, then the limit, then the claim (docs/checks.md, where the limit sits). A payment
 * whose key is free is counted before it is claimed, so that a payment the limit refuses is never claimed, even
 * while a copy of it is in flight: nothing is written under its key, and its retry after `Retry-After` is a new
 * payment. A copy that claimed the key first wins: the count is given back, and the payment gets what retry
 * protection answers (409, or the replay). A key that is not free (a retry), or a store that cannot look
 * without claiming, is claimed first, and counted only when the claim says to forward: a limit that then
 * refuses releases it at once. `passed` is whether its policy passed it: a refused one is not counted.
 */
export async function guardWithLimit(
  protection: RetryProtection,
  limiter: RateLimiter,
  payment: ProtectedPayment,
  policy: Policy,
  passed: boolean,
): Promise<LimitedGuard> {
  if (passed) {
    const look = await protection.inspect(payment)
    if (look !== undefined && !ANSWERED.has(look)) {
      const admission = (await limiter.admit(payment.entity, policy)) as Admission
      if (refused(admission)) return { guard: undefined, admission }
      const guard = await protection.guard(payment)
      if (guard.kind === 'forward') return { guard, admission }
      limiter.refund(admission)
      return { guard, admission: undefined }
    }
  }
  const guard = await protection.guard(payment)
  if (!passed || guard.kind !== 'forward') return { guard, admission: undefined }
  const admission = (await limiter.admit(payment.entity, policy)) as Admission
  if (!refused(admission)) return { guard, admission }
  if (guard.ticket !== undefined) protection.settle(guard.ticket, NOT_FORWARDED)
  return { guard: undefined, admission }
}

/**
 * Applies the limit's decision to a payment about to be forwarded: its answer will carry the RateLimit fields
 * (exchange.ts), or the refusal is answered now. Counted per entity, and logged (`limited: "rateLimited"`).
 * True when the payment goes on.
 */
export function admitted(
  res: GatewayResponse,
  exchange: Exchange,
  entity: string,
  admission: Admission,
  metrics: Metrics | undefined,
): boolean {
  metrics?.rateLimit(entity, admission.outcome)
  if (admission.outcome === 'admitted') exchange.rateLimitFields = admission.fields
  if (!refused(admission)) return true
  const { rejection } = admission as { rejection: Rejection }
  if (admission.outcome === 'limited') exchange.limited = 'rateLimited'
  exchange.errorName = rejection.body.errorName
  writeAnswer(res, answerOf(rejection))
  return false
}

/**
 * Report mode (docs/rollout.md): the payment is counted, as enforce mode would count it, unless retry
 * protection would answer it itself; over the limit it is reported (`wouldRefuse: "requestRateIsTooHigh"`),
 * never refused, and a store that fails refuses nothing either. This writes to the store, where report
 * mode's retry protection only looks.
 */
export async function reportLimit(
  limiter: RateLimiter,
  exchange: Exchange,
  entity: string,
  policy: Policy,
  metrics: Metrics | undefined,
): Promise<void> {
  if (ANSWERED.has(exchange.wouldRetryProtection)) return
  const admission = (await limiter.admit(entity, policy)) as Admission
  const { outcome } = admission
  if (outcome === 'limited') exchange.wouldRefuse = 'requestRateIsTooHigh'
  metrics?.rateLimit(entity, outcome === 'limited' ? 'reported' : outcome === 'unavailable' ? 'unchecked' : outcome)
}

/** The in-flight cap's refusal: nothing was kept claimed, counted or written (docs/deployment-reference.md, backend protection). */
export const SHED: Rejection = Object.freeze(
  reject('serviceUnavailable', {
    message:
      'The gateway is forwarding as many payments as it may at once, so this one was not forwarded. Retry after the time given in Retry-After.',
    headers: { 'Retry-After': '1' },
  }),
)
