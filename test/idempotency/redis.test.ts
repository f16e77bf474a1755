import t, { type Test } from 'tap'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { REDIS_KEY_PREFIX, RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import type { Claim } from '../../lib/idempotency/store.js'
import { until } from '../helpers/wait.js'
import { type RedisServer, startRedis } from '../helpers/redis.js'
import { ANSWER, REDIS_STORE_OPTIONS } from '../helpers/store-contract.js'

const OPTIONS = REDIS_STORE_OPTIONS

function open(t: Test, url: string, errors: Error[] = [], commandTimeoutMs = 500): RedisIdempotencyStore {
  const store = new RedisIdempotencyStore(
    createRedisClient(url, { commandTimeoutMs, onError: (error) => errors.push(error) }),
    OPTIONS,
  )
  t.teardown(() => store.close())
  return store
}

/** Claims until the store answers again, a bounded number of times. */
async function claimWhenBack(store: RedisIdempotencyStore, key: string): Promise<Claim | undefined> {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      return await store.claim(key, 'f')
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  return undefined
}

// Each test has a Redis of its own. The replicas' test, which waits out two command timeouts, runs first and beside
// the others, which run one after another.
t.jobs = 2

t.test(
  'replicas: claims and records wait for a replica on connections of their own; too few acknowledgements, or no free connection in time, fail the write',
  async (t) => {
    const primary = await startRedis(t)
    if (primary === undefined) return
    const replica = (await startRedis(t, { replicaOf: primary })) as RedisServer
    const errors: Error[] = []
    const options = { ...OPTIONS, replicas: 1, commandTimeoutMs: 1000, onError: (error: Error) => errors.push(error) }
    const store = new RedisIdempotencyStore(createRedisClient(primary.url, options), options)
    t.teardown(() => store.close())
    t.ok(await store.ready(5000), 'the client and every connection for acknowledged writes')
    const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => store.claim(`k${i}`, 'f')))
    t.ok(
      claims.every((claim) => claim.state === 'claimed'),
      'twenty claims share the eight connections, each acknowledged',
    )
    const [first] = claims
    await store.record('k0', 'stale', ANSWER)
    t.same(await store.claim('k0', 'f'), { state: 'inFlight' }, 'a stale token records nothing, and waits for nobody')
    await store.record('k0', first?.state === 'claimed' ? first.token : '', ANSWER)
    t.equal((await store.claim('k0', 'f')).state, 'recorded')

    replica.freeze()
    await t.rejects(store.claim('unacknowledged', 'f'), {
      code: 'EREPLICAS',
      message: '0 of 1 replicas acknowledged the write within 1000 ms',
    })
    replica.thaw()
    t.equal(
      (await claimWhenBack(store, 'unacknowledged'))?.state,
      'claimed',
      'the claim no replica acknowledged was released',
    )

    primary.freeze()
    t.teardown(() => primary.thaw())
    const held = Array.from({ length: 8 }, (_, i) => store.claim(`held${i}`, 'f'))
    await t.rejects(store.claim('ninth', 'f'), {
      message: 'no connection for an acknowledged write was free within 1000 ms',
    })
    t.ok(
      (await Promise.allSettled(held)).every((result) => result.status === 'rejected'),
      'the eight writes of the frozen primary timed out',
    )
    primary.thaw()
  },
)

t.test('two stores (two clients) on one Redis agree', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const a = open(t, redis.url)
  const b = open(t, redis.url)
  t.ok(await a.ready(5000))
  t.ok(await b.ready(5000))
  const claim = await a.claim('k', 'f')
  t.equal(claim.state, 'claimed', 'claimed on A')
  t.same(await b.claim('k', 'f'), { state: 'inFlight' }, 'in flight on B')
  if (claim.state === 'claimed') await a.record('k', claim.token, ANSWER)
  const replay = await b.claim('k', 'f')
  t.equal(replay.state, 'recorded', 'replayed on B')
  if (replay.state === 'recorded') t.equal(replay.answer.body.toString('hex'), ANSWER.body.toString('hex'))
  t.same(await b.claim('k', 'other'), { state: 'mismatch' })
  const keys = await a.redis.keys('*')
  t.same(keys, [`${REDIS_KEY_PREFIX}k`], 'keys carry the prefix')
  const stored = (await a.redis.get(keys[0] as string)) as string
  t.notMatch(stored, /"f".*"f"/, 'the fingerprint is stored once')
  t.match(JSON.parse(stored), { state: 'recorded', fingerprint: 'f', answer: { status: 201 } })
})

t.test('Redis stopped: claims reject and errors are reported; restarted: the same store works again', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const errors: Error[] = []
  const store = open(t, redis.url, errors)
  t.ok(await store.ready(5000))
  t.equal((await store.claim('before', 'f')).state, 'claimed')
  await redis.stop()
  t.ok(await until(() => errors.length > 0, 30_000), 'the lost connection was reported')
  await t.rejects(store.claim('k', 'f'), 'claim rejects')
  await t.rejects(
    Promise.resolve().then(() => store.record('k', 'token', ANSWER)),
    'record rejects',
  )
  await t.rejects(
    Promise.resolve().then(() => store.release('k', 'token')),
    { code: 'ERELEASE', message: /^a release failed 3 times/ },
    'release rejects after its last attempt',
  )
  await redis.restart()
  const claim = await claimWhenBack(store, 'k')
  t.equal(claim?.state, 'claimed', 'claimed once Redis is back, without a new store')
  t.ok(errors.every((error) => error instanceof Error))
})

t.test('a frozen Redis: a claim rejects after the command timeout instead of hanging', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const store = open(t, redis.url, [], 100)
  t.ok(await store.ready(5000))
  redis.freeze()
  t.teardown(() => redis.thaw())
  await t.rejects(store.claim('k', 'f'), { message: /timed out/ })
  redis.thaw()
  t.equal((await claimWhenBack(store, 'next'))?.state, 'claimed', 'answers again once thawed')
  t.equal(
    (await store.claim('k', 'f')).state,
    'claimed',
    'the claim that timed out landed once thawed, and was released after it: the key is free',
  )
})

t.test('a release that fails every attempt: given up at close, told to onError when there is one', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  t.teardown(() => redis.thaw())
  for (const told of [true, false]) {
    const errors: Error[] = []
    const options = told ? { ...OPTIONS, onError: (error: Error) => errors.push(error) } : OPTIONS
    const store = new RedisIdempotencyStore(createRedisClient(redis.url, { commandTimeoutMs: 100 }), options)
    t.ok(await store.ready(5000))
    redis.freeze()
    await t.rejects(store.claim('given-up', 'f'), { message: /timed out/ })
    // Waits for the release's last attempt, which the stopped server never answers: no rejection escapes.
    await t.resolves(store.close())
    redis.thaw()
    t.equal(
      errors.some((error) => (error as { code?: string }).code === 'ERELEASE'),
      told,
      `told: ${told}`,
    )
  }
})

t.test('a store on a Redis that is not there: created without throwing, never ready, closed cleanly', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  await redis.stop()
  const errors: Error[] = []
  const store = new RedisIdempotencyStore(
    createRedisClient(redis.url, { onError: (error) => errors.push(error) }),
    OPTIONS,
  )
  t.equal(await store.ready(200), false)
  await t.rejects(store.claim('k', 'f'))
  await store.close()
  t.ok(errors.length > 0, 'the refused connection was reported')
  const silent = createRedisClient(redis.url)
  t.equal(await whenReady(silent, 200), false, 'no onError: errors are dropped, not printed')
  silent.disconnect()
})

t.test('whenReady on a connected client answers at once', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const store = open(t, redis.url)
  t.ok(await store.ready())
  t.ok(await whenReady(store.redis, 0))
})
