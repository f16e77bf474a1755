import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { Metrics } from '../../lib/metrics.js'
import { saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, type Reply, send, until, waitFor } from '../helpers/http.js'
import { startRedis, startSentinel, type RedisServer } from '../helpers/redis.js'
import { created, type Answer } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * Retry protection on a replicated Redis (docs/idempotency-reference.md, replicas and
 * failover), with real processes: a primary, its replicas and a Sentinel; a
 * primary lost after payments were recorded, and replicas that cannot
 * acknowledge. A payment is never forwarded twice.
 */

let references = 0
function sale(reference = `failover-${++references}`): Record<string, any> {
  return { ...saleBody(), transactionReference: reference }
}

function pay(url: string, body: object): Promise<Reply> {
  return send(url, { headers: paymentHeaders(), body })
}

/**
 * Sends the payment again while the store is unavailable (503), or while its claim that no replica acknowledged is
 * still being released (409, `Retry-After`), as a client would; bounded, so that a claim never released fails.
 */
async function payThrough(url: string, body: object): Promise<Reply> {
  let reply = await pay(url, body)
  for (let attempt = 0; attempt < 150 && (reply.status === 503 || reply.status === 409); attempt++) {
    await waitFor(100)
    reply = await pay(url, body)
  }
  return reply
}

/** How many payments retry protection gave this outcome, from the gateway's metrics. */
async function outcomes(metrics: Metrics, outcome: string): Promise<number> {
  const counted = new RegExp(`payments_gate_retry_protection_total\\{outcome="${outcome}"\\} (\\d+)`).exec(
    await metrics.registry.metrics(),
  )
  return Number(counted?.[1] ?? 0)
}

async function replicated(
  t: Test,
  replicas: number,
): Promise<{ primary: RedisServer; replicas: RedisServer[] } | undefined> {
  const primary = await startRedis(t)
  if (primary === undefined) return undefined
  const started: RedisServer[] = []
  for (let i = 0; i < replicas; i++) started.push((await startRedis(t, { replicaOf: primary })) as RedisServer)
  return { primary, replicas: started }
}

// Each test has its own servers, gateways and backends, and waits on Redis (a failover, a replica's timeout):
// the three side by side.
t.jobs = 3

t.test(
  'Sentinel: the primary killed after payments were recorded; every retry replayed from the promoted replica, nothing forwarded twice, new payments protected again without a restart',
  async (t) => {
    const servers = await replicated(t, 2)
    if (servers === undefined) return
    const sentinel = await startSentinel(t, servers.primary, 1000)
    const { url, backend } = await startGateway(t, { idempotency: sentinel.url, idempotencyReplicas: 1 })
    const payments = Array.from({ length: 10 }, () => sale())
    const first: Reply[] = []
    for (const payment of payments) first.push(await pay(url, payment))
    t.same(
      first.map((reply) => reply.status),
      payments.map(() => 201),
    )
    // A client has its answer before the record is written (docs/idempotency-reference.md): the primary dies once
    // every record is on it (a retry replayed there) and on both replicas (a write of ours after them, acknowledged
    // by both: replication keeps the primary's order).
    for (const [i, payment] of payments.entries())
      t.ok(
        await until(async () => (await pay(url, payment)).headers['idempotent-replayed'] === 'true', 10_000),
        `payment ${i} recorded`,
      )
    const client = new Redis(servers.primary.url, { maxRetriesPerRequest: 0 })
    t.teardown(() => client.disconnect())
    await client.set('failover-after-the-records', '1')
    t.equal(await client.call('WAIT', '2', '10000'), 2, 'both replicas have the records')
    // Before the kill: a client left connected would try the dead primary again, and print its refusals.
    client.disconnect()
    await servers.primary.kill()
    t.ok(
      await until(async () => (await sentinel.primaryPort()) !== servers.primary.port, 15_000),
      'Sentinel promoted a replica',
    )
    for (const [i, payment] of payments.entries()) {
      const retry = await payThrough(url, payment)
      t.equal(retry.status, 201, `retry ${i}`)
      t.equal(retry.headers['idempotent-replayed'], 'true', `retry ${i} replayed`)
      t.equal(retry.text, first[i]?.text, `retry ${i}: the answer recorded before the failover`)
    }
    t.equal(backend.received.length, payments.length, 'nothing forwarded twice')
    const after = sale()
    t.equal((await payThrough(url, after)).status, 201, 'a new payment, through the new primary, without a restart')
    // Its record is written after its answer, as above: a retry before it is told 409, and is not forwarded either.
    t.ok(
      await until(async () => (await pay(url, after)).headers['idempotent-replayed'] === 'true', 10_000),
      'and protected',
    )
    t.equal(backend.received.length, payments.length + 1)
  },
)

/** The backend's answer, after `onReceived` ran once the payment is in. */
const answeringAfter =
  (onReceived: () => Promise<void>): Answer =>
  (req, res, body) =>
    void onReceived().then(() => created(req, res, body))

t.test(
  '--idempotency-replicas: a replica that cannot acknowledge makes a claim a store failure, released; closed refuses, open forwards unprotected',
  async (t) => {
    const servers = await replicated(t, 1)
    if (servers === undefined) return
    const replica = servers.replicas[0] as RedisServer
    const closed = await startGateway(t, { idempotency: servers.primary.url, idempotencyReplicas: 1 })
    const open = await startGateway(t, {
      idempotency: servers.primary.url,
      idempotencyReplicas: 1,
      idempotencyFailure: 'open',
      target: closed.backend.url,
    })
    const payment = sale()
    // Through: on a loaded machine the replica may miss the bound once; such a claim is refused and released.
    t.equal((await payThrough(closed.url, payment)).status, 201, 'acknowledged: forwarded')
    t.equal((await pay(closed.url, payment)).headers['idempotent-replayed'], 'true')

    replica.freeze()
    t.teardown(() => replica.thaw())
    const unacknowledged = sale()
    const unavailable = await outcomes(closed.metrics, 'storeUnavailable')
    const refused = await pay(closed.url, unacknowledged)
    t.equal(refused.status, 503, 'closed: refused')
    t.equal(refused.json.errorName, 'serviceUnavailable')
    t.equal(closed.backend.received.length, 1, 'nothing forwarded')
    t.equal(await outcomes(closed.metrics, 'storeUnavailable'), unavailable + 1)
    const forwarded = await pay(open.url, sale())
    t.equal(forwarded.status, 201, 'open: forwarded')
    t.match(await open.metrics.registry.metrics(), /payments_gate_retry_protection_total\{outcome="unprotected"\} 1/)
    t.equal(closed.backend.received.length, 2)
    replica.thaw()

    const retried = await payThrough(closed.url, unacknowledged)
    t.equal(retried.status, 201, 'the refused claim was released: its retry is forwarded once the replica answers')
    t.equal(retried.headers['idempotent-replayed'], undefined)
    t.equal(closed.backend.received.length, 3)
  },
)

t.test(
  '--idempotency-replicas: a record the replica cannot acknowledge is reported; the client has its answer, and the retry gets it',
  async (t) => {
    const servers = await replicated(t, 1)
    if (servers === undefined) return
    const replica = servers.replicas[0] as RedisServer
    const errors: unknown[] = []
    // The replica stops answering once the claim is acknowledged and the payment is with the backend.
    const { url, backend } = await startGateway(t, {
      idempotency: servers.primary.url,
      idempotencyReplicas: 1,
      onStoreError: (error) => errors.push(error),
      answer: answeringAfter(async () => replica.freeze()),
    })
    t.teardown(() => replica.thaw())
    const payment = sale()
    t.equal((await payThrough(url, payment)).status, 201)
    t.ok(await until(() => errors.length > 0), 'the record not acknowledged in time is reported')
    t.match(errors[0], { code: 'EREPLICAS', message: /0 of 1 replicas acknowledged the write within 1000 ms/ })
    replica.thaw()
    const retry = await pay(url, payment)
    t.equal(retry.headers['idempotent-replayed'], 'true', 'the record is on the primary')
    t.equal(backend.received.length, 1)
  },
)
