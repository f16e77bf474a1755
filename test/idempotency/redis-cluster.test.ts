import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Cluster, Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { createIdempotencyStore } from '../../lib/idempotency/create-store.js'
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
import { EvictionWatch } from '../../lib/idempotency/eviction.js'
import { clusterSlots, redirection } from '../../lib/idempotency/redis-cluster.js'
import { RateLimiter } from '../../lib/rate-limit/limiter.js'
import { rateKey, RedisRateLimitStore } from '../../lib/rate-limit/redis.js'
import { redisKey, RedisIdempotencyStore, type RedisIdempotencyStoreOptions } from '../../lib/idempotency/redis.js'
import { loginKeys, RedisLoginThrottle } from '../../lib/login-throttle-redis.js'
import { createMetrics } from '../../lib/metrics.js'
import { startFaultyProxy, type FaultyProxy } from '../helpers/faulty-proxy.js'
import { policy } from '../helpers/fixtures.js'
import { until } from '../helpers/http.js'
import { slotOf, startRedisCluster, type RedisCluster, type Shard } from '../helpers/redis-cluster.js'
import { checkModelThroughFaults, FAULTY_STORE_OPTIONS } from '../helpers/retrying-store.js'
import { ANSWER, REDIS_STORE_OPTIONS } from '../helpers/store-contract.js'

/**
 * The Redis store and the login throttle on a real Redis Cluster (test/helpers/redis-cluster.ts), one for the
 * whole file: each test with keys and usernames of its own, and the shards' slots read when it runs (earlier tests
 * move some). docs/idempotency-reference.md, Redis Cluster. The last tests put one primary behind the faulty proxy
 * (test/helpers/faulty-proxy.ts; the Cluster client's `natMap` sends it there): a command whose reply is lost after
 * it ran is never sent again by the Cluster client, and the store keeps the contract of the plain model
 * (test/helpers/store-model.ts) through cut, dropped and late replies and resets.
 */

const OPTIONS = REDIS_STORE_OPTIONS

let cluster: RedisCluster | undefined
t.before(async () => {
  // No test here fails a node over: a node must be silent 5 s, not 1 s, before the others do, so that a loaded
  // machine's pause of one never promotes its replica under a test (a slot's owner would change under `moveSlot`).
  cluster = await startRedisCluster(t, { nodeTimeoutMs: 5000 })
})

/** A store on the cluster, through `createIdempotencyStore` as `serve` makes it, ready; closed when the test ends. */
async function open(
  t: Test,
  options: Partial<RedisIdempotencyStoreOptions> & { url?: string; password?: string } = {},
): Promise<RedisIdempotencyStore> {
  const errors: Error[] = []
  const store = createIdempotencyStore(options.url ?? (cluster as RedisCluster).url, {
    ...OPTIONS,
    onError: (error) => errors.push(error),
    ...options,
  }) as RedisIdempotencyStore
  t.teardown(() => store.close())
  t.ok(await store.ready(10_000), 'ready')
  return store
}

/** A key of the store's whose slot `shard` serves now (the store's key, tagged: `redisKey`). */
function keyOn(shard: Shard, name: string): string {
  for (let i = 0; ; i++) {
    const key = idempotencyKey('default', `${name}-${i}`)
    const slot = slotOf(redisKey(key, true))
    if (shard.slots.some(([first, last]) => slot >= first && slot <= last)) return key
  }
}

t.test('two stores on one cluster agree, and the keys of payments spread over every shard', async (t) => {
  if (cluster === undefined) return
  const a = await open(t)
  const b = await open(t)
  const key = idempotencyKey('default', 'agree-{1}')
  const claim = await a.claim(key, 'f')
  t.equal(claim.state, 'claimed', 'claimed on A')
  t.same(await b.claim(key, 'f'), { state: 'inFlight' }, 'in flight on B')
  if (claim.state === 'claimed') await a.record(key, claim.token, ANSWER)
  const replay = await b.claim(key, 'f')
  t.equal(replay.state === 'recorded' && replay.answer.body.equals(ANSWER.body), true, 'replayed on B')
  t.same(await b.claim(key, 'other'), { state: 'mismatch' })
  t.equal(await a.peek(key, 'f'), 'recorded', "report mode's look, through the Cluster client")

  const stored = `payments-gate:idem:{["default","agree-%7B1%7D"]}`
  t.equal(redisKey(key, true), stored, 'the whole key a hash tag, its braces percent-encoded')
  t.equal(redisKey(key, false), `payments-gate:idem:${key}`, 'on one Redis, as it always was')
  const owner = await cluster.shardOf(stored)
  t.ok(
    await cluster.ask(owner.primary, async (client) => (await client.exists(stored)) === 1),
    'the key is where the cluster says its slot is',
  )
  const keys = Array.from({ length: 40 }, (_, i) => idempotencyKey('one-merchant', `spread-${i}`))
  t.ok((await Promise.all(keys.map((one) => a.claim(one, 'f')))).every((one) => one.state === 'claimed'))
  for (const shard of await cluster.shards()) {
    const held = await cluster.ask(shard.primary, (client) => client.dbsize())
    t.ok(held > 0, `the shard of ${shard.primary.address} holds ${held} keys: one merchant's payments on every shard`)
  }
})

t.test(
  '--idempotency-replicas per shard: a shard whose replica is frozen fails its writes; the other shards acknowledge theirs',
  async (t) => {
    if (cluster === undefined) return
    const store = await open(t, { replicas: 1, commandTimeoutMs: 400 })
    const shards = await cluster.shards()
    const [slow, ...others] = shards as [Shard, ...Shard[]]
    const replica = slow.replicas[0] as NonNullable<Shard['replicas'][0]>
    replica.freeze()
    t.teardown(() => replica.thaw())
    const stuck = keyOn(slow, 'wait-slow')
    await t.rejects(store.claim(stuck, 'f'), {
      code: 'EREPLICAS',
      message: '0 of 1 replicas acknowledged the write within 400 ms',
    })
    for (const shard of others) {
      const key = keyOn(shard, 'wait-fine')
      const claim = await store.claim(key, 'f')
      t.equal(claim.state, 'claimed', `the shard of ${shard.primary.address}: acknowledged`)
      if (claim.state === 'claimed') await store.record(key, claim.token, ANSWER)
      t.equal((await store.claim(key, 'f')).state, 'recorded', 'and its record too')
    }
    replica.thaw()
    t.ok(
      await until(async () => (await store.claim(stuck, 'f').catch(() => undefined))?.state === 'claimed', 10_000),
      'the claim no replica acknowledged was released: its retry is claimed once the replica is back',
    )
  },
)

t.test(
  'acknowledged writes follow a slot that moved (MOVED) or is moving (ASK), and give up after three nodes; a slot without a primary is refused, and nothing released',
  async (t) => {
    if (cluster === undefined) return
    const redirected: string[] = []
    const store = await open(t, { replicas: 1, onRedirection: (kind, node) => redirected.push(`${kind} ${node}`) })
    const [from, to, other] = (await cluster.shards()) as [Shard, Shard, Shard]
    const idOf = (shard: Shard) => shard.id
    // ASK: the slot of a key moving from one primary to another, the key not on the first.
    const asked = keyOn(from, 'ask')
    const slot = slotOf(redisKey(asked, true))
    await cluster.ask(to.primary, (client) => client.cluster('SETSLOT', slot, 'IMPORTING', idOf(from)))
    await cluster.ask(from.primary, (client) => client.cluster('SETSLOT', slot, 'MIGRATING', idOf(to)))
    const claim = await store.claim(asked, 'f')
    t.equal(claim.state, 'claimed', 'claimed where the slot is moving to')
    t.same(redirected, [`ask ${to.primary.address}`])
    const there = async (client: Redis) => {
      await client.asking()
      return client.exists(redisKey(asked, true))
    }
    t.equal(await cluster.ask(to.primary, there), 1, 'on the primary it moves to')
    // The move ends: the slot is the second primary's; the Cluster client's slot map still says the first.
    for (const shard of [to, from, other])
      await cluster.ask(shard.primary, (client) => client.cluster('SETSLOT', slot, 'NODE', idOf(to)))
    let moved: string | undefined
    for (let i = 0; moved === undefined; i++) {
      const key = idempotencyKey('default', `moved-${i}`)
      if (slotOf(redisKey(key, true)) === slot) moved = key
    }
    t.equal((await store.claim(moved, 'f')).state, 'claimed', 'claimed where the slot moved to')
    t.same(redirected.slice(1), [`moved ${to.primary.address}`])
    if (claim.state === 'claimed') await store.record(asked, claim.token, ANSWER)
    t.equal((await store.claim(asked, 'f')).state, 'recorded', 'its record followed the slot too')

    // A slot one primary sends away (ASK) and the other sends back (MOVED): three nodes, then the write fails.
    const looped = keyOn(from, 'loop')
    const loop = slotOf(redisKey(looped, true))
    await cluster.ask(from.primary, (client) => client.cluster('SETSLOT', loop, 'MIGRATING', idOf(to)))
    t.teardown(() => cluster?.ask(from.primary, (client) => client.cluster('SETSLOT', loop, 'STABLE')))
    await t.rejects(store.claim(looped, 'f'), { message: /^ASK / })
    await cluster.ask(from.primary, (client) => client.cluster('SETSLOT', loop, 'STABLE'))
    t.equal((await store.claim(looped, 'f')).state, 'claimed', 'nothing was left to release: claimed')

    // A slot nobody serves: CLUSTERDOWN, the write did not run, and no release follows it.
    const orphan = keyOn(other, 'orphan')
    const unserved = slotOf(redisKey(orphan, true))
    const errors: Error[] = []
    // Its slot map read before the slot loses its primary, so the write goes to the node that dropped it.
    const quiet = await open(t, { replicas: 1, onError: (error) => errors.push(error) })
    await cluster.ask(other.primary, (client) => client.cluster('DELSLOTS', unserved))
    t.teardown(() => cluster?.ask(other.primary, (client) => client.cluster('ADDSLOTS', unserved)).catch(() => {}))
    await t.rejects(quiet.claim(orphan, 'f'), { message: /^CLUSTERDOWN/ })
    t.same(errors, [], 'no release was tried (its attempts would fail the same way, each reported)')
    await cluster.ask(other.primary, (client) => client.cluster('ADDSLOTS', unserved))
    t.equal((await quiet.claim(orphan, 'f')).state, 'claimed')
  },
)

t.test(
  "the login throttle on a cluster: a username's keys in one slot, ten failures across two gateways",
  async (t) => {
    if (cluster === undefined) return
    const clients = [createRedisClient(cluster.url), createRedisClient(cluster.url)]
    for (const client of clients) {
      t.teardown(() => closeRedisClient(client))
      t.ok(await whenReady(client, 10_000))
    }
    const errors: Error[] = []
    const [a, b] = clients.map(
      (client) => new RedisLoginThrottle(client, { maxFailures: 4, onError: (error) => errors.push(error) }),
    ) as [RedisLoginThrottle, RedisLoginThrottle]
    for (const throttle of [a, b, a, b]) await (await throttle.admit('shop-{1}'))?.settle(false)
    t.equal(await a.admit('shop-{1}'), undefined, 'locked on A')
    t.equal(await b.admit('shop-{1}'), undefined, 'and on B')
    const keys = loginKeys('shop-{1}', true)
    t.same(
      keys,
      [
        'payments-gate:login:locked:{"shop-%7B1%7D"}',
        'payments-gate:login:failures:{"shop-%7B1%7D"}',
        'payments-gate:login:reserved:{"shop-%7B1%7D"}',
      ],
      'each key tagged with the username as JSON',
    )
    t.same(loginKeys('', true).map(slotOf).length, 3)
    t.equal(new Set(loginKeys('', true).map(slotOf)).size, 1, 'an empty username too: its tag is "" and never empty')
    t.same(loginKeys('u', false), [
      'payments-gate:login:locked:u',
      'payments-gate:login:failures:u',
      'payments-gate:login:reserved:u',
    ])
    await b.clear('shop-{1}')
    t.ok(await a.admit('shop-{1}'), 'cleared across the shards the keys are on: one slot, one DEL')
    t.same(errors, [])
  },
)

t.test("the cluster's metrics: redirections by kind and node, node errors by node, slots by state", async (t) => {
  if (cluster === undefined) return
  const metrics = createMetrics({ defaultMetrics: false })
  const store = createIdempotencyStore(cluster.url, {
    ...OPTIONS,
    onError: () => {},
    clusterMetrics: metrics,
  }) as RedisIdempotencyStore
  t.teardown(() => store.close())
  t.ok(await store.ready(10_000))
  const text = () => metrics.registry.metrics()
  // Asked on ready and every 5 s after (observeCluster): the wait outlasts two asks, as one may meet the cluster unsettled.
  t.ok(
    await until(async () => /payments_gate_store_cluster_slots\{state="ok"} 16384/.test(await text()), 15_000),
    'the slots, asked once ready',
  )
  const [from, to] = (await cluster.shards()) as [Shard, Shard]
  const key = keyOn(from, 'metric-moved')
  const slot = slotOf(redisKey(key, true))
  await cluster.moveSlot(slot, to)
  t.equal((await store.claim(key, 'f')).state, 'claimed', 'the Cluster client followed the MOVED')
  t.match(await text(), `payments_gate_store_redirections_total{kind="moved",node="${to.primary.address}"} 1`)
  t.same(redirection(new Error('TRYAGAIN Multiple keys request during rehashing of slot')), {
    kind: 'tryagain',
    node: '',
  })
  t.equal(redirection(new Error('Command timed out')), undefined)
  t.equal(redirection('MOVED 1 127.0.0.1:1'), undefined, 'only an error is one')
  t.same(clusterSlots('cluster_state:fail\r\ncluster_slots_assigned:16000\r\ncluster_slots_ok:15000\r\n'), {
    ok: 15000,
    pfail: 0,
    fail: 0,
    unassigned: 384,
    unreachable: 0,
  })
})

/** The ACL of docs/idempotency-reference.md for a cluster's nodes: the gateway's user, its rules after its name. */
const documentedUser = (() => {
  const page = readFileSync(new URL('../../docs/idempotency-reference.md', import.meta.url), 'utf8')
  const block = /```conf\n([\s\S]*?)```/.exec(
    page.slice(page.indexOf("**What the gateway's user may run on each node**")),
  )
  const line = (block?.[1] ?? '').split('\n').find((one) => one.startsWith('user payments-gate on '))
  if (line === undefined) throw new Error("docs/idempotency-reference.md: no cluster ACL line for the gateway's user")
  return line.split(' ').slice(2)
})()

t.test(
  "the documented ACL on every node: the store, a slot moving and moved, the throttle and the rate limit run as the gateway's user; nothing else does",
  async (t) => {
    if (cluster === undefined) return
    const running = cluster
    const password = 'a cluster "pass\\word"'
    const hash = createHash('sha256').update(password).digest('hex')
    const rules = documentedUser.map((rule) => rule.replace('#PASSWORD_SHA256', `#${hash}`))
    for (const node of running.nodes)
      await running.ask(node, (client) => client.call('ACL', 'SETUSER', 'payments-gate', ...rules))
    t.teardown(async () => {
      for (const node of running.nodes)
        await running.ask(node, (client) => client.call('ACL', 'DELUSER', 'payments-gate')).catch(() => {})
    })
    const url = running.url.replace('redis-cluster://', 'redis-cluster://payments-gate@')
    const errors: Error[] = []
    const store = await open(t, { url, password, replicas: 1, onError: (error) => errors.push(error) })
    const [from, to, other] = (await running.shards()) as [Shard, Shard, Shard]
    const key = keyOn(from, 'acl-moving')
    const slot = slotOf(redisKey(key, true))
    await running.ask(to.primary, (client) => client.cluster('SETSLOT', slot, 'IMPORTING', from.id))
    await running.ask(from.primary, (client) => client.cluster('SETSLOT', slot, 'MIGRATING', to.id))
    const claim = await store.claim(key, 'f')
    t.equal(claim.state, 'claimed', 'claimed and acknowledged where the slot moves to (ASKING, WAIT)')
    t.equal(await store.peek(key, 'f'), 'inFlight', "report mode's look followed the ASK too")
    for (const shard of [to, from, other])
      await running.ask(shard.primary, (client) => client.cluster('SETSLOT', slot, 'NODE', to.id))
    if (claim.state === 'claimed') await store.record(key, claim.token, ANSWER)
    t.equal((await store.claim(key, 'f')).state, 'recorded', 'recorded where the slot moved to')
    const released = keyOn(from, 'acl-release')
    const held = await store.claim(released, 'f')
    if (held.state === 'claimed') await store.release(released, held.token)
    t.equal((await store.claim(released, 'f')).state, 'claimed', 'released, claimed again')
    const throttle = new RedisLoginThrottle(store.redis, { maxFailures: 2, onError: (error) => errors.push(error) })
    for (let i = 0; i < 2; i++) await (await throttle.admit('acl-user'))?.settle(false)
    t.equal(await throttle.admit('acl-user'), undefined, 'locked out after two failures, counted in the cluster')
    await (await throttle.admit('acl-other'))?.settle(true)
    await throttle.clear('acl-user')
    const counts = new RedisRateLimitStore(store.redis)
    const limit = { payments: 1, seconds: 60 }
    t.match(
      await counts.take('acl-entity', limit, 'one'),
      { admitted: true, counted: 1 },
      "the rate limit's script runs",
    )
    t.match(await counts.take('acl-entity', limit, 'one'), { admitted: true, counted: 1 }, 'sent twice, counted once')
    t.match(await counts.take('acl-entity', limit, 'two'), { admitted: false, counted: 1 })
    await counts.refund('acl-entity', 'one')
    t.match(await counts.take('acl-entity', limit, 'two'), { admitted: true, counted: 1 }, 'refunded, then admitted')
    t.same(errors, [], 'no command refused')
    await t.rejects(store.redis.get('elsewhere'), /NOPERM/, 'no key outside payments-gate:*')
    await t.rejects(store.redis.call('KEYS', 'payments-gate:*'), /NOPERM/, 'no listing of the keys')
    await t.rejects(store.redis.call('CLUSTER', 'FORGET', from.id), /NOPERM/, 'no change to the cluster')
  },
)

t.test(
  'a primary that may evict keys: its address named, every claim refused, on a client connected before',
  async (t) => {
    if (cluster === undefined) return
    const [shard] = await cluster.shards()
    const primary = (shard as Shard).primary
    await cluster.ask(primary, (client) => client.config('SET', 'maxmemory-policy', 'allkeys-lfu'))
    t.teardown(() => cluster?.ask(primary, (client) => client.config('SET', 'maxmemory-policy', 'noeviction')))
    const client = createRedisClient(cluster.url, {})
    t.ok(await whenReady(client, 10_000), 'every primary connected before the store is made')
    const store = new RedisIdempotencyStore(client, OPTIONS)
    t.teardown(() => store.close())
    t.match(await store.evicting(), {
      code: 'EEVICTION',
      message: `the Redis at ${primary.address} may evict keys (maxmemory-policy allkeys-lfu): a claim evicted in flight lets a retry through; set maxmemory-policy noeviction`,
    })
    await t.rejects(store.claim(idempotencyKey('default', 'evicting'), 'f'), { code: 'EEVICTION' })
  },
)

t.test("a claim answered while a node's policy is read is refused; none once every node was read", async (t) => {
  if (cluster === undefined) return
  const client = createRedisClient(cluster.url, {})
  t.teardown(() => closeRedisClient(client))
  const watch = new EvictionWatch(client)
  const seen: unknown[] = []
  // After the watch's own listeners: a node just connected has just been asked.
  client.on('+node', (node: Redis) => node.once('ready', () => seen.push(watch.refusalOf(client))))
  t.ok(await whenReady(client, 10_000))
  await watch.settled()
  t.match(seen[0], { code: 'EEVICTION', message: /is not read yet/ })
  t.equal(watch.refusalOf(client), undefined, 'every node read, each keeping every key')
})

t.test('a store on a cluster that is not there: created without throwing, never ready, claims refused', async (t) => {
  if (cluster === undefined) return
  const errors: Error[] = []
  const store = createIdempotencyStore('redis-cluster://127.0.0.1:1', {
    ...OPTIONS,
    replicas: 1,
    commandTimeoutMs: 100,
    onError: (error) => errors.push(error),
  }) as RedisIdempotencyStore
  t.equal(await store.ready(300), false)
  await t.rejects(store.claim('k', 'f'), { code: 'ENOTCONNECTED' })
  await store.close()
  t.ok(errors.length > 0, 'the refused connection was reported')
  t.not((store.redis as Cluster).status, 'reconnecting', 'no more attempts')
})

// Below, one primary behind the faulty proxy; the model's test comes last, as each of its runs flushes every shard.

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

t.test(
  'a claim whose reply is lost after it ran is never sent again: it fails, is released, and its retry is claimed',
  async (t) => {
    if (cluster === undefined) return
    const { proxy, shard, direct, client } = await faulty(t, cluster)
    const errors: Error[] = []
    const store = new RedisIdempotencyStore(
      client({ commandTimeoutMs: 1000, onError: (error) => errors.push(error) }),
      {
        ...FAULTY_STORE_OPTIONS,
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
    const store = new RedisIdempotencyStore(client({ commandTimeoutMs: 1000 }), {
      ...FAULTY_STORE_OPTIONS,
      replicas: 1,
    })
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
    const slot = slotOf((loginKeys(`lost-failure-${i}`, true) as [string, string, string])[1])
    if (shard.slots.some(([first, last]) => slot >= first && slot <= last)) user = `lost-failure-${i}`
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
  // On a loaded machine a command may still time out, and that failure is counted in this process alone
  // (reported, and never in the node): the next one that reaches the node is the second there.
  let reached = false
  for (let attempt = 0; attempt < 5 && !reached; attempt++) {
    const reported = errors.length
    const second = await throttle.admit(user)
    await second?.settle(false)
    reached = errors.length === reported
  }
  t.ok(reached, 'a later failure reached the node', { errors: errors.map((error) => error.message) })
  t.equal(await direct.get(failures), '2', 'the next failure is the second')
})

t.test(
  "the rate limit's count whose reply is lost is never sent again: the payment is refused (closed), never counted twice",
  async (t) => {
    if (cluster === undefined) return
    const { proxy, shard, direct, client } = await faulty(t, cluster)
    let entity = ''
    for (let i = 0; entity === ''; i++) {
      const slot = slotOf(rateKey(`lost-count-${i}`))
      if (shard.slots.some(([first, last]) => slot >= first && slot <= last)) entity = `lost-count-${i}`
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
    await checkModelThroughFaults(t, {
      proxy,
      direct,
      client,
      cluster: true,
      flush: async () => {
        for (const shard of await running.shards()) await running.ask(shard.primary, (redis) => redis.flushdb())
      },
      share: 0.02,
    })
  },
)
