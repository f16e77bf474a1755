import t from 'tap'
import { Redis } from 'ioredis'
import { createRedisClient, whenReady } from '../lib/idempotency/redis-client.js'
import { LOGIN_KEY_PREFIX, RedisLoginThrottle } from '../lib/login-throttle-redis.js'
import { startFaultyProxy } from './helpers/faulty-proxy.js'
import { startRedis } from './helpers/redis.js'

/**
 * The shared login throttle through a TCP proxy that loses a reply after
 * Redis ran the command (test/helpers/faulty-proxy.ts): the gateway's client
 * never sends its counting script again, and a client that does (a Cluster
 * client after a lost connection, a client of your own) counts nothing twice.
 */

t.test('a failure whose reply was cut is counted once in Redis, never twice', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const proxy = await startFaultyProxy(t, redis.port)
  const client = createRedisClient(proxy.url, { commandTimeoutMs: 1000 })
  t.teardown(() => client.disconnect())
  const direct = createRedisClient(redis.url)
  t.teardown(() => direct.disconnect())
  t.ok(await whenReady(client, 5000))
  t.ok(await whenReady(direct, 5000))
  const errors: Error[] = []
  const throttle = new RedisLoginThrottle(client, { maxFailures: 10, onError: (error) => errors.push(error) })
  const failures = `${LOGIN_KEY_PREFIX}failures:shop-1`

  const first = await throttle.admit('shop-1')
  const cut = proxy.cutReply('failures:shop-1')
  await first?.settle(false)
  await cut
  t.equal(errors.length, 1, 'the lost reply was reported (and this process counted the failure in memory too)')
  t.equal(await direct.get(failures), '1', 'the script ran once, and was not sent again on the new connection')
  t.equal(proxy.connections, 2, 'the client reconnected')

  const second = await throttle.admit('shop-1')
  await second?.settle(false)
  t.equal(await direct.get(failures), '2', 'the next failure is the second')
})

t.test(
  'a failure sent again by a client that does resend (a Cluster client after a lost connection, a client of your own) is counted once',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const proxy = await startFaultyProxy(t, redis.port)
    // ioredis's defaults: a command whose reply a lost connection cut off is sent again on the new connection.
    const client = new Redis(proxy.url, { commandTimeout: 5000, retryStrategy: () => 20 })
    client.on('error', () => {})
    t.teardown(() => client.disconnect())
    const direct = createRedisClient(redis.url)
    t.teardown(() => direct.disconnect())
    t.ok(await whenReady(client, 5000))
    t.ok(await whenReady(direct, 5000))
    const errors: Error[] = []
    const throttle = new RedisLoginThrottle(client, { maxFailures: 10, onError: (error) => errors.push(error) })
    const failures = `${LOGIN_KEY_PREFIX}failures:shop-2`
    const first = await throttle.admit('shop-2')
    const cut = proxy.cutReply('failures:shop-2')
    await first?.settle(false)
    await cut
    t.equal(proxy.connections, 2, 'the settle ran, lost its reply, and was sent again on a new connection')
    t.same(errors, [], 'the repeat answered')
    t.equal(await direct.get(failures), '1', 'its reservation gone, the repeat counted nothing')
  },
)
