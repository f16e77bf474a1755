import { writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import { join } from 'node:path'
import t from 'tap'
import { hashPassword } from '../../lib/credentials/hash.js'
import { closeRedisClient, createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { loginKeys } from '../../lib/login-throttle-redis.js'
import { servedHere } from '../helpers/cli.js'
import {
  basic,
  ENTITIES,
  FINGERPRINT_KEY,
  policy,
  saleBody,
  TEST_COST,
  USERNAME,
  PASSWORD,
} from '../helpers/fixtures.js'
import { paymentHeaders, send, until, waitFor, type Reply } from '../helpers/http.js'
import { slotOf, startRedisCluster, type RedisCluster, type Shard } from '../helpers/redis-cluster.js'
import { closeServer, created, listenOnLoopback, type Answer, type Backend } from '../helpers/servers.js'
import { startGateway, testGate } from '../helpers/surfaces.js'
import { idempotencyKey } from '../../lib/idempotency/key.js'
import { redisKey } from '../../lib/idempotency/redis.js'
import { staticPolicies } from '../../lib/policy/policy.js'
import { rateKey } from '../../lib/rate-limit/redis.js'

/**
 * Gateways on a real Redis Cluster (docs/idempotency-reference.md, Redis Cluster), one cluster for the file: two gateways
 * share retry protection and the throttle; slots move under payments; a shard's primary is killed under
 * retrying clients (last: the cluster has one replica fewer after it). A payment is never forwarded twice.
 */

let cluster: RedisCluster | undefined
t.before(async () => {
  cluster = await startRedisCluster(t)
})

let references = 0
function sale(reference = `cluster-${++references}`): Record<string, any> {
  return { ...saleBody(), transactionReference: reference }
}

function pay(url: string, body: object): Promise<Reply> {
  return send(url, { headers: paymentHeaders(), body })
}

/** Sends the payment again while the store is unavailable (503), as a client would; bounded. */
async function payThrough(url: string, body: object): Promise<Reply> {
  let reply = await pay(url, body)
  for (let attempt = 0; attempt < 100 && reply.status === 503; attempt++) {
    await waitFor(50)
    reply = await pay(url, body)
  }
  return reply
}

/** Sends the payment again while it is in progress (409: its answer not recorded yet), as a client would; bounded. */
async function settled(url: string, body: object): Promise<Reply> {
  let reply = await pay(url, body)
  for (let attempt = 0; attempt < 100 && reply.status === 409; attempt++) reply = await pay(url, body)
  return reply
}

/** A reference whose payment's key (entity `default`, saleBody's) is in one of the slot ranges. */
function referenceIn(ranges: Shard['slots'], name: string): string {
  for (let i = 0; ; i++) {
    const slot = slotOf(redisKey(idempotencyKey('default', `${name}-${i}`), true))
    if (ranges.some(([first, last]) => slot >= first && slot <= last)) return `${name}-${i}`
  }
}

/** A reference whose payment's key `shard` serves. */
const referenceOn = (shard: Shard, name: string) => referenceIn(shard.slots, name)

/** How many times the backend received each reference. */
function forwarded(backend: Backend): Map<string, number> {
  const counts = new Map<string, number>()
  for (const request of backend.received) {
    const reference = (JSON.parse(request.body.toString()) as { transactionReference: string }).transactionReference
    counts.set(reference, (counts.get(reference) ?? 0) + 1)
  }
  return counts
}

/** What a client may be told while the cluster moves or fails over: 201 (first or replayed), 409, or 503, in the error format. */
function allowed(reply: Reply): boolean {
  if (reply.status === 201) return true
  if (reply.status === 409) return reply.json?.errorName === 'paymentIsInProgress'
  return reply.status === 503 && reply.json?.errorName === 'serviceUnavailable'
}

t.test(
  'two gateways (serve, and createGateway with createGate) share retry protection and the throttle, keys on every shard',
  async (t) => {
    if (cluster === undefined) return
    const dir = t.testdir()
    const credentials = join(dir, 'credentials.json')
    const password = await hashPassword(PASSWORD, TEST_COST)
    await writeFile(
      credentials,
      JSON.stringify({
        users: [
          { username: USERNAME, password, entities: ENTITIES },
          { username: 'shop-{locked}', password, entities: ENTITIES },
        ],
      }),
    )
    const b = await startGateway(t, { idempotency: cluster.url, gate: { credentials, throttleRedis: cluster.url } })
    const served = await servedHere(t, b.backend.url, { credentials, idempotency: cluster.url })
    const a = served.url
    t.match(
      served.lines.join('\n'),
      '"idempotency":"redis-cluster://127.0.0.1:',
      'the store named in the start-up line',
    )
    const payments = Array.from({ length: 24 }, () => sale())
    for (const [i, payment] of payments.entries()) {
      const [first, second] = i % 2 === 0 ? [a, b.url] : [b.url, a]
      t.equal((await pay(first, payment)).status, 201)
      const retry = await settled(second, payment)
      t.equal(retry.headers['idempotent-replayed'], 'true', `payment ${i}: its retry on the other gateway replayed`)
    }
    t.same(
      [...forwarded(b.backend).values()],
      payments.map(() => 1),
      'each forwarded once',
    )
    for (const shard of await cluster.shards())
      t.ok((await cluster.ask(shard.primary, (client) => client.dbsize())) > 0, `keys on ${shard.primary.address}`)

    const wrong = { authorization: basic('shop-{locked}', 'wrong') }
    for (let i = 0; i < 10; i++)
      t.equal((await send(i % 2 === 0 ? a : b.url, { headers: paymentHeaders(wrong), body: sale() })).status, 401)
    const direct = createRedisClient(cluster.url)
    t.teardown(() => closeRedisClient(direct))
    t.ok(await whenReady(direct, 10_000))
    const [locked] = loginKeys('shop-{locked}', true)
    t.equal(await direct.get(locked), '1', 'five wrong passwords on each gateway: ten, the username locked fleet-wide')
    const right = { authorization: basic('shop-{locked}', PASSWORD) }
    for (const url of [a, b.url])
      t.equal((await send(url, { headers: paymentHeaders(right), body: sale() })).status, 401, 'refused on both')
    t.notOk(
      served.lines.some((line) => /"level":(40|50)/.test(line)),
      'no store error logged',
    )
  },
)

t.test(
  "the rate limit on the cluster: a gateway and a gate around an application's handler count each entity's payments together, exactly, each entity's key on its own slot",
  async (t) => {
    if (cluster === undefined) return
    const running = cluster
    const payments = 4
    const policies = staticPolicies(ENTITIES.map((entity) => policy({ entity, rateLimit: { payments, seconds: 60 } })))
    const gateway = await startGateway(t, { idempotency: running.url, gate: { policies } })
    const gate = await testGate(t, { policies, idempotency: running.url, idempotencyFingerprintKey: FINGERPRINT_KEY })
    let handled = 0
    const server = createServer(
      gate.handler((_req, res) => {
        handled++
        res.statusCode = 201
        res.end()
      }),
    )
    const app = `http://127.0.0.1:${await listenOnLoopback(server)}`
    t.teardown(() => closeServer(server))
    const direct = createRedisClient(running.url)
    t.teardown(() => closeRedisClient(direct))
    t.ok(await whenReady(direct, 10_000))
    // Two entities whose keys two shards serve (the tag is the entity's, rate-limit/redis.ts).
    const entities = ['default', 'ghost']
    const shards = await Promise.all(entities.map(async (entity) => (await running.shardOf(rateKey(entity))).id))
    t.not(shards[0], shards[1], 'the two entities counted on two shards')
    for (const entity of entities) {
      const bodies = Array.from({ length: 3 * payments }, () => ({ ...sale(), merchant: { entity } }))
      const replies = await Promise.all(bodies.map((body, i) => pay(i % 2 === 0 ? gateway.url : app, body)))
      const statuses = replies.map(({ status }) => status)
      t.equal(statuses.filter((status) => status === 201).length, payments, `${entity}: ${payments} of ${3 * payments}`)
      t.equal(statuses.filter((status) => status === 429).length, 2 * payments, `${entity}: the rest 429`)
      t.equal(await direct.zcard(rateKey(entity)), payments, `${entity}: counted in one key`)
      // A retry of one that passed, sent to the other side: the same payment, replayed, not counted. Its answer is
      // recorded just after it was sent: a retry meanwhile is 409, as a client would see.
      const passed = statuses.indexOf(201)
      const retry = await settled(passed % 2 === 0 ? app : gateway.url, bodies[passed] as object)
      t.equal(retry.headers['idempotent-replayed'], 'true', `${entity}: replayed by the other side`)
      t.equal(await direct.zcard(rateKey(entity)), payments, `${entity}: the replay not counted`)
    }
    t.equal(gateway.backend.received.length + handled, 2 * payments, 'only the counted reached a backend or a handler')
  },
)

t.test(
  'slots moved with redis-cli --cluster reshard while payments flow: nothing forwarded twice, every answer 201, a replay, 409 or 503',
  async (t) => {
    if (cluster === undefined) return
    const running = cluster
    const { url, backend } = await startGateway(t, { idempotency: running.url, idempotencyReplicas: 1 })
    const [from, to] = (await running.shards()) as [Shard, Shard]
    // redis-cli moves the source's lowest slots first: the payments go to those.
    const first = (from.slots[0] as readonly [number, number])[0]
    const moves: Shard['slots'] = [[first, first + 299]]
    const replies: Reply[] = []
    const reshard = { done: false }
    const client = async (name: string) => {
      for (let i = 0; !reshard.done || i < 3; i++) {
        const payment = sale(referenceIn(moves, `${name}-${i}`))
        replies.push(await pay(url, payment), await pay(url, payment))
      }
    }
    const clients = Promise.all(['r1', 'r2', 'r3', 'r4'].map(client))
    await running.reshard(from, to, 300)
    reshard.done = true
    await clients
    await running.settled()
    t.ok(replies.length > 20, `${replies.length} answers while the slots moved`)
    const refused = replies.filter((reply) => !allowed(reply))
    t.same(
      refused.map((reply) => `${reply.status} ${reply.text}`),
      [],
      'no answer but 201, a replay, 409 or 503',
    )
    const twice = [...forwarded(backend).entries()].filter(([, count]) => count > 1)
    t.same(twice, [], 'nothing forwarded twice')
    t.ok(
      replies.some((reply) => reply.headers['idempotent-replayed'] === 'true'),
      'retries replayed while the slots moved',
    )
    const count = (shard: Shard) => shard.slots.reduce((sum, [low, high]) => sum + high - low + 1, 0)
    const moved = (await running.shards()).find((shard) => shard.id === to.id) as Shard
    t.equal(count(moved), count(to) + 300, 'the slots moved')
  },
)

/** The backend's answer, after `onReceived` ran once the payment is in. */
const answeringAfter =
  (onReceived: () => Promise<void>): Answer =>
  (req, res, body) =>
    void onReceived().then(() => created(req, res, body))

t.test(
  "a shard's primary killed under retrying clients: 503 while its slots have no primary, the other shards' payments pass, nothing forwarded twice, retries replayed, new payments protected again without a restart",
  async (t) => {
    if (cluster === undefined) return
    const running = cluster
    const errors: unknown[] = []
    const { url, backend } = await startGateway(t, {
      idempotency: running.url,
      idempotencyReplicas: 1,
      onStoreError: (error) => errors.push(error),
    })
    const [doomed, ...others] = (await running.shards()) as [Shard, ...Shard[]]
    const before = Array.from({ length: 6 }, (_, i) =>
      sale(referenceOn(i % 2 === 0 ? doomed : (others[0] as Shard), `before-${i}`)),
    )
    const first: Reply[] = []
    for (const payment of before) first.push(await pay(url, payment))
    t.same(
      first.map((reply) => reply.status),
      before.map(() => 201),
    )
    // One payment is with the backend when its shard's primary dies: its record waits for the new primary.
    const caught = sale(referenceOn(doomed, 'caught'))
    backend.answer = answeringAfter(async () => {
      backend.answer = created
      await doomed.primary.kill()
    })
    t.equal((await pay(url, caught)).status, 201, 'its client has its answer')

    const stopped = sale(referenceOn(doomed, 'while-down'))
    const elsewhere = sale(referenceOn(others[0] as Shard, 'while-down-elsewhere'))
    const down = await pay(url, stopped)
    t.equal(down.status, 503, 'a payment on the shard without a primary: 503')
    t.equal(down.json.errorName, 'serviceUnavailable')
    t.equal((await pay(url, elsewhere)).status, 201, "another shard's payment passes")

    await running.settled(2)
    let retries: Reply[] = []
    t.ok(
      await until(async () => {
        retries = await Promise.all([...before, caught].map((payment) => pay(url, payment)))
        return retries.every((reply) => reply.status === 201)
      }, 20_000),
      'every retry answered once the replica took over, without a restart',
    )
    t.ok(
      retries.every((reply) => reply.headers['idempotent-replayed'] === 'true'),
      'replayed: the claims and records were on the replica, and the record of the payment caught was sent again',
    )
    t.same(
      retries.slice(0, before.length).map((reply) => reply.text),
      first.map((reply) => reply.text),
      'the answers recorded before the primary died',
    )
    // The promoted replica has no replica of its own: with --idempotency-replicas 1, its shard's new payments wait
    // for the lost node, which comes back as a replica of its former replica.
    const refusedNow = await pay(url, stopped)
    t.equal(refusedNow.status, 503, 'a new payment on that shard, while its primary has no replica: 503')
    t.match(errors.at(-1), { code: 'EREPLICAS' })
    await doomed.primary.restart()
    await running.settled(3)
    const now = await payThrough(url, stopped)
    t.equal(now.status, 201, 'the payment refused while down is forwarded now, without a restart of the gateway')
    const again = await pay(url, stopped)
    t.equal(again.headers['idempotent-replayed'], 'true', 'and protected')
    t.same(
      [...forwarded(backend).values()].filter((count) => count > 1),
      [],
      'nothing forwarded twice',
    )
  },
)
