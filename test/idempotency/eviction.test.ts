import { Redis } from 'ioredis'
import t from 'tap'
import { EvictionWatch, evictionPolicy } from '../../lib/idempotency/eviction.js'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { REDIS_KEY_PREFIX, RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import { startFaultyProxy } from '../helpers/faulty-proxy.js'
import { ask, startRedis } from '../helpers/redis.js'
import { ANSWER, REDIS_STORE_OPTIONS } from '../helpers/store-contract.js'
import { until } from '../helpers/wait.js'

/**
 * A Redis store refuses claims on a server whose maxmemory-policy may evict keys: one evicted in flight would let a
 * retry through (docs/idempotency.md). The policy is read on each connection as it becomes ready.
 */

const OPTIONS = REDIS_STORE_OPTIONS

t.test("the policy is INFO memory's maxmemory_policy line", async (t) => {
  t.equal(evictionPolicy('# Memory\r\nused_memory:1\r\nmaxmemory_policy:allkeys-lru\r\n'), 'allkeys-lru')
  t.equal(evictionPolicy('# Memory\r\nused_memory:1\r\n'), undefined, 'none told')
})

t.test(
  'a server that may evict: claims refused, and let go; read again on reconnection, claims taken once it keeps every key',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    await ask(redis.port, (client) => client.config('SET', 'maxmemory-policy', 'volatile-lru'))
    for (const replicas of [0, 1]) {
      const client = createRedisClient(redis.url, {})
      // A client of the caller's may be connected already (createGate's `idempotency` store); the other not yet.
      if (replicas === 0) t.ok(await whenReady(client, 5000))
      const store = new RedisIdempotencyStore(client, { ...OPTIONS, replicas })
      t.teardown(() => store.close())
      t.match(
        await store.evicting(),
        {
          code: 'EEVICTION',
          message: new RegExp(
            `^the Redis at 127\\.0\\.0\\.1:${redis.port} may evict keys \\(maxmemory-policy volatile-lru\\): a claim evicted in flight lets a retry through; set maxmemory-policy noeviction$`,
          ),
        },
        `replicas ${replicas}: start-up's refusal`,
      )
      // With replicas, the claim goes out on a connection of its own, read as the client is.
      await t.rejects(store.claim(`evicted-${replicas}`, 'f'), { code: 'EEVICTION' }, 'a claim refused')
      t.ok(
        await until(async () => (await ask(redis.port, (client) => client.keys(`${REDIS_KEY_PREFIX}*`))).length === 0),
        'and let go',
      )
      await store.close()
    }

    // Read again only at reconnection here: the read every policyRecheckMs has its own test below.
    const store = new RedisIdempotencyStore(createRedisClient(redis.url, {}), {
      ...OPTIONS,
      policyRecheckMs: 3_600_000,
    })
    t.teardown(() => store.close())
    t.ok(await store.evicting(), 'refused')
    await ask(redis.port, (client) => client.config('SET', 'maxmemory-policy', 'noeviction'))
    await t.rejects(store.claim('before', 'f'), { code: 'EEVICTION' }, 'read at connection, not at each claim')
    const ready = new Promise((resolve) => store.redis.once('ready', resolve))
    store.redis.disconnect(true)
    await ready
    const claim = await store.claim('after', 'f')
    t.equal(claim.state, 'claimed', 'read again once reconnected: claims taken')
    if (claim.state === 'claimed') await store.record('after', claim.token, ANSWER)
    t.equal(await store.evicting(), undefined, 'no refusal')
  },
)

t.test("a server that does not tell its policy (INFO denied to the gateway's user) is refused too", async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  await ask(redis.port, (client) => client.acl('SETUSER', 'gw', 'on', '>pw', '~*', '+@all', '-info'))
  const store = new RedisIdempotencyStore(createRedisClient(`redis://gw:pw@127.0.0.1:${redis.port}/0`, {}), OPTIONS)
  t.teardown(() => store.close())
  t.match(await store.evicting(), {
    code: 'EEVICTION',
    message: /does not tell its maxmemory-policy \(INFO memory\): .*; allow the gateway's user INFO$/,
  })
  await t.rejects(store.claim('unknown', 'f'), { code: 'EEVICTION' })
})

t.test('a server where INFO is renamed away is refused, and asked again only after policyRecheckMs', async (t) => {
  const redis = await startRedis(t, { args: ['--rename-command', 'INFO', 'OWNINFO'] })
  if (redis === undefined) return
  // A client of the caller's: ours checks that the server is ready with INFO, so never connects to this one.
  const client = new Redis({ port: redis.port, host: '127.0.0.1', enableReadyCheck: false })
  const store = new RedisIdempotencyStore(client, { ...OPTIONS, policyRecheckMs: 3_600_000 })
  t.teardown(() => store.close())
  t.match(await store.evicting(), { code: 'EEVICTION', message: /does not tell its maxmemory-policy/ })
  // The server's count of the errors it answered (an unknown command is one).
  const errors = async () => /^total_error_replies:(\d+)/m.exec((await client.call('OWNINFO', 'stats')) as string)?.[1]
  const before = await errors()
  // Each claim a round trip on the connection the policy is asked on: a read asked again at each error would be there too.
  for (let claim = 0; claim < 20; claim++) await t.rejects(store.claim(`renamed-${claim}`, 'f'), { code: 'EEVICTION' })
  // Red before: INFO asked again at once after each error, as fast as the server answered, for ever.
  t.equal(await errors(), before, 'not asked again meanwhile')
})

t.test(
  'a policy changed while connected (CONFIG SET, an ACL that denies INFO) is read again within policyRecheckMs',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    await ask(redis.port, (client) => client.acl('SETUSER', 'gw', 'on', '>pw', '~*', '+@all'))
    const store = new RedisIdempotencyStore(createRedisClient(`redis://gw:pw@127.0.0.1:${redis.port}/0`, {}), {
      ...OPTIONS,
      policyRecheckMs: 20,
    })
    t.teardown(() => store.close())
    const refusal = async () => (await store.evicting())?.message
    t.equal(await refusal(), undefined, 'keeps every key at start')
    await ask(redis.port, (client) => client.config('SET', 'maxmemory-policy', 'allkeys-lru'))
    t.ok(await until(async () => (await refusal()) !== undefined), 'an evicting policy set while connected: read')
    t.match(await refusal(), /may evict keys \(maxmemory-policy allkeys-lru\)/)
    await t.rejects(store.claim('evicting', 'f'), { code: 'EEVICTION' }, 'claims refused')
    await ask(redis.port, (client) => client.config('SET', 'maxmemory-policy', 'noeviction'))
    t.ok(await until(async () => (await refusal()) === undefined), 'set back: read')
    t.equal((await store.claim('kept', 'f')).state, 'claimed', 'claims taken')
    await ask(redis.port, (client) => client.acl('SETUSER', 'gw', '-info'))
    t.ok(await until(async () => (await refusal()) !== undefined), 'INFO denied while connected: read')
    t.match(await refusal(), /does not tell its maxmemory-policy/)
  },
)

t.test('a policy read that timed out is asked again; one lost with its connection, once it is back', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const proxy = await startFaultyProxy(t, redis.port)
  const claimed = (store: RedisIdempotencyStore) =>
    until(async () => (await store.claim(`k-${Math.random()}`, 'f').catch(() => null)) !== null)
  for (const [fault, name, connections] of [
    [() => proxy.delayReply('memory', 600), 'held past the command timeout', 1],
    [() => proxy.cutReply('memory'), 'cut with its connection', 2],
  ] as const) {
    const before = proxy.connections
    const met = fault()
    const store = new RedisIdempotencyStore(createRedisClient(proxy.url, { commandTimeoutMs: 200 }), OPTIONS)
    t.teardown(() => store.close())
    await met
    t.ok(await claimed(store), `${name}: read again, claims taken`)
    t.equal(proxy.connections - before, connections, `${name}: on ${connections} connection(s)`)
    t.equal(await store.evicting(), undefined)
    await store.close()
  }
})

t.test(
  'a read refused at once on a connection going down is asked again once it is back, not at once for ever',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const client = createRedisClient(redis.url, {}) as Redis
    t.teardown(() => client.disconnect())
    t.ok(await whenReady(client, 5000))
    // Still `ready` until its close is heard, but its stream takes no more writes: ioredis refuses INFO at once.
    client.stream.end()
    const watch = new EvictionWatch(client)
    // Red before: the refusal asked again in the same turn, for ever, and this close was never heard.
    await new Promise((resolve) => client.once('close', resolve))
    t.match(watch.refusalOf(client), { message: /is not read yet/ }, 'claims refused meanwhile')
    t.ok(await until(() => watch.refusalOf(client) === undefined), 'read once the connection is back')
  },
)

t.test('a claim answered on a connection whose policy is not read yet is refused', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const client = createRedisClient(redis.url, {})
  t.teardown(() => client.disconnect())
  const watch = new EvictionWatch(client)
  // After the watch's own listener, which has just asked.
  const seen = await new Promise((resolve) => client.once('ready', () => resolve(watch.refusalOf(client))))
  t.match(seen, { code: 'EEVICTION', message: /is not read yet/ })
  await watch.settled()
  t.equal(watch.refusalOf(client), undefined, 'read, and keeping every key')
})

t.test(
  'a policy read whose connection goes before its answer is asked again: claims taken once it is read',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const store = new RedisIdempotencyStore(createRedisClient(redis.url, {}), OPTIONS)
    t.teardown(() => store.close())
    // After the store's own listener, which has just asked: the connection goes before any answer can come.
    store.redis.once('ready', () => (store.redis as Redis).stream.destroy())
    t.ok(await until(async () => (await store.claim(`k-${Math.random()}`, 'f').catch(() => null)) !== null))
    t.equal(await store.evicting(), undefined)
  },
)
