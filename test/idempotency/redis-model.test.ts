import fc from 'fast-check'
import type { Redis } from 'ioredis'
import t from 'tap'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { redisKey, RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import { startFaultyProxy } from '../helpers/faulty-proxy.js'
import { runs } from '../helpers/fuzz.js'
import { startRedis } from '../helpers/redis.js'
import { FAULT, RetryingStore } from '../helpers/retrying-store.js'
import { OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'
import { runStoreModel, storeCommands, type ModelSettings } from '../helpers/store-model.js'

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

const COMMAND_TIMEOUT_MS = 150
const SETTINGS: ModelSettings = {
  ttlMs: 600_000,
  inFlightMs: 600_000,
  maxAnswerBytes: 2000,
  oversizedAnswer: OVERSIZED,
  unknownAnswer: UNKNOWN,
  capacity: Number.POSITIVE_INFINITY,
}

t.test(
  'the Redis store keeps the contract of the plain model through cut, dropped, late replies and resets',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const proxy = await startFaultyProxy(t, redis.port)
    const direct = createRedisClient(redis.url) as Redis
    t.teardown(() => direct.disconnect())
    t.ok(await whenReady(direct, 5000))
    const given: Error[] = []
    let failures = 0
    let commands = 0
    await fc.assert(
      fc.asyncProperty(
        storeCommands(SETTINGS, { advance: false, maxCommands: 20, maxBody: 3000 }),
        fc.array(FAULT, { maxLength: 20 }),
        async (run, planned) => {
          await direct.flushdb()
          const start = async () => {
            const options = {
              ...SETTINGS,
              commandTimeoutMs: COMMAND_TIMEOUT_MS,
              releaseRetry: { attempts: 30, firstDelayMs: 10, maxDelayMs: 50 },
              onError: (error: Error) => {
                if ((error as { code?: string }).code === 'ERELEASE') given.push(error)
              },
            }
            const store = new RedisIdempotencyStore(createRedisClient(proxy.url, options), options)
            if (!(await store.ready(5000))) throw new Error('the store did not connect')
            return {
              store: new RetryingStore(store, proxy, direct, [...planned], () => failures++, {
                stored: (key) => redisKey(key, false),
                lateMs: 2 * COMMAND_TIMEOUT_MS,
              }),
              check: () => void commands++,
            }
          }
          await runStoreModel(SETTINGS, start, run)
        },
      ),
      runs(0.04),
    )
    t.ok(commands > 0, `${commands} commands checked`)
    t.ok(failures > 0, `${failures} attempts failed and were tried again`)
    t.same(given, [], 'no release was given up')
  },
)
