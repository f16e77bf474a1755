import t from 'tap'
import { createRedisClient } from '../../lib/idempotency/redis-client.js'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import { RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import { startRedis } from '../helpers/redis.js'
import {
  type MakeStore,
  MAX_ANSWER_BYTES,
  OVERSIZED,
  UNKNOWN,
  peekContract,
  storeContract,
  unknownOutcomeContract,
} from '../helpers/store-contract.js'

t.test('memory store', async (t) => {
  const make: MakeStore = async (t, options) => {
    let time = 1_000_000
    const store = new MemoryIdempotencyStore({
      ...options,
      maxAnswerBytes: MAX_ANSWER_BYTES,
      oversizedAnswer: OVERSIZED,
      unknownAnswer: UNKNOWN,
      now: () => time,
    })
    t.teardown(() => store.close())
    return { store, exact: true, holdsLate: true, advance: async (ms) => void (time += ms) }
  }
  storeContract(t, make)
  unknownOutcomeContract(t, make)
  peekContract(t, make)
})

t.test('redis store', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const make: MakeStore = async (t, options) => {
    const store = new RedisIdempotencyStore(createRedisClient(redis.url), {
      ...options,
      maxAnswerBytes: MAX_ANSWER_BYTES,
      oversizedAnswer: OVERSIZED,
      unknownAnswer: UNKNOWN,
    })
    t.teardown(() => store.close())
    t.ok(await store.ready(5000), 'connected')
    await store.redis.flushdb()
    // Redis expires a key when it is read after its time: wait the time and a little more.
    return { store, exact: false, advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms + 20)) }
  }
  storeContract(t, make)
  unknownOutcomeContract(t, make)
  peekContract(t, make)
})
