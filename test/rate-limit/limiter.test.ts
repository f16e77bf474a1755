// The limiter's decisions: the 429 with Retry-After and the RateLimit fields, the fields of a payment admitted,
// a policy without a limit untouched, and a store that fails, in both failure modes.
import t from 'tap'
import { RateLimiter, type Count, type RateLimitStore } from '../../lib/rate-limit/limiter.js'
import { MemoryRateLimitStore } from '../../lib/rate-limit/memory.js'
import { policy } from '../helpers/fixtures.js'

const shop = policy({ entity: 'shop', rateLimit: { payments: 2, seconds: 10 } })

t.test('admitted with the fields, then 429 with Retry-After never before a payment leaves', async (t) => {
  let time = 0
  const limiter = new RateLimiter(new MemoryRateLimitStore({ now: () => time }))
  t.equal(limiter.admit('shop', policy()), undefined, 'no rateLimit: not counted')
  t.match(limiter.admit('shop', shop), {
    outcome: 'admitted',
    entity: 'shop',
    fields: ['RateLimit-Policy', '"payments";q=2;w=10;pk=:c2hvcA==:', 'RateLimit', '"payments";r=1;t=10;pk=:c2hvcA==:'],
  })
  time = 500
  const second = limiter.admit('shop', shop) as { fields: readonly string[] }
  t.equal(second.fields[3], '"payments";r=0;t=10;pk=:c2hvcA==:', '9.5 s, rounded up')
  time = 8_999.5
  const limited = limiter.admit('shop', shop)
  t.match(limited, {
    outcome: 'limited',
    rejection: {
      status: 429,
      body: { errorName: 'requestRateIsTooHigh', message: /rate limit \(2 payments in 10 seconds\) is reached/ },
      headers: {
        'Retry-After': '2',
        'RateLimit-Policy': '"payments";q=2;w=10;pk=:c2hvcA==:',
        RateLimit: '"payments";r=0;t=2;pk=:c2hvcA==:',
      },
    },
  })
  time = 9_999.9
  t.match(limiter.admit('shop', shop), { rejection: { headers: { 'Retry-After': '1' } } }, 'at least 1 second')
  time = 10_000
  t.match(limiter.admit('shop', shop), { outcome: 'admitted' }, 'admitted at the moment Retry-After said')
})

t.test('a refund takes an admitted payment back; anything else is not counted to take back', async (t) => {
  const limiter = new RateLimiter(new MemoryRateLimitStore())
  const first = limiter.admit('shop', shop) as { outcome: string }
  void limiter.admit('shop', shop)
  const refused = limiter.admit('shop', shop) as { outcome: string }
  t.equal(refused.outcome, 'limited')
  limiter.refund(refused as never)
  t.equal((limiter.admit('shop', shop) as { outcome: string }).outcome, 'limited')
  limiter.refund(first as never)
  t.equal((limiter.admit('shop', shop) as { outcome: string }).outcome, 'admitted', 'the refunded place is free')
})

/** A store standing in for a Redis that cannot be reached: every call fails, as `how` says. */
function failing(how: 'throws' | 'rejects', taken: string[], refunded: string[]): RateLimitStore {
  return {
    take(_entity, _limit, id): Count | Promise<Count> {
      taken.push(id)
      if (how === 'throws') throw new Error('down')
      return Promise.reject(new Error('timed out'))
    },
    refund(_entity, id) {
      refunded.push(id)
      if (how === 'throws') throw new Error('still down')
      return Promise.reject(new Error('still down'))
    },
  }
}

t.test(
  'a store that fails: 503 when closed, let through when open; its count taken back, every error told',
  async (t) => {
    for (const how of ['throws', 'rejects'] as const) {
      for (const failure of ['closed', 'open'] as const) {
        const errors: unknown[] = []
        const taken: string[] = []
        const refunded: string[] = []
        const limiter = new RateLimiter(failing(how, taken, refunded), { failure, onError: (e) => errors.push(e) })
        const admission = await limiter.admit('shop', shop)
        if (failure === 'closed')
          t.match(admission, {
            outcome: 'unavailable',
            rejection: {
              status: 503,
              body: { errorName: 'serviceUnavailable', message: /rate limit cannot be checked/ },
            },
          })
        else t.same(admission, { outcome: 'unchecked' }, `${how}, open: not limited`)
        t.same(refunded, taken, `${how}, ${failure}: a count that may have landed is taken back`)
        await new Promise(setImmediate)
        t.equal(errors.length, 2, `${how}, ${failure}: the failure and the failed refund told`)
      }
    }
    const quiet = new RateLimiter(failing('rejects', [], []))
    t.match(await quiet.admit('shop', shop), { outcome: 'unavailable' }, 'closed by default, no listener needed')
  },
)
