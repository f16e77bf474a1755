import type { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { createFingerprinter } from '../../lib/idempotency/fingerprint.js'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { REDIS_KEY_PREFIX } from '../../lib/idempotency/redis.js'
import { saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, type Reply, send } from '../helpers/http.js'
import { startRedis } from '../helpers/redis.js'
import { type Answer, startBackend } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * The fingerprint key rotation of docs/idempotency.md (keyed fingerprints), played pod by pod on two
 * gateways that share one real Redis and one backend. At every step each gateway takes new payments,
 * each retried at once on both, and every payment recorded so far is retried on both. A retry is
 * replayed where its gateway holds the key its record was made under, and answered 503 (nothing
 * forwarded, retry after Retry-After) where it does not: never 422, never a second forward.
 */

const OLD = Buffer.alloc(32, 'o')
const NEW = Buffer.alloc(32, 'n')
/** The id a fingerprint made under the old key starts with (fingerprint.ts). */
const OLD_ID = createFingerprinter([OLD])
  .of('sale', Buffer.alloc(0), () => [])
  .value.split(' ')[0] as string

/** Each payment's answer names it, so that a replay of another payment's answer would show. */
const naming: Answer = (_req, res, body) => {
  const { transactionReference } = JSON.parse(body.toString()) as { transactionReference: string }
  res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ transactionReference }))
}

/** The keys of one gateway, the first signing (`--idempotency-fingerprint-key`'s lines). */
type Keys = readonly Buffer[]
/** Each pod's keys at one step, or the wait before the old key is dropped. */
type Step = readonly Keys[] | 'wait'

interface Recorded {
  readonly reference: string
  readonly payment: Record<string, unknown>
  readonly first: Reply
  /** The key its claim was made under: the first of the gateway that forwarded it. */
  readonly key: Buffer
}

const names = (keys: Keys) => keys.map((key) => (key === OLD ? 'old' : 'new')).join(', ')
const pay = (url: string, payment: object) => send(url, { headers: paymentHeaders(), body: payment })
let references = 0

/** Deletes the records made under the old key but `kept`, as their TTL does by the end of the wait. */
async function expireOld(client: Redis, kept: string): Promise<string[]> {
  const gone: string[] = []
  for (const key of await client.keys(`${REDIS_KEY_PREFIX}*`)) {
    const reference = (JSON.parse(key.slice(REDIS_KEY_PREFIX.length)) as string[])[1] as string
    const { fingerprint } = JSON.parse((await client.get(key)) as string) as { fingerprint: string }
    if (reference !== kept && fingerprint.startsWith(`${OLD_ID} `)) {
      await client.del(key)
      gone.push(reference)
    }
  }
  return gone
}

/**
 * Plays `steps` and checks every retry as the header says; resolves with the retries a gateway could not
 * compare (503), by step. After the wait one record under the old key is kept, as if the wait were cut short.
 */
async function rotate(t: Test, steps: readonly Step[]): Promise<string[]> {
  const redis = await startRedis(t)
  if (redis === undefined) return []
  const client = createRedisClient(redis.url) as Redis
  t.teardown(() => client.disconnect())
  t.ok(await whenReady(client, 5000))
  const backend = await startBackend(naming)
  t.teardown(() => backend.close())
  const start = async (keys: Keys) => {
    const { url, gateway } = await startGateway(t, {
      target: backend.url,
      idempotency: redis.url,
      idempotencyFingerprintKey: keys,
    })
    return { keys, url, stop: () => gateway.drain(0) }
  }
  const pods: Awaited<ReturnType<typeof start>>[] = []
  let recorded: Recorded[] = []
  let made = 0
  const cannotCompare: string[] = []

  async function retry(record: Recorded, pod: (typeof pods)[number], step: string): Promise<void> {
    const reply = await pay(pod.url, record.payment)
    const where = `${step}: ${record.reference} (under the ${names([record.key])} key) retried on [${names(pod.keys)}]`
    t.not(reply.status, 422, `${where}: never told to use a new reference`)
    if (pod.keys.includes(record.key)) {
      t.equal(reply.status, 201, where)
      t.equal(reply.headers['idempotent-replayed'], 'true', `${where}: replayed`)
      t.equal(reply.text, record.first.text, `${where}: its own answer`)
      return
    }
    cannotCompare.push(where)
    t.equal(reply.status, 503, `${where}: it cannot compare`)
    t.equal(reply.json.errorName, 'serviceUnavailable', where)
    t.equal(reply.headers['retry-after'], '1', where)
  }

  for (const [index, layout] of steps.entries()) {
    if (layout === 'wait') {
      const kept = recorded.find((record) => record.key === OLD)?.reference as string
      const gone = await expireOld(client, kept)
      t.ok(gone.length > 0, 'the wait: records under the old key expired, one kept')
      recorded = recorded.filter((record) => !gone.includes(record.reference))
      continue
    }
    // A rolling update: the pods whose keys change are replaced, one at a time.
    for (const [at, keys] of layout.entries()) {
      if (pods[at]?.keys === keys) continue
      await pods[at]?.stop()
      pods[at] = await start(keys)
    }
    const step = `step ${index + 1} ${pods.map((pod) => `[${names(pod.keys)}]`).join(' ')}`
    for (const on of pods) {
      for (const then of pods) {
        const reference = `rotation-${++references}`
        made++
        const payment = { ...saleBody(), transactionReference: reference }
        const first = await pay(on.url, payment)
        t.equal(first.status, 201, `${step}: a new payment is forwarded`)
        const record = { reference, payment, first, key: on.keys[0] as Buffer }
        recorded.push(record)
        await retry(record, then, step)
      }
    }
    for (const record of recorded) for (const pod of pods) await retry(record, pod, step)
    t.equal(backend.received.length, made, `${step}: each payment reached the backend once`)
  }
  return cannotCompare
}

t.test(
  'the rotation as documented, in three rolls: every retry replayed at every step, until the wait is cut short',
  async (t) => {
    references = 0
    const [old, added, swapped, alone] = [[OLD], [OLD, NEW], [NEW, OLD], [NEW]]
    const cannotCompare = await rotate(t, [
      [old, old],
      [added, old],
      [added, added],
      [swapped, added],
      [swapped, swapped],
      'wait',
      [alone, swapped],
      [alone, alone],
    ])
    // Only the record kept past the wait, on a gateway that no longer holds the old key.
    t.match(cannotCompare, [/^step 7 .*\(under the old key\) retried on \[new\]$/, /^step 8 /, /^step 8 /])
    t.equal(cannotCompare.length, 3)
  },
)

t.test(
  'the rotation in two rolls ([old] to [new, old], the wait, [new]): a retry on a gateway not rolled yet gets 503, then its replay',
  async (t) => {
    references = 0
    const [old, rotated, alone] = [[OLD], [NEW, OLD], [NEW]]
    const cannotCompare = await rotate(t, [
      [old, old],
      [rotated, old],
      [rotated, rotated],
      'wait',
      [alone, rotated],
      [alone, alone],
    ])
    t.ok(
      cannotCompare.some((where) => /^step 2 .*\(under the new key\) retried on \[old\]$/.test(where)),
      'mid-roll, a payment recorded by a rolled gateway cannot be compared by one not rolled yet',
    )
    t.notOk(
      cannotCompare.some((where) => where.startsWith('step 3 ')),
      'once both are rolled, every retry is replayed',
    )
  },
)
