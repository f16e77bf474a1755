// The memory store of the rate limit on an injected clock: a sliding window, exact at its edges, where a fixed
// window lets twice the limit through across its boundary.
import t from 'tap'
import { MemoryRateLimitStore } from '../../lib/rate-limit/memory.js'
import type { Count, RateLimitStore } from '../../lib/rate-limit/limiter.js'
import type { RateLimit } from '../../lib/policy/policy.js'

/** A clock the test moves, in ms. */
function clock(start = 1_000_000): { now: () => number; set(ms: number): void } {
  let time = start
  return { now: () => time, set: (ms) => (time = ms) }
}

/**
 * A fixed window, as a counter per `seconds` slice of time (rate-limiter-flexible's and many gateways' own):
 * the wrong algorithm, here only to show what the boundary test tells apart.
 */
class FixedWindowStore implements RateLimitStore {
  readonly #now: () => number
  readonly #counts = new Map<string, { slice: number; count: number }>()
  constructor(now: () => number) {
    this.#now = now
  }
  take(entity: string, limit: RateLimit, _id: string): Count {
    const windowMs = limit.seconds * 1000
    const slice = Math.floor(this.#now() / windowMs)
    const found = this.#counts.get(entity)
    const current = found?.slice === slice ? found : { slice, count: 0 }
    this.#counts.set(entity, current)
    const admitted = current.count < limit.payments
    if (admitted) current.count++
    return { admitted, counted: current.count, waitMs: (slice + 1) * windowMs - this.#now() }
  }
  refund(): void {}
}

const LIMIT: RateLimit = { payments: 5, seconds: 10 }

/** How many of `count` payments at `at` ms a store admits. */
function admittedAt(store: RateLimitStore, time: ReturnType<typeof clock>, at: number, count: number): number {
  time.set(at)
  let admitted = 0
  for (let i = 0; i < count; i++) if ((store.take('shop', LIMIT, `p${at}-${i}`) as Count).admitted) admitted++
  return admitted
}

t.test('across a window boundary: the sliding window admits the limit, a fixed window twice the limit', async (t) => {
  // The fixed window's boundary falls at 10 000 000 ms; payments just before it and just after.
  const boundary = 10_000_000
  for (const [name, make, expected] of [
    ['sliding (ours)', (now: () => number) => new MemoryRateLimitStore({ now }), 5],
    ['fixed', (now: () => number) => new FixedWindowStore(now), 10],
  ] as const) {
    const time = clock()
    const store = make(time.now)
    const before = admittedAt(store, time, boundary - 1, 5)
    const after = admittedAt(store, time, boundary + 1, 5)
    t.equal(before, 5, `${name}: the limit before the boundary`)
    t.equal(before + after, expected, `${name}: ${expected} within 2 ms`)
  }
})

t.test(
  'a payment counts for exactly its window: the next is admitted when the oldest leaves, not before',
  async (t) => {
    const time = clock(0)
    const store = new MemoryRateLimitStore({ now: time.now })
    for (let i = 0; i < 5; i++) {
      time.set(i * 1000)
      t.match(store.take('shop', LIMIT, `a${i}`), { admitted: true, counted: i + 1, waitMs: 10_000 - i * 1000 })
    }
    time.set(9_999)
    t.same(store.take('shop', LIMIT, 'b'), { admitted: false, counted: 5, waitMs: 1 }, 'the oldest leaves in 1 ms')
    time.set(10_000)
    t.same(store.take('shop', LIMIT, 'c'), { admitted: true, counted: 5, waitMs: 1000 }, 'left: one more')
    t.same(store.take('shop', LIMIT, 'd'), { admitted: false, counted: 5, waitMs: 1000 })
    t.same(store.take('other', LIMIT, 'e'), { admitted: true, counted: 1, waitMs: 10_000 }, 'each entity its own')
  },
)

t.test('a changed limit: what was counted in the window still counts, whatever the new limit', async (t) => {
  const time = clock(0)
  const store = new MemoryRateLimitStore({ now: time.now })
  for (let i = 0; i < 5; i++) {
    time.set(i * 1000)
    store.take('shop', LIMIT, `a${i}`)
  }
  time.set(5000)
  const lowered = { payments: 2, seconds: 10 }
  t.same(store.take('shop', lowered, 'b'), { admitted: false, counted: 5, waitMs: 8000 }, 'admitted once three left')
  time.set(12_999)
  t.match(store.take('shop', lowered, 'c'), { admitted: false, counted: 2 }, 'not a millisecond before')
  time.set(13_000)
  t.same(store.take('shop', lowered, 'd'), { admitted: true, counted: 2, waitMs: 1000 })
  const raised = { payments: 10, seconds: 10 }
  t.match(store.take('shop', raised, 'e'), { admitted: true, counted: 3 }, 'raised: admitted at once')
  time.set(14_500)
  const shorter = { payments: 3, seconds: 1 }
  t.match(store.take('shop', shorter, 'f'), { admitted: true, counted: 1 }, 'a shorter window forgets the older')
})

t.test('a refund takes one payment back, and only one still counted', async (t) => {
  const time = clock(0)
  const store = new MemoryRateLimitStore({ now: time.now })
  const one = { payments: 1, seconds: 10 }
  t.match(store.take('shop', one, 'a'), { admitted: true })
  t.match(store.take('shop', one, 'b'), { admitted: false })
  store.refund('shop', 'a')
  store.refund('shop', 'a')
  store.refund('nobody', 'a')
  t.match(store.take('shop', one, 'c'), { admitted: true, counted: 1 }, 'given back')
  time.set(20_000)
  t.match(store.take('shop', one, 'd'), { admitted: true })
  store.refund('shop', 'c')
  t.match(
    store.take('shop', one, 'e'),
    { admitted: false },
    "a refund of one that left the window takes none of today's",
  )
})

t.test('a long run keeps only the window: times that left are dropped as they go', async (t) => {
  const time = clock(0)
  const store = new MemoryRateLimitStore({ now: time.now })
  const limit = { payments: 3, seconds: 1 }
  let admitted = 0
  for (let i = 0; i < 10_000; i++) {
    time.set(i * 100)
    if (store.take('shop', limit, `p${i}`).admitted) admitted++
  }
  t.equal(admitted, 3 * 1000, 'three a second over a thousand seconds')
  time.set(10_000 * 100)
  t.same(store.take('shop', limit, 'last'), { admitted: true, counted: 3, waitMs: 100 })
})

t.test('the default clock is the monotonic one', async (t) => {
  const store = new MemoryRateLimitStore()
  const count = store.take('shop', LIMIT, 'a')
  t.match(count, { admitted: true, counted: 1, waitMs: 10_000 })
})
