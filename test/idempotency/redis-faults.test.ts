import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { storeErrorReporter } from '../../lib/cli/serve.js'
import { CodedError } from '../../lib/coded-error.js'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import {
  REDIS_KEY_PREFIX,
  RedisIdempotencyStore,
  type RedisIdempotencyStoreOptions,
} from '../../lib/idempotency/redis.js'
import type { Logger } from '../../lib/log.js'
import { createMetrics } from '../../lib/metrics.js'
import { type FaultyProxy, startFaultyProxy } from '../helpers/faulty-proxy.js'
import { saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, send, until } from '../helpers/http.js'
import { type RedisServer, startRedis } from '../helpers/redis.js'
import { ANSWER, OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * The Redis store through a TCP proxy that loses replies, drops commands and
 * delays replies past the command timeout (test/helpers/faulty-proxy.ts): a
 * command runs at most once, or is safe to repeat, and a claim whose payment
 * was never forwarded is released, so the payment is forwarded once and never
 * stuck at 409 (docs/idempotency.md).
 */

const OPTIONS: RedisIdempotencyStoreOptions = {
  ttlMs: 600_000,
  inFlightMs: 600_000,
  oversizedAnswer: OVERSIZED,
  unknownAnswer: UNKNOWN,
  releaseRetry: { attempts: 5, firstDelayMs: 10, maxDelayMs: 40 },
}

interface Faulty {
  readonly redis: RedisServer
  readonly proxy: FaultyProxy
  /** Asks Redis directly, past the proxy. */
  readonly direct: Redis
}

async function faulty(t: Test): Promise<Faulty | undefined> {
  const redis = await startRedis(t)
  if (redis === undefined) return undefined
  const proxy = await startFaultyProxy(t, redis.port)
  const direct = createRedisClient(redis.url) as Redis
  t.teardown(() => direct.disconnect())
  t.ok(await whenReady(direct, 5000))
  return { redis, proxy, direct }
}

/** A store through the proxy, ready, with its scripts loaded in Redis (so a cut never meets a `NOSCRIPT` first). */
async function open(
  t: Test,
  url: string,
  errors: Error[],
  options: Partial<RedisIdempotencyStoreOptions> = {},
  commandTimeoutMs = 1000,
): Promise<RedisIdempotencyStore> {
  const settings = { ...OPTIONS, commandTimeoutMs, ...options, onError: (error: Error) => errors.push(error) }
  const store = new RedisIdempotencyStore(createRedisClient(url, settings), settings)
  t.teardown(() => store.close())
  t.ok(await store.ready(5000), 'ready')
  const warm = await store.claim('warm-up', 'f')
  if (warm.state === 'claimed') await store.release('warm-up', warm.token)
  return store
}

// Each test has a Redis and a proxy of its own, and most wait out a command timeout: three at a time.
t.jobs = 3

const tokenOf = async (direct: Redis, key: string) =>
  (JSON.parse((await direct.get(REDIS_KEY_PREFIX + key)) ?? '{}') as { token?: string }).token

t.test(
  'a claim re-sent by a client that sends again on reconnection finds its own token: claimed, not in flight',
  async (t) => {
    const setup = await faulty(t)
    if (setup === undefined) return
    const { proxy, direct } = setup
    // ioredis's default, which the gateway's own clients turn off: what a store on a client of your own meets.
    const client = new Redis(proxy.url, { commandTimeout: 5000, retryStrategy: () => 20 })
    client.on('error', () => {})
    const store = new RedisIdempotencyStore(client, OPTIONS)
    t.teardown(() => store.close())
    t.ok(await store.ready(5000))
    const cut = proxy.cutReply('resent')
    const claim = await store.claim('resent', 'f')
    await cut
    t.equal(claim.state, 'claimed', 'the claim ran, lost its reply, was sent again and found its own token')
    t.equal(proxy.connections, 2, 'on a new connection')
    t.equal(await tokenOf(direct, 'resent'), claim.state === 'claimed' ? claim.token : '', 'its claim is the one kept')
    t.same(await store.claim('resent', 'f'), { state: 'inFlight' }, 'another claim still finds it in flight')
  },
)

t.test(
  "the gateway's client never sends a command again: a claim whose reply was cut fails, is released, and its retry is claimed",
  async (t) => {
    const setup = await faulty(t)
    if (setup === undefined) return
    const { proxy, direct } = setup
    const errors: Error[] = []
    const store = await open(t, proxy.url, errors)
    const cut = proxy.cutReply('cut-claim')
    await t.rejects(store.claim('cut-claim', 'f'), { message: /timed out/ }, 'the claim ran, but its reply never came')
    await cut
    // The retry goes on the connection of the release, after it.
    const retry = await store.claim('cut-claim', 'f')
    t.equal(retry.state, 'claimed', 'released: the retry is claimed, never 409')
    t.equal(await tokenOf(direct, 'cut-claim'), retry.state === 'claimed' ? retry.token : '')
    t.notOk(
      errors.some((error) => (error as { code?: string }).code === 'ERELEASE'),
      'the release landed',
    )
  },
)

t.test(
  'the gateway: a payment whose claim lost its reply is refused 503, and its retries are forwarded exactly once, never 409',
  async (t) => {
    const setup = await faulty(t)
    if (setup === undefined) return
    const { proxy } = setup
    // Listening waits until the store is connected.
    const { url, backend } = await startGateway(t, { idempotency: proxy.url })
    const payment = { ...saleBody(), transactionReference: 'lost-claim-reply' }
    const cut = proxy.cutReply('lost-claim-reply')
    const first = await send(url, { headers: paymentHeaders(), body: payment })
    await cut
    t.equal(first.status, 503, 'the store failed: closed, nothing forwarded')
    t.equal(backend.received.length, 0)
    const statuses: number[] = []
    for (let attempt = 0; attempt < 3; attempt++)
      statuses.push((await send(url, { headers: paymentHeaders(), body: payment })).status)
    t.same(statuses, [201, 201, 201], 'the first retry is forwarded, the next ones replayed')
    t.equal(backend.received.length, 1, 'the backend received it once')
  },
)

t.test(
  'a claim whose reply comes after the command timeout fails, and is released after it on the same connection',
  async (t) => {
    const setup = await faulty(t)
    if (setup === undefined) return
    const { proxy, direct } = setup
    const errors: Error[] = []
    const store = await open(t, proxy.url, errors)
    const late = proxy.delayReply('late-claim', 2500)
    await t.rejects(store.claim('late-claim', 'f'), { message: /timed out/ })
    await late
    const retry = await store.claim('late-claim', 'f')
    t.equal(retry.state, 'claimed', 'the claim landed, and its release after it: the retry is claimed')
    t.equal(await tokenOf(direct, 'late-claim'), retry.state === 'claimed' ? retry.token : '')
    t.equal(proxy.connections, 1, 'no reconnection: a late reply does not cut the connection')
  },
)

t.test('a release that never reached Redis is tried again until it lands', async (t) => {
  const setup = await faulty(t)
  if (setup === undefined) return
  const { proxy, direct } = setup
  const errors: Error[] = []
  const store = await open(t, proxy.url, errors)
  const claim = await store.claim('dropped-release', 'f')
  if (claim.state !== 'claimed') return t.fail('not claimed')
  const dropped = proxy.dropCommand('dropped-release')
  await store.release('dropped-release', claim.token)
  await dropped
  t.ok(errors.length >= 1, 'the failed attempt was reported')
  t.equal(await direct.exists(REDIS_KEY_PREFIX + 'dropped-release'), 0, 'a later attempt landed')
  t.equal((await store.claim('dropped-release', 'f')).state, 'claimed')
})

t.test('a record that failed is tried again, as a release is, until it lands (issue 33 item 11)', async (t) => {
  const setup = await faulty(t)
  if (setup === undefined) return
  const { redis, proxy } = setup
  const errors: Error[] = []
  const store = await open(t, proxy.url, errors)
  const claim = await store.claim('dropped-record', 'f')
  if (claim.state !== 'claimed') return t.fail('not claimed')
  const dropped = proxy.dropCommand('dropped-record')
  await store.record('dropped-record', claim.token, ANSWER)
  await dropped
  t.ok(errors.length >= 1, 'the failed attempt was reported')
  const replayed = await store.claim('dropped-record', 'f')
  t.equal(replayed.state === 'recorded' && replayed.answer.body.equals(ANSWER.body), true, 'a later attempt landed')

  const held = await store.claim('never-recorded', 'f')
  if (held.state !== 'claimed') return t.fail('not claimed')
  await redis.stop()
  await t.rejects(store.record('never-recorded', held.token, ANSWER), {
    code: 'ERECORD',
    message: /^a record failed 5 times/,
  })
})

t.test('a release whose reply was cut is tried again, harmlessly: it runs once more and finds nothing', async (t) => {
  const setup = await faulty(t)
  if (setup === undefined) return
  const { proxy, direct } = setup
  const errors: Error[] = []
  const store = await open(t, proxy.url, errors)
  const claim = await store.claim('cut-release', 'f')
  if (claim.state !== 'claimed') return t.fail('not claimed')
  const cut = proxy.cutReply('cut-release')
  await store.release('cut-release', claim.token)
  await cut
  t.ok(errors.length >= 1, 'the failed attempt was reported')
  t.equal(await direct.exists(REDIS_KEY_PREFIX + 'cut-release'), 0)
  const next = await store.claim('cut-release', 'f')
  t.equal(next.state, 'claimed')
  if (next.state === 'claimed') await store.release('cut-release', 'the first claim')
  t.equal(
    await tokenOf(direct, 'cut-release'),
    next.state === 'claimed' ? next.token : '',
    "a late release of another claim's token leaves this one",
  )
})

t.test(
  'a release is bounded: it gives up after its attempts, after a last one when the store closes, or once the claim has expired',
  async (t) => {
    const setup = await faulty(t)
    if (setup === undefined) return
    const { redis, proxy } = setup
    const errors: Error[] = []
    const store = await open(t, proxy.url, errors)
    await redis.stop()
    await t.rejects(store.release('gone', 'token'), { code: 'ERELEASE', message: /^a release failed 5 times/ })
    t.ok(errors.length >= 4, 'each failed attempt but the last was reported')

    const patient = { ...OPTIONS, releaseRetry: { attempts: 5, firstDelayMs: 60_000, maxDelayMs: 60_000 } }
    const closing = new RedisIdempotencyStore(createRedisClient(proxy.url), patient)
    const unsent = closing.release('gone', 'token')
    await closing.close()
    await t.rejects(
      unsent,
      { code: 'ERELEASE', message: /^a release failed 2 times/ },
      'closed as its first attempt failed: given up after a last one',
    )
    let failed: () => void = () => {}
    const firstFailed = new Promise<void>((resolve) => (failed = resolve))
    const waiting = new RedisIdempotencyStore(createRedisClient(proxy.url), { ...patient, onError: () => failed() })
    const abandoned = waiting.release('gone', 'token')
    await firstFailed
    await waiting.close()
    await t.rejects(
      abandoned,
      { code: 'ERELEASE', message: /^a release failed 2 times/ },
      'closed while it waited for its next attempt: given up after a last one, at once, not after its pause',
    )

    const brief = new RedisIdempotencyStore(createRedisClient(proxy.url), { ...OPTIONS, inFlightMs: 1, ttlMs: 1 })
    t.teardown(() => brief.close())
    await brief.release('gone', 'token')
    t.pass('a claim that has expired needs no release: the attempts stop')
  },
)

t.test(
  'a release or a record waiting for its next attempt when the store closes makes it then, and lands: the key freed, the answer kept',
  async (t) => {
    const setup = await faulty(t)
    if (setup === undefined) return
    const { proxy, direct } = setup
    const errors: Error[] = []
    // Pauses longer than the test: only the close makes the next attempt.
    const store = await open(t, proxy.url, errors, {
      releaseRetry: { attempts: 5, firstDelayMs: 600_000, maxDelayMs: 600_000 },
    })
    const claims = [await store.claim('left', 'f'), await store.claim('kept', 'f')]
    const [left, kept] = claims.map((claim) => (claim.state === 'claimed' ? claim.token : ''))
    // Each dropped on its way (the connection reset, which fails it): neither ran.
    // The client is back on a new connection of the proxy.
    const back = (connections: number) => until(() => proxy.connections > connections && store.redis.status === 'ready')
    let connections = proxy.connections
    const dropped = proxy.dropCommand(`${REDIS_KEY_PREFIX}left`)
    const release = store.release('left', left as string)
    await dropped
    t.ok(await back(connections), 'connected again')
    connections = proxy.connections
    const droppedToo = proxy.dropCommand(`${REDIS_KEY_PREFIX}kept`)
    const record = store.record('kept', kept as string, ANSWER)
    await droppedToo
    t.ok(await back(connections), 'connected again')
    for (const key of ['left', 'kept'])
      t.match(
        await direct.get(`${REDIS_KEY_PREFIX}${key}`),
        /"state":"inFlight"/,
        `${key}: as claimed before the close`,
      )
    await store.close()
    await release
    await record
    t.equal(await direct.get(`${REDIS_KEY_PREFIX}left`), null, 'the key released at the close')
    t.match(await direct.get(`${REDIS_KEY_PREFIX}kept`), /"state":"recorded"/, 'the answer recorded at the close')
    t.notOk(
      errors.some((error) => ['ERELEASE', 'ERECORD'].includes((error as { code?: string }).code ?? '')),
      'nothing given up',
    )
  },
)

t.test('a claim not sent, because the connection is down, is not released', async (t) => {
  const setup = await faulty(t)
  if (setup === undefined) return
  const { redis, proxy } = setup
  const errors: Error[] = []
  const store = await open(t, proxy.url, errors, { releaseRetry: { attempts: 1, firstDelayMs: 10, maxDelayMs: 10 } })
  await redis.stop()
  t.ok(await until(() => store.redis.status !== 'ready'), 'the client saw the connection go')
  await t.rejects(store.claim('unsent', 'f'), { code: 'ENOTCONNECTED' })
  t.notOk(
    errors.some((error) => (error as { code?: string }).code === 'ERELEASE'),
    'no release was tried',
  )
})

t.test('serve counts a release or a record given up in a metric of its own, and as a store error', async (t) => {
  const metrics = createMetrics({ defaultMetrics: false })
  const lines: { object: object; message: string }[] = []
  const logger = { warn: (object: object, message: string) => lines.push({ object, message }) }
  const report = storeErrorReporter(logger as unknown as Logger, metrics)
  report(
    new CodedError(
      'ERELEASE',
      'a release failed 40 times, so its key stays held until the claim expires: Connection is closed.',
    ),
  )
  report(new CodedError('ERECORD', 'a record failed 40 times, so its key answers as the unknown outcome'))
  report(new Error('Command timed out'))
  report(undefined)
  const text = await metrics.registry.metrics()
  t.match(text, /payments_gate_retry_protection_release_failures_total 1\n/)
  t.match(text, /payments_gate_retry_protection_record_failures_total 1\n/)
  t.match(text, /payments_gate_store_errors_total 4\n/)
  t.equal(lines.length, 1, 'one line a second at most')
  t.match(lines[0], { object: { err: { code: 'ERELEASE' } }, message: 'retry-protection store failed' })
})
