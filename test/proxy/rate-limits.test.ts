// Retry protection's look-up, the limit and the claim, in their order (lib/proxy/rate-limits.ts), on the real
// memory stores: the races a fleet meets, made to happen in one process by where the steps wait.
import t from 'tap'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import type { IdempotencyStore } from '../../lib/idempotency/store.js'
import { guardWithLimit } from '../../lib/proxy/rate-limits.js'
import { createRetryProtection, protectedPayment, type Guard } from '../../lib/proxy/retry-protection.js'
import { RateLimiter, type Count, type RateLimitStore } from '../../lib/rate-limit/limiter.js'
import { MemoryRateLimitStore } from '../../lib/rate-limit/memory.js'
import { FINGERPRINT_KEY, policy, saleBody } from '../helpers/fixtures.js'
import { OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'

const shop = policy({ rateLimit: { payments: 1, seconds: 60 } })
const payment = (reference: string) => {
  const document = saleBody({ transactionReference: reference }) as never
  return protectedPayment('sale', 'default', document, document)
}

function memoryStore(): MemoryIdempotencyStore {
  return new MemoryIdempotencyStore({
    ttlMs: 60_000,
    inFlightMs: 60_000,
    oversizedAnswer: OVERSIZED,
    unknownAnswer: UNKNOWN,
  })
}

const REFUSED = { kind: 'refused' } as const

t.test('a copy that claims the key while the payment is being counted wins; the count is given back', async (t) => {
  const protection = createRetryProtection(memoryStore(), { idempotencyFingerprintKey: FINGERPRINT_KEY })
  const counts = new MemoryRateLimitStore()
  let copy: Guard | undefined
  // The count waits for a turn, in which the copy, already counted, claims the key.
  const slow: RateLimitStore = {
    take: async (entity, limit, id): Promise<Count> => {
      copy ??= protection.guard(payment('race-1')) as Guard
      return counts.take(entity, limit, id)
    },
    refund: (entity, id) => counts.refund(entity, id),
  }
  const limiter = new RateLimiter(slow)
  const raced = await guardWithLimit(
    protection,
    limiter,
    payment('race-1'),
    policy({ rateLimit: { payments: 2, seconds: 60 } }),
    true,
  )
  t.equal(copy?.kind, 'forward', 'the copy claimed it')
  t.match(raced, { guard: { kind: 'refuse', outcome: 'inProgress' }, admission: undefined }, '409, not counted')
  t.match(counts.take('default', { payments: 2, seconds: 60 }, 'next'), { admitted: true, counted: 1 }, 'given back')
})

t.test('a store that cannot look without claiming: claimed first, released when the limit refuses', async (t) => {
  const memory = memoryStore()
  // Without peek: as a store of your own may be.
  const blind: IdempotencyStore = {
    claim: (key, fingerprint, matches) => memory.claim(key, fingerprint, matches),
    record: (key, token, answer) => memory.record(key, token, answer),
    release: (key, token) => memory.release(key, token),
    close: () => memory.close(),
  }
  const protection = createRetryProtection(blind, { idempotencyFingerprintKey: FINGERPRINT_KEY })
  const limiter = new RateLimiter(new MemoryRateLimitStore())
  const first = await guardWithLimit(protection, limiter, payment('blind-1'), shop, true)
  t.match(first, { guard: { kind: 'forward' }, admission: { outcome: 'admitted' } })
  const second = await guardWithLimit(protection, limiter, payment('blind-2'), shop, true)
  t.match(second, { guard: undefined, admission: { outcome: 'limited' } })
  t.match(memory.claim(JSON.stringify(['default', 'blind-2']), 'x'), { state: 'claimed' }, 'its claim was released')
  const refusedByPolicy = await guardWithLimit(protection, limiter, payment('blind-3'), shop, false)
  t.match(refusedByPolicy, { guard: { kind: 'forward' }, admission: undefined }, 'its policy refused it: not counted')
})

t.test('a retry whose first copy was released meanwhile is a new payment: counted, and limited', async (t) => {
  const protection = createRetryProtection(memoryStore(), { idempotencyFingerprintKey: FINGERPRINT_KEY })
  const limiter = new RateLimiter(new MemoryRateLimitStore())
  t.match(await guardWithLimit(protection, limiter, payment('other'), shop, true), {
    admission: { outcome: 'admitted' },
  })
  const first = protection.guard(payment('released-1')) as Guard & { ticket: { key: string; token: string } }
  // The look finds it in flight; its first copy's 4xx releases it before the claim.
  queueMicrotask(() => protection.settle(first.ticket, REFUSED))
  const retry = await guardWithLimit(protection, limiter, payment('released-1'), shop, true)
  t.match(retry, { guard: undefined, admission: { outcome: 'limited' } }, 'over the limit: refused')
  t.match(protection.guard(payment('released-1')), { kind: 'forward' }, 'and its claim released')
})
