import t, { type Test } from 'tap'
import { ACCESS_DENIED, type Principal } from '../lib/checks/auth.js'
import { hashPassword } from '../lib/credentials/hash.js'
import { CredentialStore, HASHING_IS_BUSY } from '../lib/credentials/store.js'
import { createRedisClient, whenReady } from '../lib/idempotency/redis-client.js'
import { MemoryLoginThrottle } from '../lib/login-throttle.js'
import { LOGIN_KEY_PREFIX, RedisLoginThrottle, type RedisLoginThrottleOptions } from '../lib/login-throttle-redis.js'
import { until } from './helpers/http.js'
import { type RedisServer, startRedis } from './helpers/redis.js'

/** Cheap scrypt parameters, so the throttle tests do not spend seconds hashing. */
const CHEAP = { N: 1024, r: 8, p: 1 }

const basic = (username: string, password: string) =>
  `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`

/** A throttle on its own client, once connected: commands sent before then reject, by design. */
async function throttle(
  t: Test,
  redis: RedisServer,
  options: RedisLoginThrottleOptions = {},
): Promise<RedisLoginThrottle> {
  const client = createRedisClient(redis.url, { commandTimeoutMs: 500 })
  t.teardown(() => client.disconnect())
  t.ok(await whenReady(client, 5000), 'connected')
  return new RedisLoginThrottle(client, options)
}

async function users(throttle: MemoryLoginThrottle | RedisLoginThrottle): Promise<CredentialStore> {
  const password = await hashPassword('s3cret', CHEAP)
  return new CredentialStore(
    [
      { username: 'shop-1', password, entities: ['default'] },
      { username: 'shop-2', password, entities: ['default'] },
    ],
    { throttle },
  )
}

const isPrincipal = (value: unknown): value is Principal =>
  typeof value === 'object' && value !== null && 'username' in value

t.test('the memory throttle is the default and answers synchronously', async (t) => {
  const limited = new MemoryLoginThrottle({ maxFailures: 1 })
  const attempt = limited.admit('u')
  t.ok(attempt !== undefined && !(attempt instanceof Promise))
  void attempt?.settle(false)
  t.equal(limited.admit('u'), undefined, 'locked')
  const store = await users(limited)
  t.equal(store.authenticate(basic('u', 'x')), ACCESS_DENIED, 'a locked username is refused without a promise')
})

t.test('two gateways sharing one Redis: failures split across them lock the user on both', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const errors: Error[] = []
  const onError = (error: Error) => errors.push(error)
  const throttleA = await throttle(t, redis, { maxFailures: 4, onError })
  const throttleB = await throttle(t, redis, { maxFailures: 4, onError })
  const a = await users(throttleA)
  const b = await users(throttleB)
  t.equal(await a.authenticate(basic('shop-1', 'guess-1')), ACCESS_DENIED)
  t.equal(await b.authenticate(basic('shop-1', 'guess-2')), ACCESS_DENIED)
  t.equal(await a.authenticate(basic('shop-1', 'guess-3')), ACCESS_DENIED)
  t.equal(await b.authenticate(basic('shop-1', 'guess-4')), ACCESS_DENIED)
  t.notOk(isPrincipal(await a.authenticate(basic('shop-1', 's3cret'))), 'locked on A, even with the right password')
  t.notOk(isPrincipal(await b.authenticate(basic('shop-1', 's3cret'))), 'locked on B')
  t.ok(isPrincipal(await a.authenticate(basic('shop-2', 's3cret'))), 'other users are not affected')
  t.same(errors, [])
})

t.test(
  'a success starts the count again; a burst on one gateway cannot start more hashes than the limit',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const shared = await throttle(t, redis, { maxFailures: 3 })
    const store = await users(shared)
    await store.authenticate(basic('shop-1', 'a'))
    await store.authenticate(basic('shop-1', 'b'))
    t.ok(isPrincipal(await store.authenticate(basic('shop-1', 's3cret'))))
    await store.authenticate(basic('shop-1', 'c'))
    await store.authenticate(basic('shop-1', 'd'))
    t.ok(isPrincipal(await store.authenticate(basic('shop-2', 's3cret'))), 'two failures of three: not locked')
    const burst = await Promise.all(Array.from({ length: 5 }, (_, i) => shared.admit('burst')))
    t.same(
      burst.map((attempt) => attempt !== undefined),
      [true, true, true, false, false],
      'three admitted at once, the rest refused while they run',
    )
    for (const attempt of burst) await attempt?.settle(false)
    t.equal(await shared.admit('burst'), undefined, 'locked')
  },
)

t.test('Redis down: no crash, no lockout of everybody; each gateway counts alone, and says so', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const errors: Error[] = []
  const shared = await throttle(t, redis, { maxFailures: 2, onError: (error) => errors.push(error) })
  const early = await shared.admit('early')
  const late = await shared.admit('late')
  const store = await users(shared)
  await redis.stop()
  t.ok(isPrincipal(await store.authenticate(basic('shop-1', 's3cret'))), 'the right password still works')
  t.equal(await store.authenticate(basic('shop-2', 'x')), ACCESS_DENIED)
  t.equal(await store.authenticate(basic('shop-2', 'y')), ACCESS_DENIED)
  t.equal(
    await store.authenticate(basic('shop-2', 's3cret')),
    ACCESS_DENIED,
    'counted in memory meanwhile: locked here',
  )
  t.ok(isPrincipal(await store.authenticate(basic('shop-1', 's3cret'))), 'nobody else is locked out')
  t.ok(errors.length > 0, 'reported')
  await early?.settle(true)
  const count = errors.length
  await late?.settle(false)
  t.ok(errors.length > count, 'a settle that cannot reach Redis is reported and counted in memory')
  const client = createRedisClient(redis.url)
  t.teardown(() => client.disconnect())
  const silent = new RedisLoginThrottle(client)
  t.ok((await silent.admit('u')) !== undefined, 'no onError: still admitted')
})

t.test('a failure that cannot reach Redis while this process has the username locked is dropped', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const shared = await throttle(t, redis, { maxFailures: 1, onError: () => {} })
  const remote = await shared.admit('u')
  t.ok(remote)
  await redis.stop()
  const local = await shared.admit('u')
  t.ok(local, 'admitted by the memory fallback')
  await remote?.settle(false)
  await local?.settle(false)
  t.equal(await shared.admit('u'), undefined, 'locked in memory')
  t.match(LOGIN_KEY_PREFIX, /^payments-gate:/)
})

t.test('a reload that changes a user unlocks it on every gateway sharing the Redis', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const errors: Error[] = []
  const onError = (error: Error) => errors.push(error)
  const a = await users(await throttle(t, redis, { maxFailures: 2, onError }))
  const sharedB = await throttle(t, redis, { maxFailures: 2, onError })
  const b = await users(sharedB)
  t.equal(await a.authenticate(basic('shop-1', 'x')), ACCESS_DENIED)
  t.equal(await a.authenticate(basic('shop-1', 'y')), ACCESS_DENIED)
  t.equal(await a.authenticate(basic('shop-2', 'x')), ACCESS_DENIED)
  t.equal(await b.authenticate(basic('shop-1', 's3cret')), ACCESS_DENIED, 'locked fleet-wide')
  const rotated = await hashPassword('rotated', CHEAP)
  await b.replace([{ username: 'shop-1', password: rotated, entities: ['default'] }])
  t.ok(isPrincipal(await b.authenticate(basic('shop-1', 'rotated'))), 'unlocked where the reload ran')
  await a.replace([{ username: 'shop-1', password: rotated, entities: ['default'] }])
  t.equal(await a.authenticate(basic('shop-2', 'z')), ACCESS_DENIED)
  t.ok(isPrincipal(await a.authenticate(basic('shop-1', 'rotated'))), 'and on the other gateway')
  const first = await sharedB.admit('shop-3')
  const second = await sharedB.admit('shop-3')
  t.equal(await sharedB.admit('shop-3'), undefined, 'two running: at the limit')
  await first?.settle(undefined)
  const third = await sharedB.admit('shop-3')
  t.ok(third, 'one stopped without a verdict: room again, and no failure counted')
  await second?.settle(undefined)
  await third?.settle(undefined)
  t.same(errors, [])
  await redis.stop()
  await sharedB.clear('shop-1')
  t.equal(errors.length, 1, 'Redis down: the clear is reported, never thrown')
})

t.test(
  'the memory throttle: a verification running holds a reservation that a success, a reload or the window keep; given back, it frees its place; alone it locks nothing',
  async (t) => {
    let time = 0
    const limited = new MemoryLoginThrottle({ maxFailures: 3, failureWindowMs: 1000, now: () => time })
    const running = [limited.admit('u'), limited.admit('u'), limited.admit('u')]
    t.ok(running.every((attempt) => attempt !== undefined))
    t.equal(limited.admit('u'), undefined, 'three running: the limit')
    void running[0]?.settle(true)
    t.ok(limited.admit('u'), 'a success frees its own place')
    t.equal(limited.admit('u'), undefined, 'and not those of the two still running')
    limited.clear('u')
    t.equal(limited.admit('u'), undefined, 'nor does a reload that changed the user')
    time += 1000
    t.equal(limited.admit('u'), undefined, 'nor a new window')
    void running[1]?.settle(undefined)
    const after = limited.admit('u')
    t.ok(after, 'given back: its place is free again')
    for (const attempt of [running[2], after]) void attempt?.settle(undefined)
    t.ok(limited.admit('u'), 'reservations alone never lock')
  },
)

t.test('the memory throttle: a success forgets the failures and the lock', async (t) => {
  const limited = new MemoryLoginThrottle({ maxFailures: 2 })
  const right = limited.admit('u')
  void limited.admit('u')?.settle(false)
  void limited.admit('u')?.settle(false)
  t.equal(limited.admit('u'), undefined, 'locked by two failures')
  void right?.settle(true)
  t.ok(limited.admit('u'), 'a success that was running meanwhile lifts it')
})

/** A direct client of the test Redis, to look at the throttle's keys. */
async function inspector(t: Test, redis: RedisServer) {
  const client = createRedisClient(redis.url)
  t.teardown(() => client.disconnect())
  t.ok(await whenReady(client, 5000))
  return client
}

t.test(
  'a burst from two gateways on one Redis: at most ten guesses hashed in all, then 401, locked fleet-wide',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const errors: Error[] = []
    const onError = (error: Error) => errors.push(error)
    let hashed = 0
    /** The gateway's throttle, counting the attempts it admits: each is a hash. */
    const counting = (throttle: RedisLoginThrottle) => ({
      admit: async (username: string) => {
        const attempt = await throttle.admit(username)
        if (attempt !== undefined) hashed++
        return attempt
      },
      clear: (username: string) => throttle.clear(username),
    })
    const password = await hashPassword('s3cret', CHEAP)
    const gateway = async () =>
      new CredentialStore([{ username: 'shop-1', password, entities: ['default'] }], {
        throttle: counting(await throttle(t, redis, { onError })),
        hashConcurrency: 16,
      })
    const [a, b] = [await gateway(), await gateway()]
    const burst = Array.from({ length: 15 }, (_, i) => [
      a.authenticate(basic('shop-1', `a-${i}`)),
      b.authenticate(basic('shop-1', `b-${i}`)),
    ]).flat()
    t.same(new Set(await Promise.all(burst)), new Set([ACCESS_DENIED]), 'every guess 401')
    t.equal(hashed, 10, 'ten hashed across both gateways, not ten on each')
    t.equal(await a.authenticate(basic('shop-1', 's3cret')), ACCESS_DENIED, 'locked on A, even the right password')
    t.equal(await b.authenticate(basic('shop-1', 's3cret')), ACCESS_DENIED, 'and on B')
    t.equal(hashed, 10, 'without hashing')
    const look = await inspector(t, redis)
    t.equal(await look.get(`${LOGIN_KEY_PREFIX}locked:shop-1`), '1')
    t.equal(await look.zcard(`${LOGIN_KEY_PREFIX}reserved:shop-1`), 0, 'every reservation given back')
    t.same(errors, [])
  },
)

t.test(
  'Redis reservations: a success and a reload keep the others; given back by a check that stopped; never a lock; 503s hold none',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const errors: Error[] = []
    const onError = (error: Error) => errors.push(error)
    const [a, b] = [
      await throttle(t, redis, { maxFailures: 3, onError }),
      await throttle(t, redis, { maxFailures: 3, onError }),
    ]
    const look = await inspector(t, redis)
    const reserved = `${LOGIN_KEY_PREFIX}reserved:u`
    const running = [await a.admit('u'), await b.admit('u'), await a.admit('u')]
    t.ok(running.every((attempt) => attempt !== undefined))
    t.equal(await b.admit('u'), undefined, 'three running on two gateways: the limit')
    t.equal(await look.get(`${LOGIN_KEY_PREFIX}locked:u`), null, 'refused, and not locked')
    await running[0]?.settle(true)
    const fourth = await b.admit('u')
    t.ok(fourth, 'a success frees its own place')
    t.equal(await a.admit('u'), undefined, 'and not those of the two still running')
    await b.clear('u')
    t.equal(await a.admit('u'), undefined, 'nor does a reload that changed the user')
    await running[1]?.settle(undefined)
    t.equal(await look.zcard(reserved), 2, 'given back')
    const fifth = await b.admit('u')
    t.ok(fifth, 'its place is free again')
    for (const attempt of [running[2], fourth, fifth]) await attempt?.settle(undefined)
    t.equal(await look.zcard(reserved), 0)
    t.equal(await look.get(`${LOGIN_KEY_PREFIX}failures:u`), null, 'nothing counted')

    // A gateway whose hash queue is full answers 503 before it reserves anything.
    const store = new CredentialStore(
      [{ username: 'shop-1', password: await hashPassword('s3cret', CHEAP), entities: ['default'] }],
      { throttle: a, hashConcurrency: 1, hashQueueMax: 2 },
    )
    const flood = Array.from({ length: 13 }, (_, i) => store.authenticate(basic('shop-1', `flood-${i}`)))
    t.equal(flood.filter((answer) => answer === HASHING_IS_BUSY).length, 10, 'ten answered 503 at once')
    t.same(new Set(await Promise.all(flood)), new Set([ACCESS_DENIED, HASHING_IS_BUSY]))
    t.equal(await look.zcard(`${LOGIN_KEY_PREFIX}reserved:shop-1`), 0)
    t.equal(await look.get(`${LOGIN_KEY_PREFIX}locked:shop-1`), '1', 'the three hashed counted: the limit, locked')
    t.same(errors, [])
  },
)

t.test('a Redis reservation never given back expires with the failure window, by Redis’s clock', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const shared = await throttle(t, redis, { maxFailures: 2, failureWindowMs: 300 })
  const look = await inspector(t, redis)
  const reserved = `${LOGIN_KEY_PREFIX}reserved:u`
  t.ok(await shared.admit('u'))
  t.ok(await shared.admit('u'), 'two reservations, never settled: a gateway that died holding them')
  const [seconds, micros] = await look.time()
  const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  const expiries = (await look.zrange(reserved, 0, -1, 'WITHSCORES')).filter((_, i) => i % 2 === 1).map(Number)
  t.ok(
    expiries.every((expiry) => expiry > now - 300 && expiry <= now + 300),
    'each expires within the window of its reservation',
  )
  const ttl = await look.pttl(reserved)
  t.ok(ttl > 0 && ttl <= 300, 'and the set with the last one')
  t.equal(await shared.admit('u'), undefined, 'the limit')
  t.ok(await until(async () => (await shared.admit('u')) !== undefined), 'their places free again once expired')
  t.equal(await look.get(`${LOGIN_KEY_PREFIX}locked:u`), null, 'nothing locked, nothing counted')
  t.equal(await look.get(`${LOGIN_KEY_PREFIX}failures:u`), null)
})
