// The rate limit counted in a real Redis: exact counts across clients, by Redis's clock, a script safe to run
// twice, a sliding window at a real second boundary, and a Redis that is gone.
import type { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { RateLimiter } from '../../lib/rate-limit/limiter.js'
import { RATE_KEY_PREFIX, rateKey, RedisRateLimitStore } from '../../lib/rate-limit/redis.js'
import { policy } from '../helpers/fixtures.js'
import { waitFor } from '../helpers/http.js'
import { startRedis } from '../helpers/redis.js'

async function client(t: Test, url: string): Promise<Redis> {
  const redis = createRedisClient(url, { commandTimeoutMs: 500, onError: () => {} }) as Redis
  t.teardown(() => redis.disconnect())
  t.ok(await whenReady(redis, 10_000), 'connected')
  return redis
}

/** Redis's own clock, in ms. */
async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}

t.test('3N payments at once from two clients: exactly N admitted, counted in one key per entity', async (t) => {
  const server = await startRedis(t)
  if (server === undefined) return
  const [a, b] = [await client(t, server.url), await client(t, server.url)]
  const stores = [new RedisRateLimitStore(a), new RedisRateLimitStore(b)]
  const limit = { payments: 20, seconds: 60 }
  const counts = await Promise.all(
    Array.from({ length: 60 }, (_, i) => (stores[i % 2] as RedisRateLimitStore).take('shop', limit, `p${i}`)),
  )
  t.equal(counts.filter((count) => count.admitted).length, 20)
  t.ok(
    counts.every((count) => count.counted === 20 || count.admitted),
    'every refusal saw the limit counted',
  )
  t.same(await a.keys(`${RATE_KEY_PREFIX}*`), [rateKey('shop')])
  t.equal(rateKey('shop'), 'payments-gate:rate:{shop}')
  t.equal(rateKey('a}{b'), 'payments-gate:rate:{a%7D%7Bb}', 'no entity ends its hash tag early')
  const ttl = await a.pttl(rateKey('shop'))
  t.ok(ttl > 0 && ttl <= 60_000, 'the key lives as long as its newest payment counts')
})

t.test('the same payment sent twice is counted once; a refund takes it back, twice or not', async (t) => {
  const server = await startRedis(t)
  if (server === undefined) return
  const store = new RedisRateLimitStore(await client(t, server.url))
  const one = { payments: 1, seconds: 60 }
  t.match(await store.take('shop', one, 'same'), { admitted: true, counted: 1 })
  t.match(
    await store.take('shop', one, 'same'),
    { admitted: true, counted: 1 },
    'a repeat: admitted, not counted again',
  )
  const refused = await store.take('shop', one, 'other')
  t.match(refused, { admitted: false, counted: 1 })
  t.ok(refused.waitMs > 59_000 && refused.waitMs <= 60_000, 'the wait until the one counted leaves')
  await store.refund('shop', 'same')
  await store.refund('shop', 'same')
  t.match(await store.take('shop', one, 'third'), { admitted: true, counted: 1 }, 'given back')
})

t.test('a lowered limit: what was counted still counts, the wait is until enough have left', async (t) => {
  const server = await startRedis(t)
  if (server === undefined) return
  const store = new RedisRateLimitStore(await client(t, server.url))
  for (let i = 0; i < 5; i++) await store.take('shop', { payments: 5, seconds: 60 }, `p${i}`)
  const lowered = await store.take('shop', { payments: 2, seconds: 60 }, 'after')
  t.match(lowered, { admitted: false, counted: 5 })
  t.ok(lowered.waitMs > 50_000, 'until the fourth oldest leaves')
})

t.test('a sliding window at a real second boundary: admitted again only a window after the first', async (t) => {
  const server = await startRedis(t)
  if (server === undefined) return
  const redis = await client(t, server.url)
  const store = new RedisRateLimitStore(redis)
  const limit = { payments: 3, seconds: 1 }
  // Start 100 to 300 ms into one of Redis's seconds: a window aligned on seconds would open again within 900 ms.
  const end = Date.now() + 10_000
  const phase = async () => (await redisNow(redis)) % 1000
  for (let at = await phase(); (at < 100 || at > 300) && Date.now() < end; at = await phase()) await waitFor(5)
  const started = await redisNow(redis)
  t.ok(started % 1000 >= 100, 'early in a second, not at its start')
  for (let i = 0; i < 3; i++) t.ok((await store.take('shop', limit, `first${i}`)).admitted)
  t.notOk((await store.take('shop', limit, 'over')).admitted, 'the fourth at once: refused')
  // Read now: the count that admits the next drops it.
  const first = Number(await redis.zscore(rateKey('shop'), 'first0'))
  let next = 0
  while (!(await store.take('shop', limit, `next${next}`)).admitted && Date.now() < end) {
    next++
    await waitFor(10)
  }
  const admitted = Number(await redis.zscore(rateKey('shop'), `next${next}`))
  t.ok(first >= started, "scored by Redis's clock")
  t.ok(admitted - first >= 1000, `admitted ${admitted - first} ms after the first, a whole window`)
})

t.test('Redis gone: the count rejects, the limiter answers as its failure mode says', async (t) => {
  const server = await startRedis(t)
  if (server === undefined) return
  const redis = await client(t, server.url)
  const errors: unknown[] = []
  const closed = new RateLimiter(new RedisRateLimitStore(redis), { onError: (error) => errors.push(error) })
  const open = new RateLimiter(new RedisRateLimitStore(redis), { failure: 'open' })
  const shop = policy({ entity: 'shop', rateLimit: { payments: 1, seconds: 60 } })
  t.match(await closed.admit('shop', shop), { outcome: 'admitted' })
  await server.stop()
  t.match(await closed.admit('shop', shop), { outcome: 'unavailable', rejection: { status: 503 } })
  t.same(await open.admit('shop', shop), { outcome: 'unchecked' })
  t.ok(errors.length >= 1, 'told')
})
