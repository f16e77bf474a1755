import fc from 'fast-check'
import t, { type Test } from 'tap'
import { idempotencyKey } from '../../lib/idempotency/key.js'
import {
  closeRedisClient,
  connectCluster,
  createRedisClient,
  redisTarget,
  whenReady,
  type ClusterTarget,
  type RedisClient,
} from '../../lib/idempotency/redis-client.js'
import { redisKey, RedisIdempotencyStore, type RedisIdempotencyStoreOptions } from '../../lib/idempotency/redis.js'
import { loginKeys, RedisLoginThrottle } from '../../lib/login-throttle-redis.js'
import { RateLimiter } from '../../lib/rate-limit/limiter.js'
import { rateKey, RedisRateLimitStore } from '../../lib/rate-limit/redis.js'
import { startFaultyProxy, type FaultyProxy } from '../helpers/faulty-proxy.js'
import { policy } from '../helpers/fixtures.js'
import { runs } from '../helpers/fuzz.js'
import { until } from '../helpers/http.js'
import { slotOf, startRedisCluster, type RedisCluster, type Shard } from '../helpers/redis-cluster.js'
import { FAULT, RetryingStore } from '../helpers/retrying-store.js'
import { OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'
import { runStoreModel, storeCommands, type ModelSettings } from '../helpers/store-model.js'

/**
 * The Redis store and the login throttle on a real Redis Cluster with one primary behind the faulty proxy
 * (test/helpers/faulty-proxy.ts; the Cluster client's `natMap` sends it there): a command whose reply is lost after
 * it ran is never sent again by the Cluster client (docs/idempotency-reference.md, Redis Cluster), and the store keeps the
 * contract of the plain model (test/helpers/store-model.ts) through cut, dropped and late replies and resets.
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
const OPTIONS: RedisIdempotencyStoreOptions = {
  ...SETTINGS,
  releaseRetry: { attempts: 30, firstDelayMs: 10, maxDelayMs: 50 },
}

let cluster: RedisCluster | undefined
t.before(async () => {
  // No test here fails a node over: a node must be silent 5 s, not 1 s, before the others do, so that a loaded
  // machine's pause of one never promotes its replica under a test (a slot's owner would change under `moveSlot`).
  cluster = await startRedisCluster(t, { nodeTimeoutMs: 5000 })
})

interface Faulty {
  readonly proxy: FaultyProxy
  /** The shard whose primary is behind the proxy. */
  readonly shard: Shard
  /** A Cluster client past the proxy. */
  readonly direct: RedisClient
  /** A Cluster client with the gateway's settings, the shard's primary reached through the proxy. */
  client(options?: { commandTimeoutMs?: number; onError?: (error: Error) => void }): RedisClient
}

async function faulty(t: Test, running: RedisCluster): Promise<Faulty> {
  const shard = (await running.shards())[0] as Shard
  const proxy = await startFaultyProxy(t, shard.primary.port)
  const port = Number(new URL(proxy.url).port)
  const target = redisTarget(running.url) as ClusterTarget
  const direct = createRedisClient(running.url)
  t.teardown(() => closeRedisClient(direct))
  t.ok(await whenReady(direct, 10_000))
  return {
    proxy,
    shard,
    direct,
    client: (options = {}) => {
      const client = connectCluster(
        target,
        { onError: () => {}, ...options },
        {
          [shard.primary.address]: { host: '127.0.0.1', port },
        },
      )
      t.teardown(() => closeRedisClient(client))
      return client
    },
  }
}

/** A key of the store's whose slot `shard` serves. */
function keyOn(shard: Shard, name: string): string {
  for (let i = 0; ; i++) {
    const key = idempotencyKey('default', `${name}-${i}`)
    const slot = slotOf(redisKey(key, true))
    if (shard.slots.some(([first, last]) => slot >= first && slot <= last)) return key
  }
}

t.test(
  'a claim whose reply is lost after it ran is never sent again: it fails, is released, and its retry is claimed',
  async (t) => {
    if (cluster === undefined) return
    const { proxy, shard, direct, client } = await faulty(t, cluster)
    const errors: Error[] = []
    const store = new RedisIdempotencyStore(
      client({ commandTimeoutMs: 1000, onError: (error) => errors.push(error) }),
      {
        ...OPTIONS,
        onError: (error) => errors.push(error),
      },
    )
    t.teardown(() => store.close())
    t.ok(await store.ready(10_000))
    const key = keyOn(shard, 'cut-claim')
    const cut = proxy.cutReply(redisKey(key, true))
    // ioredis's default would send it again to another node 100 ms later, and the claim would answer "claimed".
    await t.rejects(store.claim(key, 'f'), { message: 'Connection is closed.' }, 'the claim ran, and lost its reply')
    await cut
    // The release goes to the node again once the Cluster client finds it; a retry before then gets 409.
    let retry: Awaited<ReturnType<typeof store.claim>> | undefined
    t.ok(
      await until(async () => {
        retry = await store.claim(key, 'f').catch(() => undefined)
        return retry?.state === 'claimed'
      }, 10_000),
      'released: a retry is claimed, never stuck at 409',
    )
    const stored = JSON.parse((await direct.get(redisKey(key, true))) as string) as { token: string }
    t.equal(stored.token, retry?.state === 'claimed' ? retry.token : '', "the retry's claim is the one kept")
    t.ok(proxy.connections >= 2, 'the node was reached again through a new connection')
  },
)

t.test(
  'an acknowledged write that follows a MOVED reaches the node where this process finds it (natMap), through the connections it holds to it',
  async (t) => {
    if (cluster === undefined) return
    const running = cluster
    const { shard, client } = await faulty(t, running)
    const store = new RedisIdempotencyStore(client({ commandTimeoutMs: 1000 }), { ...OPTIONS, replicas: 1 })
    t.teardown(() => store.close())
    t.ok(await store.ready(10_000))
    const shards = await running.shards()
    const from = shards.find(({ id }) => id !== shard.id) as Shard
    const key = keyOn(from, 'mapped')
    const slot = slotOf(redisKey(key, true))
    // The slot becomes the proxied primary's; the Cluster client's slot map still says the other one, which answers MOVED.
    await running.moveSlot(slot, shard)
    t.teardown(async () => {
      await running.ask(shard.primary, (redis) => redis.del(redisKey(key, true)))
      await running.moveSlot(slot, from)
    })
    // Sent to the address announced, it would find no connection ready there (not sent: the store fails fast).
    t.equal((await store.claim(key, 'f')).state, 'claimed', "through the proxy's connections, where the slot moved to")
    t.equal(await running.ask(shard.primary, (redis) => redis.exists(redisKey(key, true))), 1, 'on the proxied primary')
  },
)

t.test('a failure of the login throttle whose reply is lost is counted once in the cluster, never twice', async (t) => {
  if (cluster === undefined) return
  const { proxy, shard, direct, client } = await faulty(t, cluster)
  let user = ''
  for (let i = 0; user === ''; i++) {
    const slot = slotOf((loginKeys(`shop-${i}`, true) as [string, string, string])[1])
    if (shard.slots.some(([first, last]) => slot >= first && slot <= last)) user = `shop-${i}`
  }
  const redis = client({ commandTimeoutMs: 1000 })
  t.ok(await whenReady(redis, 10_000))
  const errors: Error[] = []
  const throttle = new RedisLoginThrottle(redis, { maxFailures: 10, onError: (error) => errors.push(error) })
  const [, failures] = loginKeys(user, true)
  const first = await throttle.admit(user)
  const cut = proxy.cutReply(failures)
  await first?.settle(false)
  await cut
  t.equal(errors.length, 1, 'the lost reply was reported (this process counted the failure in memory too)')
  t.equal(await direct.get(failures), '1', 'the script ran once')
  t.ok(await until(async () => (await redis.get(failures).catch(() => null)) === '1'), 'the node reached again')
  const second = await throttle.admit(user)
  await second?.settle(false)
  t.equal(await direct.get(failures), '2', 'the next failure is the second')
})

t.test(
  "the rate limit's count whose reply is lost is never sent again: the payment is refused (closed), never counted twice",
  async (t) => {
    if (cluster === undefined) return
    const { proxy, shard, direct, client } = await faulty(t, cluster)
    let entity = ''
    for (let i = 0; entity === ''; i++) {
      const slot = slotOf(rateKey(`shop-${i}`))
      if (shard.slots.some(([first, last]) => slot >= first && slot <= last)) entity = `shop-${i}`
    }
    const redis = client({ commandTimeoutMs: 1000 })
    t.ok(await whenReady(redis, 10_000))
    const errors: unknown[] = []
    const limiter = new RateLimiter(new RedisRateLimitStore(redis), { onError: (error) => errors.push(error) })
    const limited = policy({ entity, rateLimit: { payments: 5, seconds: 60 } })
    const cut = proxy.cutReply(rateKey(entity))
    // ioredis's default would send it again 100 ms later, and the count would answer "admitted".
    const admission = await limiter.admit(entity, limited)
    await cut
    t.match(admission, { outcome: 'unavailable' }, 'the count ran, lost its reply, and failed: 503 under closed')
    t.match(errors[0], { message: 'Connection is closed.' })
    t.ok((await direct.zcard(rateKey(entity))) <= 1, 'counted once at most (taken back once the node answers)')
  },
)

t.test(
  'the cluster store keeps the contract of the plain model through cut, dropped, late replies and resets on one node',
  async (t) => {
    if (cluster === undefined) return
    const running = cluster
    const { proxy, direct, client } = await faulty(t, running)
    const given: Error[] = []
    let failures = 0
    let commands = 0
    await fc.assert(
      fc.asyncProperty(
        storeCommands(SETTINGS, { advance: false, maxCommands: 20, maxBody: 3000 }),
        fc.array(FAULT, { maxLength: 20 }),
        async (run, planned) => {
          for (const shard of await running.shards()) await running.ask(shard.primary, (redis) => redis.flushdb())
          const start = async () => {
            const options = {
              ...OPTIONS,
              commandTimeoutMs: COMMAND_TIMEOUT_MS,
              onError: (error: Error) => {
                if ((error as { code?: string }).code === 'ERELEASE') given.push(error)
              },
            }
            const store = new RedisIdempotencyStore(client(options), options)
            if (!(await store.ready(10_000))) throw new Error('the store did not connect')
            return {
              store: new RetryingStore(store, proxy, direct, [...planned], () => failures++, {
                stored: (key) => redisKey(key, true),
                lateMs: 2 * COMMAND_TIMEOUT_MS,
              }),
              check: () => void commands++,
            }
          }
          await runStoreModel(SETTINGS, start, run)
        },
      ),
      runs(0.02),
    )
    t.ok(commands > 0, `${commands} commands checked`)
    t.ok(failures > 0, `${failures} attempts failed and were tried again`)
    t.same(given, [], 'no release was given up')
  },
)
