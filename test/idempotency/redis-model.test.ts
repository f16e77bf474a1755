import type { Redis } from 'ioredis'
import t from 'tap'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { startFaultyProxy } from '../helpers/faulty-proxy.js'
import { startRedis } from '../helpers/redis.js'
import { checkModelThroughFaults } from '../helpers/retrying-store.js'

/**
 * The commands of the plain model (test/helpers/store-model.ts) against the
 * Redis store through the faulty proxy (test/helpers/faulty-proxy.ts): before
 * a command, a fault may be armed for it (its reply cut after it ran, the
 * command dropped, its reply delayed past the command timeout, every
 * connection reset). A command that fails is tried again, as a client retries
 * a payment; a claim is tried again once what the failed one left is released.
 * The model must hold as if no fault had happened: a failed claim leaves no
 * claim behind (never stuck at 409), a record or a release that is repeated
 * changes nothing, and no release is given up. Redis's clock cannot be moved:
 * windows and TTLs outlast a run, and time does not pass.
 */

t.test(
  'the Redis store keeps the contract of the plain model through cut, dropped, late replies and resets',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const proxy = await startFaultyProxy(t, redis.port)
    const direct = createRedisClient(redis.url) as Redis
    t.teardown(() => direct.disconnect())
    t.ok(await whenReady(direct, 5000))
    await checkModelThroughFaults(t, {
      proxy,
      direct,
      client: (options) => createRedisClient(proxy.url, options),
      cluster: false,
      flush: () => direct.flushdb(),
      share: 0.04,
    })
  },
)
