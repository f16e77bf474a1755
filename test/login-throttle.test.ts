import t, { type Test } from 'tap'
import { ACCESS_DENIED, type Principal } from '../lib/checks/auth.js'
import { hashPassword } from '../lib/credentials/hash.js'
import { CredentialStore } from '../lib/credentials/store.js'
import { createRedisClient, whenReady } from '../lib/idempotency/redis-client.js'
import { MemoryLoginThrottle } from '../lib/login-throttle.js'
import { LOGIN_KEY_PREFIX, RedisLoginThrottle, type RedisLoginThrottleOptions } from '../lib/login-throttle-redis.js'
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
