import { createHash } from 'node:crypto'
import { request, type ServerResponse } from 'node:http'
import { connect, createServer as createNetServer } from 'node:net'
import t, { type Test } from 'tap'
import { hashPassword } from '../../lib/credentials/hash.js'
import { CredentialStore } from '../../lib/credentials/store.js'
import type { GateOptions } from '../../lib/gate.js'
import { staticPolicies, type PolicyFile } from '../../lib/policy/policy.js'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import type { IdempotencyStore } from '../../lib/idempotency/store.js'
import { compileBackendErrors } from '../../lib/backend-errors/rules.js'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { OVERSIZED_ANSWER, UNKNOWN_ANSWER, type RetryProtectionOptions } from '../../lib/proxy/retry-protection.js'
import {
  basic,
  ENTITIES,
  PASSWORD,
  policies,
  policy,
  SALE_PATH,
  saleBody,
  TEST_COST,
  USERNAME,
  writeCredentials,
} from '../helpers/fixtures.js'
import { servedHere } from '../helpers/cli.js'
import { keepAliveSender, paymentHeaders, type Reply, send, until, waitFor } from '../helpers/http.js'
import { startRedis } from '../helpers/redis.js'
import { type Answer, created, listenOnLoopback, startBackend } from '../helpers/servers.js'
import { type Started, startGateway } from '../helpers/surfaces.js'

/**
 * Retry protection through the real proxy in front of a real backend
 * (docs/idempotency.md): what a retried payment gets, and how many times the
 * backend receives it, with the memory store and with a real Redis.
 */

let references = 0
/** A sale with a reference no other test uses. */
function sale(reference = `retry-${++references}`): Record<string, any> {
  return { ...saleBody(), transactionReference: reference }
}

/** A memory store of your own, as a test hands one to the gateway: a minute's window and keep. */
function memoryStore(): MemoryIdempotencyStore {
  return new MemoryIdempotencyStore({
    ttlMs: 60_000,
    inFlightMs: 60_000,
    oversizedAnswer: OVERSIZED_ANSWER,
    unknownAnswer: UNKNOWN_ANSWER,
  })
}

function pay(url: string, body: object): Promise<Reply> {
  return send(url, { headers: paymentHeaders(), body })
}

async function protectedGateway(
  t: Test,
  options: RetryProtectionOptions & { timeout?: number } = {},
  answer?: Answer,
  gate?: Partial<GateOptions>,
): Promise<Started> {
  const { timeout, ...protection } = options
  return startGateway(t, { idempotency: 'memory', ...protection, timeout, answer, gate })
}

const slowly =
  (ms: number, then: Answer = created): Answer =>
  (req, res, body) =>
    setTimeout(() => then(req, res, body), ms)

// Each test has its own gateway, backend and store (and Redis), and references no other test uses; a few wait out
// timeouts (a queued payment's 1 s, two processes starting): two at a time.
t.jobs = 2

t.test('a sequential retry is replayed byte for byte, marked, and never forwarded', async (t) => {
  const { url, backend, metrics } = await protectedGateway(t)
  const payment = sale()
  const first = await pay(url, payment)
  const retry = await pay(url, payment)
  t.equal(first.status, 201)
  t.equal(retry.status, 201)
  t.equal(retry.text, first.text, 'the same body')
  t.equal(retry.headers['content-type'], first.headers['content-type'])
  t.same(retry.headers['set-cookie'], first.headers['set-cookie'], 'the backend headers, each as often as sent')
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(first.headers['idempotent-replayed'], undefined)
  t.equal(backend.received.length, 1)
  t.match(await metrics.registry.metrics(), /payments_gate_retry_protection_total\{outcome="replayed"\} 1/)
})

t.test(
  '50 concurrent copies of one payment: the backend receives exactly one; the others get 409 or the replay',
  async (t) => {
    const { url, backend } = await protectedGateway(t, {}, slowly(100))
    const post = keepAliveSender(t, url, 50)
    const payment = sale()
    const replies = await Promise.all(
      Array.from({ length: 50 }, () => post({ headers: paymentHeaders(), body: payment })),
    )
    t.equal(backend.received.length, 1)
    const statuses = replies.map((reply) => reply.status)
    t.equal(statuses.filter((status) => status === 201).length >= 1, true)
    for (const reply of replies) {
      if (reply.status === 409) {
        t.equal(reply.json.errorName, 'paymentIsInProgress')
        t.equal(reply.headers['retry-after'], '1')
      } else {
        t.equal(reply.status, 201)
      }
    }
    t.ok(statuses.includes(409), 'copies that came while it was in flight were told so')
  },
)

t.test('the same reference with another body: 422, nothing forwarded', async (t) => {
  const { url, backend } = await protectedGateway(t)
  const payment = sale()
  t.equal((await pay(url, payment)).status, 201)
  const other = await pay(url, {
    ...payment,
    instruction: { ...payment.instruction, value: { amount: 999, currency: 'GBP' } },
  })
  t.equal(other.status, 422)
  t.equal(other.json.errorName, 'transactionReferenceIsAlreadyUsed')
  t.equal(backend.received.length, 1)
})

t.test('a refusal of the gateway claims nothing: the corrected payment is forwarded', async (t) => {
  const { url, backend } = await protectedGateway(t)
  const payment = sale()
  const wrong = await pay(url, {
    ...payment,
    instruction: { ...payment.instruction, value: { amount: 1, currency: 'JPY' } },
  })
  t.equal(wrong.status, 400)
  t.equal((await pay(url, payment)).status, 201)
  t.equal(backend.received.length, 1)
})

t.test("the backend's 4xx and 503 release the key: the retry is forwarded", async (t) => {
  for (const status of [400, 409, 503]) {
    let answers = 0
    const { url, backend } = await protectedGateway(t, {}, (req, res, body) => {
      if (answers++ > 0) return created(req, res, body)
      res
        .writeHead(status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ errorName: 'x', message: 'refused by the backend' }))
    })
    const payment = sale()
    t.equal((await pay(url, payment)).status, status)
    const retry = await pay(url, payment)
    t.equal(retry.status, 201, `after a ${status}`)
    t.equal(retry.headers['idempotent-replayed'], undefined)
    t.equal(backend.received.length, 2)
  }
})

t.test('a backend that is not there releases the key', async (t) => {
  const { url, backend } = await protectedGateway(t)
  await backend.close()
  const payment = sale()
  t.equal((await pay(url, payment)).status, 503)
  const restarted = await startBackendOn(t, backend.url)
  t.equal((await pay(url, payment)).status, 201)
  t.equal(restarted.received.length, 1)
})

async function startBackendOn(t: Test, url: string) {
  const backend = await startBackend(created, Number(new URL(url).port))
  t.teardown(() => backend.close())
  return backend
}

t.test(
  'an unknown outcome is recorded: after a timeout, a 500 or a 502 the retry gets that answer, never a second forward',
  async (t) => {
    // undici measures the backend timeout on coarse timers (about half a second): the backend is slower than that by far.
    const timedOut = await protectedGateway(t, { timeout: 100 }, slowly(1500))
    const payment = sale()
    const first = await pay(timedOut.url, payment)
    t.equal(first.status, 500)
    t.match(
      first.json.message,
      /^The outcome of this payment is unknown: it was sent to the backend, which did not answer in time/,
    )
    t.match(first.json.message, RETRIES_GET_IT, 'retries get it again, and it says so')
    const retry = await pay(timedOut.url, payment)
    t.equal(retry.status, 500)
    t.equal(retry.json.errorName, 'internalErrorOccurred')
    t.equal(retry.text, first.text, 'the same words')
    t.equal(retry.headers['idempotent-replayed'], 'true')
    t.ok(await until(() => timedOut.backend.received.length === 1))
    for (const status of [500, 502]) {
      const failing = await protectedGateway(t, {}, (_req, res) => res.writeHead(status).end('<h1>oops</h1>'))
      const again = sale()
      const answered = await pay(failing.url, again)
      t.equal(answered.status, status)
      t.match(
        answered.json.message,
        /^The outcome of this payment is unknown: the backend answered it with a server error/,
      )
      t.match(answered.json.message, RETRIES_GET_IT)
      const replayed = await pay(failing.url, again)
      t.equal(replayed.status, status)
      t.equal(replayed.json.errorName, 'internalErrorOccurred', 'the standard body the client got the first time')
      t.equal(replayed.text, answered.text)
      t.equal(failing.backend.received.length, 1)
    }
  },
)

/** The words of a payment's unknown outcome when its retries get the same answer. */
const RETRIES_GET_IT =
  /It is not sent again: retries with this transactionReference get this answer .*Ask the backend for the payment's status/

/** A backend that breaks the connection once it has the payment: a reset after the write, an unknown outcome. */
const cut: Answer = (req) => req.socket.destroy()

t.test(
  'a reset payment, first and replayed, says its outcome is unknown and how to learn it; the generic words only where nothing was forwarded',
  async (t) => {
    const { url, backend } = await protectedGateway(t, {}, cut)
    const payment = sale()
    const first = await pay(url, payment)
    t.equal(first.status, 500)
    t.equal(
      first.json.errorName,
      'internalErrorOccurred',
      'the status and name clients decide on: as the contract says',
    )
    t.match(
      first.json.message,
      /^The outcome of this payment is unknown: it was sent to the backend, and the connection broke/,
    )
    t.match(first.json.message, RETRIES_GET_IT)
    t.notMatch(first.json.message, /Retry later/)
    const retry = await pay(url, payment)
    t.equal(retry.text, first.text)
    t.equal(retry.headers['idempotent-replayed'], 'true')
    t.equal(backend.received.length, 1)

    await backend.close()
    const unreachable = await pay(url, sale())
    t.equal(unreachable.status, 503, 'nothing forwarded: the backend cannot be reached')
    t.equal(unreachable.json.message, 'The service is unavailable. Retry later.', 'the generic words stay')
  },
)

t.test(
  'where retries are forwarded again (--idempotency off, report mode, a store down with failure open), the words say so',
  async (t) => {
    const down: IdempotencyStore = {
      claim: () => Promise.reject(new Error('store down')),
      record: () => {},
      release: () => {},
      close: async () => {},
    }
    const gateways = {
      off: await startGateway(t, { answer: cut }),
      report: await startGateway(t, { answer: cut, idempotency: 'memory', gate: { mode: 'report' } }),
      open: await startGateway(t, { answer: cut, idempotency: down, idempotencyFailure: 'open' }),
    }
    for (const [mode, { url, backend }] of Object.entries(gateways)) {
      const payment = sale()
      const first = await pay(url, payment)
      t.equal(first.status, 500, mode)
      t.equal(first.json.errorName, 'internalErrorOccurred', mode)
      t.match(
        first.json.message,
        /^The outcome of this payment is unknown: it was sent to the backend, and the connection broke/,
        mode,
      )
      t.match(
        first.json.message,
        /Ask the backend for the payment's status before sending it again: this gateway forwards a retry to the backend again/,
        mode,
      )
      t.notMatch(first.json.message, /get this answer/, `${mode}: never "retries get this answer"`)
      const retry = await pay(url, payment)
      t.equal(retry.headers['idempotent-replayed'], undefined, mode)
      t.equal(backend.received.length, 2, `${mode}: the retry was forwarded again, as the words said`)
    }
  },
)

t.test(
  "an operator's rule message, and a backend's own error body, are never overwritten, first or replayed",
  async (t) => {
    const rules = compileBackendErrors({
      rules: [{ status: 502, errorName: 'ledgerIsDown', message: 'The ledger did not answer. Ask it what happened.' }],
    })
    if (Array.isArray(rules)) throw new Error(rules.join('; '))
    const answer: Answer = (_req, res, body) => {
      if (!body.includes('"own-body')) return void res.writeHead(502).end('<h1>bad gateway</h1>')
      res.writeHead(500, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ errorName: 'ledgerFailed', message: 'the ledger said so' }))
    }
    const { url, backend } = await startGateway(t, { idempotency: 'memory', answer, backendErrors: { rules } })
    const named = sale()
    const first = await pay(url, named)
    t.same(first.json, { errorName: 'ledgerIsDown', message: 'The ledger did not answer. Ask it what happened.' })
    t.equal((await pay(url, named)).text, first.text, 'replayed as it was')
    const own = sale('own-body-1')
    t.same((await pay(url, own)).json, { errorName: 'ledgerFailed', message: 'the ledger said so' })
    t.same((await pay(url, own)).json, { errorName: 'ledgerFailed', message: 'the ledger said so' })
    t.equal(backend.received.length, 2)
  },
)

t.test(
  'an answer too large to keep: the client gets it whole, its retry a 500 saying so, never the 422 another payment gets',
  async (t) => {
    // Past the 64 KiB an answer may take in the store (docs/idempotency-reference.md, what is stored).
    const large = JSON.stringify({ outcome: 'authorized', note: 'n'.repeat(70_000) })
    const { url, backend } = await protectedGateway(t, {}, (_req, res) =>
      res.writeHead(201, { 'content-type': 'application/json' }).end(large),
    )
    const payment = sale()
    const first = await pay(url, payment)
    t.equal(first.status, 201)
    t.equal(first.text, large, 'the first answer, whole')
    const retry = await pay(url, payment)
    t.equal(retry.status, 500)
    t.equal(retry.json.errorName, 'internalErrorOccurred')
    t.match(retry.json.message, /^The backend answered this payment, but its answer was too large to keep/)
    t.match(retry.json.message, /ask the backend for the payment's status/)
    t.equal(retry.headers['idempotent-replayed'], 'true')
    const other = { ...payment, instruction: { ...payment.instruction, value: { amount: 1, currency: 'GBP' } } }
    const reused = await pay(url, other)
    t.equal(reused.status, 422, 'another payment under the reference')
    t.equal(reused.json.errorName, 'transactionReferenceIsAlreadyUsed')
    t.equal(backend.received.length, 1)
  },
)

t.test('a client that leaves mid-payment: the answer is still recorded, and its retry gets it', async (t) => {
  const { url, backend } = await protectedGateway(t, {}, slowly(150))
  const payment = sale()
  const { request } = await import('node:http')
  const req = request(`${url}/payments/sales/migrateCardOnFile`, {
    method: 'POST',
    agent: false,
    headers: paymentHeaders(),
  })
  req.on('error', () => undefined)
  req.end(JSON.stringify(payment))
  t.ok(await until(() => backend.started === 1))
  req.destroy()
  const retry = await pollUntilDone(url, payment)
  t.equal(retry.status, 201)
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(backend.received.length, 1)
})

/** Retries a payment while it is in flight (409), as a client told `Retry-After` would; bounded. */
async function pollUntilDone(url: string, payment: object): Promise<Reply> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const reply = await pay(url, payment)
    if (reply.status !== 409) return reply
    await waitFor(20)
  }
  throw new Error('still in flight')
}

t.test(
  'a recorded answer expires with its TTL, on a clock the test moves: then the reference is free again',
  async (t) => {
    let now = 0
    const store = new MemoryIdempotencyStore({
      ttlMs: 1000,
      inFlightMs: 95_000,
      oversizedAnswer: OVERSIZED_ANSWER,
      unknownAnswer: UNKNOWN_ANSWER,
      now: () => now,
    })
    const { url, backend } = await startGateway(t, { idempotency: store })
    const payment = sale()
    t.equal((await pay(url, payment)).status, 201)
    now = 999
    t.equal((await pay(url, payment)).headers['idempotent-replayed'], 'true', 'replayed until the TTL ends')
    now = 1000
    const later = await pay(url, payment)
    t.equal(later.status, 201)
    t.equal(later.headers['idempotent-replayed'], undefined, 'forwarded as a first request once it ended')
    t.equal(backend.received.length, 2)
  },
)

t.test('--idempotency-ttl is how long a recorded answer lives in the store', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const client = createRedisClient(redis.url)
  t.teardown(() => client.disconnect())
  t.ok(await whenReady(client, 5000))
  const { url } = await protectedGateway(t, { idempotency: redis.url, idempotencyTtl: 3600 })
  const payment = sale()
  t.equal((await pay(url, payment)).status, 201)
  const left = await client.pttl(`payments-gate:idem:${JSON.stringify(['default', payment.transactionReference])}`)
  // A minute of margin for a loaded machine between the record and this look; the default is a day.
  t.ok(left > 3_540_000 && left <= 3_600_000, `an hour, in ms: ${left}`)
})

t.test('a store of your own: used for every payment, and closed when the gateway drains', async (t) => {
  let closed = false
  const store = memoryStore()
  const own = Object.assign(store, { close: async () => void (closed = true) })
  const { url, backend, gateway } = await startGateway(t, { idempotency: own })
  const payment = sale()
  t.equal((await pay(url, payment)).status, 201)
  t.equal((await pay(url, payment)).headers['idempotent-replayed'], 'true')
  t.equal(store.size, 1, 'the key is in your store')
  t.equal(backend.received.length, 1)
  await gateway.drain(0)
  t.ok(closed, 'closed with the drain')
})

/** Sends a payment on a connection of its own and leaves once `leave` resolves; resolves when the connection is gone. */
function payAndLeave(url: string, payment: object, leave: Promise<unknown>): Promise<void> {
  return new Promise((resolve) => {
    const req = request(`${url}/payments/sales/migrateCardOnFile`, {
      method: 'POST',
      agent: false,
      headers: paymentHeaders(),
    })
    req.on('error', () => undefined)
    req.on('close', () => resolve())
    req.end(JSON.stringify(payment))
    void leave.then(() => req.destroy())
  })
}

t.test("a backend status past 599: recorded and replayed as a 500, with node's reason phrase", async (t) => {
  const { url, backend } = await protectedGateway(t, {}, (_req, res) => res.writeHead(600, 'Weird').end('odd'))
  const payment = JSON.stringify(sale())
  const post = () =>
    fetch(`${url}${SALE_PATH}`, { method: 'POST', headers: paymentHeaders() as Record<string, string>, body: payment })
  const first = await post()
  const replay = await post()
  t.same([first.status, first.statusText], [500, 'Internal Server Error'])
  t.same([replay.status, replay.statusText], [500, 'Internal Server Error'])
  t.equal(replay.headers.get('idempotent-replayed'), 'true')
  t.same(await replay.json(), await first.json())
  t.equal(backend.received.length, 1)
})

/** Resolves true once the gateway has no client connection left, a turn of the loop later (its drain may end then). */
async function noClientLeft(gateway: Started['gateway']): Promise<boolean> {
  const open = () => new Promise<number>((resolve) => gateway.server.getConnections((_error, count) => resolve(count)))
  const none = await until(async () => (await open()) === 0)
  await new Promise((resolve) => setImmediate(resolve))
  return none
}

/** Drains `gateway` once its clients are gone, shows that it still waits for `what`, then lets it go with `release`. */
async function drainWaitingFor(t: Test, gateway: Started['gateway'], what: string, release: () => void): Promise<void> {
  let drained = false
  const draining = gateway.drain(60_000).then(() => (drained = true))
  t.ok(await noClientLeft(gateway), 'no client connection is left')
  t.notOk(drained, `still draining: ${what}`)
  release()
  await draining
}

/**
 * A memory store of your own that tells, in order, each answer it records, each release and its close. With
 * `held`, each claim waits there until the test answers it, as a slow Redis's would.
 */
function witnessStore(held?: (() => void)[]): {
  store: IdempotencyStore
  events: string[]
  memory: MemoryIdempotencyStore
} {
  const memory = memoryStore()
  const events: string[] = []
  const store: IdempotencyStore = {
    claim: (key, fingerprint) =>
      held === undefined
        ? memory.claim(key, fingerprint)
        : new Promise((resolve) => held.push(() => resolve(memory.claim(key, fingerprint)))),
    record: (key, token, answer) => (events.push(`record ${answer.status}`), memory.record(key, token, answer)),
    release: (key, token) => (events.push('release'), memory.release(key, token)),
    close: async () => void events.push('close'),
  }
  return { store, events, memory }
}

t.test(
  "the drain waits for a payment whose client left: the backend's answer is read and recorded before the store closes",
  async (t) => {
    const { store, events } = witnessStore()
    const { url, backend, gateway } = await startGateway(t, { idempotency: store })
    const held: (() => void)[] = []
    backend.answer = (_req, res) => held.push(() => res.writeHead(201).end('{}'))
    await payAndLeave(
      url,
      sale(),
      until(() => held.length === 1),
    )
    await drainWaitingFor(t, gateway, 'the payment is at the backend', held[0] as () => void)
    t.same(events, ['record 201', 'close'], 'its answer recorded, then the store closed')
  },
)

t.test(
  'the drain waits for a payment still in its claim when its client left: the claim is released before the store closes',
  async (t) => {
    const held: (() => void)[] = []
    const { store, events, memory } = witnessStore(held)
    const { url, backend, gateway } = await startGateway(t, { idempotency: store })
    await payAndLeave(
      url,
      sale(),
      until(() => held.length === 1),
    )
    await drainWaitingFor(t, gateway, 'the claim is on its way', held[0] as () => void)
    t.same(events, ['release', 'close'], 'the claim released, then the store closed')
    t.equal(memory.size, 0, 'nothing left under its key')
    t.equal(backend.received.length, 0, 'never forwarded')
  },
)

t.test(
  "the drain's deadline: a payment still at the backend gets the unknown outcome, recorded before the store closes",
  async (t) => {
    const { store, events } = witnessStore()
    const { url, backend, gateway } = await startGateway(t, { idempotency: store })
    backend.answer = () => undefined
    const reply = pay(url, sale())
    t.ok(await until(() => backend.received.length === 1))
    await gateway.drain(10)
    const answer = await reply
    t.equal(answer.status, 500)
    t.equal(answer.json.errorName, 'internalErrorOccurred')
    t.match(answer.json.message, /^The outcome of this payment is unknown: .* It is not sent again/)
    t.equal(answer.headers.connection, 'close')
    t.same(events, ['record 500', 'close'], 'the unknown outcome recorded, then the store closed')
  },
)

t.test(
  'a client that leaves while its claim is answered (an asynchronous store): never forwarded, the key released',
  async (t) => {
    const memory = memoryStore()
    const held: (() => void)[] = []
    // Your own store whose claims the test answers when it chooses, as a slow Redis would.
    const slow: IdempotencyStore = {
      claim: (key, fingerprint) => new Promise((resolve) => held.push(() => resolve(memory.claim(key, fingerprint)))),
      record: (key, token, answer) => memory.record(key, token, answer),
      release: (key, token) => memory.release(key, token),
      close: () => memory.close(),
    }
    const { url, backend } = await startGateway(t, { idempotency: slow })
    const payment = sale()
    await payAndLeave(
      url,
      payment,
      until(() => held.length === 1),
    )
    ;(held.shift() as () => void)()
    t.ok(await until(() => memory.size === 0), 'the claim is released')
    const retry = pay(url, payment)
    t.ok(await until(() => held.length === 1))
    ;(held.shift() as () => void)()
    t.equal((await retry).status, 201, 'the retry is forwarded as a first request')
    t.equal(backend.received.length, 1, 'the payment whose client left never reached the backend')
  },
)

/** A TCP proxy in front of Redis that, while `hold` is on, keeps Redis's replies until `release()`; `sent` is what the gateway sent meanwhile. */
async function holdingProxy(t: Test, port: number) {
  const held: (() => void)[] = []
  const proxy = { url: '', hold: false, sent: '', release: () => held.splice(0).forEach((write) => write()) }
  const server = createNetServer((client) => {
    const upstream = connect(port, '127.0.0.1')
    client.on('data', (chunk: Buffer) => {
      if (proxy.hold) proxy.sent += chunk.toString('latin1')
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => (proxy.hold ? held.push(() => client.write(chunk)) : client.write(chunk)))
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
    client.on('close', () => upstream.destroy())
  })
  proxy.url = `redis://127.0.0.1:${await listenOnLoopback(server)}`
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return proxy
}

t.test('Redis: a client that leaves while its claim is answered: never forwarded, the key released', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const proxy = await holdingProxy(t, Number(new URL(redis.url).port))
  const { url, backend, gateway } = await startGateway(t, { idempotency: proxy.url })
  let [requests, closes] = [0, 0]
  gateway.server.on('request', (_req, res) => {
    // From the second request on: what Redis answers is held, and what the gateway sends is its claim (the first sale's record went before).
    if (++requests === 2) [proxy.hold, proxy.sent] = [true, '']
    res.once('close', () => closes++)
  })
  const payment = sale()
  t.equal((await pay(url, sale())).status, 201, 'the password is checked once, and cached')
  await payAndLeave(
    url,
    payment,
    until(() => /EVAL/i.test(proxy.sent)),
  )
  t.ok(await until(() => closes === 2), 'the gateway saw the client leave while its claim was with Redis')
  proxy.hold = false
  proxy.release()
  const retry = await pollUntilDone(url, payment)
  t.equal(retry.status, 201, 'the key was released: the retry is forwarded as a first request')
  t.equal(retry.headers['idempotent-replayed'], undefined)
  t.equal(
    backend.received.length,
    2,
    'the first sale and the retry; the payment whose client left never reached the backend',
  )
})

t.test('a client that leaves during its password check (a cache miss): never forwarded', async (t) => {
  // A slow hash, so that the check outlasts the client: twice the work of N=32768 (p=2), in the memory bound.
  const credentials = await writeCredentials(t.testdir(), { N: 32_768, r: 8, p: 2 })
  const { url, backend, gateway } = await startGateway(t, { idempotency: 'memory', gate: { credentials } })
  const payment = sale()
  let [requests, closes] = [0, 0]
  gateway.server.on('request', (_req, res) => (requests++, res.once('close', () => closes++)))
  await payAndLeave(
    url,
    payment,
    until(() => requests === 1),
  )
  t.ok(await until(() => closes === 1), 'the gateway saw the client leave')
  const retry = await pay(url, payment)
  t.equal(retry.status, 201, 'nothing claimed: the retry is forwarded as a first request')
  t.equal(retry.headers['idempotent-replayed'], undefined)
  t.equal(backend.received.length, 1)
})

t.test('retry protection off: every copy is forwarded', async (t) => {
  const { url, backend } = await startGateway(t, { idempotency: 'off' })
  const payment = sale()
  await pay(url, payment)
  await pay(url, payment)
  t.equal(backend.received.length, 2)
})

t.test(
  'serve --timeout 2000, every backend connection busy: a queued payment is dropped at 2 s (503, key released), never told "unknown", and reaches the backend once',
  async (t) => {
    const trickling = new Set<ServerResponse>()
    const backend = await startBackend((req, res, body) => {
      if (!body.includes('"held-')) return created(req, res, body)
      // Headers at once, then a byte every 500 ms: the connection stays busy, never silent for --timeout.
      res.writeHead(201, { 'content-type': 'text/plain' }).write(' ')
      trickling.add(res)
    })
    const drip = setInterval(() => trickling.forEach((res) => res.write(' ')), 500)
    const finish = () => (clearInterval(drip), trickling.forEach((res) => res.end()), trickling.clear())
    t.teardown(async () => (finish(), await backend.close()))
    // serve's own gateway, in this process: what is shown here is the gateway's, no process's (exit, signals, output).
    // Four drips to a --timeout: a held connection outlives a loaded machine's pause of this process (backend and gateway).
    const { url } = await servedHere(t, backend.url, { timeout: 2000 })
    // The gateway's 256 connections to the backend (docs/backend-faults.md, connections), each held by a payment.
    const held = Array.from({ length: 256 }, (_, i) => started(url, sale(`held-${i}`)))
    // 512 connections opened in one process: up to a minute on a loaded machine.
    t.ok(await until(() => backend.started === 256, 60_000), 'every connection to the backend is busy')
    const payment = sale('queued-1')
    const queued = await pay(url, payment)
    t.equal(queued.status, 503, 'waited past --timeout for a connection: never written')
    t.equal(queued.json.errorName, 'serviceUnavailable')
    const retry = await pay(url, payment)
    t.equal(retry.status, 503, 'its retry, still queued, is dropped too: its key was released, never "unknown"')
    t.same(await Promise.all(held), Array(256).fill(201))
    finish()
    const last = await pay(url, payment)
    t.equal(last.status, 201, 'forwarded once connections are free')
    t.equal(last.headers['idempotent-replayed'], undefined)
    t.equal(
      backend.received.filter((received) => received.body.includes('"queued-1"')).length,
      1,
      'the payment reached the backend once',
    )
  },
)

/** Sends a payment on a connection of its own; resolves with its status once the answer's head is in, leaving the body to stream. */
function started(url: string, payment: object): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/payments/sales/migrateCardOnFile`,
      { method: 'POST', agent: false, headers: paymentHeaders() },
      (res) => {
        res.resume()
        resolve(res.statusCode as number)
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(payment))
  })
}

// Two serve processes on one Redis: test/e2e/gateway-killed.test.ts.
t.test("Redis: two of serve's gateways on one Redis share the keys", async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const backend = await startBackend(slowly(50))
  t.teardown(() => backend.close())
  const [{ url: a }, { url: b }] = await Promise.all([
    servedHere(t, backend.url, { idempotency: redis.url }),
    servedHere(t, backend.url, { idempotency: redis.url }),
  ])
  const payment = sale()
  const first = await pay(a, payment)
  const retry = await pay(b, payment)
  t.equal(first.status, 201)
  t.equal(retry.status, 201)
  t.equal(retry.text, first.text)
  t.equal(retry.headers['idempotent-replayed'], 'true', 'a retry that lands on the other replica is replayed')
  t.equal(backend.received.length, 1)

  const copies = sale()
  const postA = keepAliveSender(t, a, 20)
  const postB = keepAliveSender(t, b, 20)
  const replies = await Promise.all(
    Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? postA : postB)({ headers: paymentHeaders(), body: copies })),
  )
  t.equal(backend.received.length, 2, 'of 40 copies split across both, one forwarded')
  t.same(new Set(replies.map((reply) => reply.status).filter((status) => status !== 201 && status !== 409)), new Set())

  const wrong = { ...paymentHeaders(), authorization: `Basic ${Buffer.from('shop-1:wrong').toString('base64')}` }
  t.equal((await send(a, { headers: wrong, body: sale() })).status, 401)
  const client = createRedisClient(redis.url)
  t.teardown(() => client.disconnect())
  t.ok(await whenReady(client, 5000))
  t.same(
    await client.keys('payments-gate:login:*'),
    ['payments-gate:login:failures:shop-1'],
    "serve's --idempotency Redis also shares the failed-login throttle",
  )
})

t.test('Redis stopped mid-run: fail closed, nothing forwarded twice, recovery without a restart', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const { url, backend, metrics } = await protectedGateway(t, { idempotency: redis.url })
  const before = sale()
  t.equal((await pay(url, before)).status, 201)
  await redis.stop()
  const during = await pay(url, sale())
  t.equal(during.status, 503, 'fail closed')
  t.equal(during.json.errorName, 'serviceUnavailable')
  t.equal(backend.received.length, 1, 'nothing forwarded while the store is down')
  t.match(await metrics.registry.metrics(), /payments_gate_retry_protection_total\{outcome="storeUnavailable"\} [1-9]/)
  await redis.restart()
  // The restarted Redis is empty (no persistence): the gateway reconnects by itself.
  let after: Reply | undefined
  for (let attempt = 0; attempt < 100 && after?.status !== 201; attempt++) {
    if (attempt > 0) await waitFor(50)
    after = await pay(url, sale('after-restart'))
  }
  t.equal(after?.status, 201, 'recovered without a restart of the gateway')
  t.equal((await pay(url, sale('after-restart'))).headers['idempotent-replayed'], 'true')
  t.equal(backend.received.length, 2)
})

t.test('Redis unreachable with --idempotency-failure open: forwarded unprotected', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const { url, backend } = await protectedGateway(t, { idempotency: redis.url, idempotencyFailure: 'open' })
  await redis.stop()
  const payment = sale()
  t.equal((await pay(url, payment)).status, 201)
  t.equal((await pay(url, payment)).status, 201)
  t.equal(backend.received.length, 2, 'the price of open: no protection while the store is down')
})

t.test('serve: a store failure is a log line and a metric', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  const backend = await startBackend()
  t.teardown(() => backend.close())
  const { serving, lines, url } = await servedHere(t, backend.url, { timeout: 1000, idempotency: redis.url })
  await redis.stop()
  const reply = await pay(url, sale())
  t.equal(reply.status, 503)
  t.ok(await until(() => lines.some((line) => line.includes('"msg":"retry-protection store failed"'))), 'logged')
  t.match(await serving.metrics.registry.metrics(), /payments_gate_store_errors_total [1-9]/)
})

t.test(
  'Redis: the failed-login throttle is shared, ten wrong passwords across the fleet lock the user out',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const credentials = await writeCredentials(t.testdir())
    const a = await startGateway(t, { idempotency: redis.url, gate: { throttleRedis: redis.url, credentials } })
    const b = await startGateway(t, {
      target: a.backend.url,
      idempotency: redis.url,
      gate: { throttleRedis: redis.url, credentials },
    })
    const wrong = { ...paymentHeaders(), authorization: `Basic ${Buffer.from('shop-1:wrong').toString('base64')}` }
    for (let i = 0; i < 10; i++)
      t.equal((await send(i % 2 === 0 ? a.url : b.url, { headers: wrong, body: sale() })).status, 401)
    t.equal((await pay(a.url, sale())).status, 401, 'locked out on A')
    t.equal((await pay(b.url, sale())).status, 401, 'and on B')
    t.equal(a.backend.received.length, 0)
  },
)

t.test(
  'keyed fingerprints in Redis: no digest of the document without the key; a rotation and the records of before the upgrade still replayed',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const client = createRedisClient(redis.url)
    t.teardown(() => client.disconnect())
    t.ok(await whenReady(client, 5000))
    const [current, older] = [Buffer.alloc(32, 'c'), Buffer.alloc(32, 'o')]
    const stored = async (reference: string) =>
      JSON.parse((await client.get(`payments-gate:idem:${JSON.stringify(['default', reference])}`)) as string)

    const before = await protectedGateway(t, { idempotency: redis.url, idempotencyFingerprintKey: older })
    const charged = sale()
    t.equal((await pay(before.url, charged)).status, 201)
    const forwarded = (before.backend.received[0] as { body: Buffer }).body
    const print: string = (await stored(charged.transactionReference)).fingerprint
    t.match(print, /^hmac:[0-9a-f]{8} sale /, 'the stored fingerprint names its key')
    t.not(print.split(' ')[2], createHash('sha256').update(forwarded).digest('base64'), 'not the plain SHA-256')

    // A record as a gateway of before keyed fingerprints left it: the SHA-256 of the document it forwarded.
    const old = sale()
    t.equal((await pay(before.url, old)).status, 201)
    const oldForwarded = (before.backend.received[1] as { body: Buffer }).body
    const record = await stored(old.transactionReference)
    record.fingerprint = `sale ${createHash('sha256').update(oldForwarded).digest('base64')}`
    await client.set(
      `payments-gate:idem:${JSON.stringify(['default', old.transactionReference])}`,
      JSON.stringify(record),
    )

    const rotated = await protectedGateway(t, { idempotency: redis.url, idempotencyFingerprintKey: [current, older] })
    const retried = await pay(rotated.url, charged)
    t.equal(retried.status, 201, 'a record under the older key of a rotation is replayed')
    t.equal(retried.headers['idempotent-replayed'], 'true')
    const upgraded = await pay(rotated.url, old)
    t.equal(upgraded.status, 201, 'a record of before the upgrade is replayed, not a 422')
    t.equal(upgraded.headers['idempotent-replayed'], 'true')
    const other = (payment: Record<string, any>) => ({
      ...payment,
      instruction: { ...payment.instruction, value: { amount: 1, currency: 'GBP' } },
    })
    t.equal((await pay(rotated.url, other(old))).status, 422, 'another payment under a record of before the upgrade')
    t.equal((await pay(rotated.url, other(charged))).status, 422, 'another payment under a record of the older key')
    const fresh = sale()
    t.equal((await pay(rotated.url, fresh)).status, 201)
    t.match((await stored(fresh.transactionReference)).fingerprint, /^hmac:/)
    t.not(
      (await stored(fresh.transactionReference)).fingerprint.split(' ')[0],
      print.split(' ')[0],
      'new claims under the current key',
    )
    t.equal(rotated.backend.received.length, 1, 'only the fresh payment forwarded')

    const retired = await protectedGateway(t, { idempotency: redis.url, idempotencyFingerprintKey: current })
    const cannotTell = await pay(retired.url, charged)
    t.equal(cannotTell.status, 503, 'a key no longer listed: it cannot tell, never a 422')
    t.equal(cannotTell.json.errorName, 'serviceUnavailable')
    t.equal(cannotTell.headers['retry-after'], '1')
    t.equal((await pay(retired.url, other(charged))).status, 503, 'whatever the body')
    t.equal((await pay(retired.url, old)).status, 201, 'a record of before the upgrade is still compared')
    t.equal((await pay(retired.url, other(old))).status, 422)
    t.equal(retired.backend.received.length, 0)
  },
)

t.test('a Redis store without a fingerprint key is refused; a store of this process gets a random key', async (t) => {
  await t.rejects(startGateway(t, { idempotency: 'redis://127.0.0.1:9/0', idempotencyFingerprintKey: undefined }), {
    code: 'EFINGERPRINTKEY',
    message: /^idempotencyFingerprintKey must be given with a Redis store/,
  })
  await t.rejects(startGateway(t, { idempotency: 'memory', idempotencyFingerprintKey: Buffer.alloc(31) }), {
    code: 'EFINGERPRINTKEY',
  })
  const own = memoryStore()
  const claims: string[] = []
  const watched: IdempotencyStore = {
    claim: (key, fingerprint) => (claims.push(fingerprint), own.claim(key, fingerprint)),
    record: (key, token, answer) => own.record(key, token, answer),
    release: (key, token) => own.release(key, token),
    close: () => own.close(),
  }
  const first = await protectedGateway(t, { idempotency: watched, idempotencyFingerprintKey: undefined })
  const second = await protectedGateway(t, { idempotency: watched, idempotencyFingerprintKey: undefined })
  const payment = sale()
  await pay(first.url, payment)
  await pay(second.url, payment)
  t.equal(claims.length, 2)
  t.not(claims[0]?.split(' ')[0], claims[1]?.split(' ')[0], 'each gateway its own random key')
})

t.test('replay before policy: a retry of a charged payment is replayed whatever its policy says now', async (t) => {
  let source = policies()
  const { url, backend } = await protectedGateway(t, {}, undefined, {
    policies: { get: (entity) => source.get(entity) },
  })
  // A line1 the policy truncates (docs/checks.md, rewrites) and no mcc: the policy fills it in.
  const charged = sale()
  charged.instruction.narrative.line1 = 'Mind Palace Ltd, 221B Baker Street, London'
  const first = await pay(url, charged)
  t.equal(first.status, 201)
  const changes: [string, Partial<PolicyFile>][] = [
    ['the mcc', { mcc: '4829' }],
    ['line1 truncate to reject', { narrative: { line1: 'reject' } }],
    ['the currency withdrawn', { currencies: ['EUR'] }],
  ]
  for (const [change, overrides] of changes) {
    source = staticPolicies([policy(overrides)])
    const retry = await pay(url, charged)
    t.equal(retry.status, 201, `${change}: replayed`)
    t.equal(retry.headers['idempotent-replayed'], 'true', change)
    t.equal(retry.text, first.text, change)
  }
  t.equal(backend.received.length, 1, 'forwarded once')
  // A new payment under that policy is refused, and its key is free again for the corrected one.
  const refused = sale()
  t.equal((await pay(url, refused)).status, 400, 'the currency the policy withdrew')
  source = policies()
  t.equal((await pay(url, refused)).status, 201, 'the refusal claimed nothing that stays')
  t.equal(backend.received.length, 2)
})

t.test('replay before policy: members in another order are the same payment', async (t) => {
  const { url, backend } = await protectedGateway(t)
  const charged = sale()
  const first = await pay(url, charged)
  // Every object's members reversed, at every level.
  const reversed = (value: unknown): unknown =>
    value !== null && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(
          Object.entries(value)
            .reverse()
            .map(([name, member]) => [name, reversed(member)]),
        )
      : value
  const retried = reversed(charged) as Record<string, any>
  t.not(JSON.stringify(retried), JSON.stringify(charged), 'another byte order')
  const retry = await pay(url, retried)
  t.equal(retry.status, 201)
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(retry.text, first.text)
  t.equal(
    (await pay(url, { ...retried, instruction: { ...retried.instruction, value: { currency: 'GBP', amount: 1 } } }))
      .status,
    422,
  )
  t.equal(backend.received.length, 1)
})

t.test("replay before policy: another entity's user gets 401, never the recorded answer", async (t) => {
  const other = {
    username: 'shop-2',
    password: await hashPassword('another password', TEST_COST),
    entities: ['collections'],
  }
  const mine = { username: USERNAME, password: await hashPassword(PASSWORD, TEST_COST), entities: ENTITIES }
  const { url, backend } = await protectedGateway(t, {}, undefined, { credentials: new CredentialStore([mine, other]) })
  const charged = sale()
  t.equal((await pay(url, charged)).status, 201)
  const stranger = await send(url, {
    headers: paymentHeaders({ authorization: basic('shop-2', 'another password') }),
    body: charged,
  })
  t.equal(stranger.status, 401)
  t.equal(stranger.json.errorName, 'accessDenied')
  t.equal(stranger.headers['idempotent-replayed'], undefined)
  t.equal(backend.received.length, 1)
})

t.test(
  "a store that fails under --idempotency-failure open, and a payment its policy refuses: the policy's 400, nothing forwarded",
  async (t) => {
    for (const how of ['throws', 'rejects'] as const) {
      const down: IdempotencyStore = {
        claim: () => {
          if (how === 'throws') throw new Error('store down')
          return Promise.reject(new Error('store down'))
        },
        record: () => {},
        release: () => {},
        close: async () => {},
      }
      const { url, backend } = await startGateway(t, {
        idempotency: down,
        idempotencyFailure: 'open',
        gate: { policies: staticPolicies([policy({ currencies: ['EUR'] })]) },
      })
      const refused = await pay(url, sale())
      t.equal(refused.status, 400, `a claim that ${how}`)
      t.equal(refused.json.errorName, 'currencyIsNotSupported', how)
      t.equal(backend.received.length, 0, how)
      const euro = sale()
      euro.instruction.value.currency = 'EUR'
      t.equal((await pay(url, euro)).status, 201, `${how}: one it accepts is forwarded unprotected`)
      t.equal(backend.received.length, 1, how)
    }
  },
)

t.test('with retry protection off, the policy still refuses, after check 9, and nothing is forwarded', async (t) => {
  const { url, backend } = await startGateway(t, {
    gate: { policies: staticPolicies([policy({ currencies: ['EUR'] })]) },
  })
  const refused = await pay(url, sale())
  t.equal(refused.status, 400)
  t.equal(refused.json.errorName, 'currencyIsNotSupported')
  t.equal(backend.received.length, 0)
})
