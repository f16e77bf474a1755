import t from 'tap'
import { createIdempotencyStore } from '../../lib/idempotency/create-store.js'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import { RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import { startRedis } from '../helpers/redis.js'
import { OVERSIZED } from '../helpers/store-contract.js'

const OPTIONS = { ttlMs: 600_000, inFlightMs: 600_000, oversizedAnswer: OVERSIZED, unknownAnswer: OVERSIZED }

t.test('off is no store; memory is this process', async (t) => {
  t.equal(createIdempotencyStore('off', OPTIONS), undefined)
  t.ok(createIdempotencyStore('memory', OPTIONS) instanceof MemoryIdempotencyStore)
})

t.test('a redis:// spec is a Redis store on it', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  for (const spec of [redis.url, `redis://127.0.0.1:${redis.port}`, `redis://:secret@127.0.0.1:${redis.port}/15`, 'rediss://localhost/1']) {
    const store = createIdempotencyStore(spec, { ...OPTIONS, commandTimeoutMs: 200, onError: () => {} })
    t.ok(store instanceof RedisIdempotencyStore, spec)
    await store?.close()
  }
  const store = createIdempotencyStore(redis.url, OPTIONS) as RedisIdempotencyStore
  t.teardown(() => store.close())
  t.ok(await store.ready(5000))
  t.equal((await store.claim('k', 'f')).state, 'claimed')
})

t.test('anything else is refused with one line that hides a password', async (t) => {
  const bad = [
    '',
    'Memory',
    'redis',
    'redis://',
    'redis://host:0',
    'redis://host:6379/x',
    'redis://host:6379/100',
    'redis://host:6379/0?timeout=1',
    'http://host:6379',
    'redis://:hunter2@host:port',
  ]
  for (const spec of bad) {
    t.throws(() => createIdempotencyStore(spec, OPTIONS), { message: /^--idempotency ".*" is none of memory, off, redis:\/\/HOST:PORT\[\/DB\]$/, code: "EIDEMPOTENCY" }, spec)
  }
  t.throws(() => createIdempotencyStore('redis://:hunter2@host:port', OPTIONS), { message: /^(?!.*hunter2).*\*\*\*@host:port/ })
})
