import cluster from 'node:cluster'
import { createHash } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { Redis } from 'ioredis'
import t from 'tap'
import type { Principal } from '../../lib/checks/auth.js'
import { buildChecks, type Checks, type Entitled } from '../../lib/checks/index.js'
import { idempotencyKey } from '../../lib/idempotency/key.js'
import { MemoryIdempotencyStore, MIN_MAX_BYTES } from '../../lib/idempotency/memory.js'
import { RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import type { Claim, IdempotencyStore, Peek } from '../../lib/idempotency/store.js'
import { createMetrics } from '../../lib/metrics.js'
import type { PaymentRequest } from '../../lib/schema/payment.js'
import type { Exchange, GatewayResponse } from '../../lib/proxy/exchange.js'
import type { BackendOutcome, Forwarder } from '../../lib/proxy/forward.js'
import type { OnSettled } from '../../lib/proxy/payment-relay.js'
import {
  createPayments,
  createRetryProtection,
  createRetryStore,
  inFlightWindowMs,
  lendRetryProtection,
  lentRetryProtection,
  OVERSIZED_ANSWER,
  protectedPayment,
  UNKNOWN_ANSWER,
  type Guard,
  type Payments,
  type PaymentsOptions,
  type ProtectedPayment,
  type Ticket,
} from '../../lib/proxy/retry-protection.js'
import { spawnCli } from '../helpers/cli.js'
import { bytes, FINGERPRINT_KEY, policies, saleBody, writeCredentials } from '../helpers/fixtures.js'
import { freePort } from '../helpers/servers.js'

function passed(reference = 'order-1', entity = 'default', amount = 250): ProtectedPayment {
  const document = saleBody() as PaymentRequest
  document.transactionReference = reference
  document.merchant.entity = entity
  document.instruction.value.amount = amount
  return protectedPayment('sale', entity, document, document)
}

function memory(): MemoryIdempotencyStore {
  return new MemoryIdempotencyStore({
    ttlMs: 60_000,
    inFlightMs: 30_000,
    oversizedAnswer: OVERSIZED_ANSWER,
    unknownAnswer: UNKNOWN_ANSWER,
  })
}

async function guard(protection: ReturnType<typeof createRetryProtection>, request = passed()): Promise<Guard> {
  return protection.guard(request)
}

function ticketOf(guarded: Guard): Ticket {
  if (guarded.kind !== 'forward' || guarded.ticket === undefined) throw new Error(`not claimed: ${guarded.kind}`)
  return guarded.ticket
}

const CREATED = {
  kind: 'answered',
  status: 201,
  headers: ['content-type', 'application/json'],
  body: Buffer.from('{"outcome":"authorized"}'),
} as const

t.test('first forwarded, a copy in flight 409, the recorded answer replayed, another payment 422', async (t) => {
  const protection = createRetryProtection(memory())
  const first = await guard(protection)
  const ticket = ticketOf(first)
  const copy = await guard(protection)
  t.equal(copy.kind, 'refuse')
  t.match(copy, {
    rejection: { status: 409, body: { errorName: 'paymentIsInProgress' }, headers: { 'Retry-After': '1' } },
  })
  protection.settle(ticket, CREATED)
  const replay = await guard(protection)
  t.same(replay, {
    kind: 'replay',
    answer: { status: 201, headers: CREATED.headers, body: CREATED.body },
    outcome: 'replayed',
  })
  t.match(await guard(protection, passed('order-1', 'default', 999)), {
    kind: 'refuse',
    rejection: { status: 422, body: { errorName: 'transactionReferenceIsAlreadyUsed' } },
  })
  t.match(
    await guard(protection, passed('order-1', 'collections')),
    { kind: 'forward' },
    'the key is the entity and the reference',
  )
})

t.test('what releases a key and what records it', async (t) => {
  const outcomes = [
    { outcome: { kind: 'answered', status: 400, headers: [], body: Buffer.from('{}') }, released: true },
    { outcome: { kind: 'answered', status: 404, headers: [], body: undefined }, released: true },
    { outcome: { kind: 'answered', status: 503, headers: [], body: Buffer.from('{}') }, released: true },
    { outcome: { kind: 'refused' }, released: true },
    {
      outcome: { kind: 'answered', status: 302, headers: ['location', '/x'], body: Buffer.alloc(0) },
      released: false,
      status: 302,
    },
    { outcome: { kind: 'answered', status: 500, headers: [], body: Buffer.from('{}') }, released: false, status: 500 },
    { outcome: { kind: 'answered', status: 502, headers: [], body: Buffer.from('{}') }, released: false, status: 502 },
    { outcome: { kind: 'answered', status: 504, headers: [], body: Buffer.from('{}') }, released: false, status: 504 },
    {
      outcome: { kind: 'timeout' },
      released: false,
      status: 500,
      errorName: 'internalErrorOccurred',
      message: /^The outcome of this payment is unknown: it was sent to the backend, which did not answer in time/,
    },
    {
      outcome: { kind: 'reset' },
      released: false,
      status: 500,
      errorName: 'internalErrorOccurred',
      message: /^The outcome of this payment is unknown: it was sent to the backend, and the connection broke/,
    },
    {
      outcome: { kind: 'answered', status: 201, headers: [], body: undefined },
      released: false,
      status: 500,
      errorName: 'internalErrorOccurred',
      message: /^The backend answered this payment, but its answer was too large to keep, so it cannot be replayed/,
    },
  ] as const
  for (const { outcome, released, ...recorded } of outcomes as readonly {
    outcome: BackendOutcome
    released: boolean
    status?: number
    errorName?: string
    message?: RegExp
  }[]) {
    const protection = createRetryProtection(memory())
    protection.settle(ticketOf(await guard(protection)), outcome)
    const next = await guard(protection)
    if (released) {
      t.equal(next.kind, 'forward', `${JSON.stringify(outcome)}: a retry is forwarded`)
      continue
    }
    t.equal(next.kind, 'replay', `${JSON.stringify(outcome)}: a retry is replayed`)
    if (next.kind !== 'replay') continue
    t.equal(next.answer.status, recorded.status)
    if (recorded.errorName === undefined) continue
    const body = JSON.parse(next.answer.body.toString())
    t.equal(body.errorName, recorded.errorName)
    t.match(body.message, recorded.message)
    t.notMatch(body.message, /Retry later/, 'never "Retry later": the payment may have been charged')
    t.match(body.message, /ask the backend for the payment's status/i, 'says how to learn the outcome')
  }
})

t.test(
  "an answer too large to keep: the same payment's retry is told so (500), another payment with the reference 422",
  async (t) => {
    const protection = createRetryProtection(memory())
    protection.settle(ticketOf(await guard(protection)), {
      kind: 'answered',
      status: 201,
      headers: [],
      body: undefined,
    })
    const retry = await guard(protection)
    t.match(retry, { kind: 'replay', outcome: 'replayed', answer: { status: 500 } })
    t.same(retry.kind === 'replay' && retry.answer, OVERSIZED_ANSWER)
    t.match(await guard(protection, passed('order-1', 'default', 999)), {
      kind: 'refuse',
      outcome: 'alreadyUsed',
      rejection: { status: 422, body: { errorName: 'transactionReferenceIsAlreadyUsed' } },
    })
  },
)

/** A store that cannot be reached, failing the way the caller asks: a thrown error or a rejected promise. */
function unreachable(how: 'throw' | 'reject'): IdempotencyStore & { closed: boolean } {
  const fail = () => {
    const error = new Error('store down')
    if (how === 'throw') throw error
    return Promise.reject(error)
  }
  return {
    closed: false,
    claim: fail,
    record: fail,
    release: fail,
    close: async function (this: { closed: boolean }) {
      this.closed = true
    },
  } as never
}

t.test(
  'a store that cannot be reached: refused with 503 (closed), or forwarded unprotected (open); reported either way',
  async (t) => {
    for (const how of ['throw', 'reject'] as const) {
      const errors: unknown[] = []
      const closed = createRetryProtection(unreachable(how), { onStoreError: (error) => errors.push(error) })
      t.match(
        await guard(closed),
        { kind: 'refuse', rejection: { status: 503, body: { errorName: 'serviceUnavailable' } } },
        how,
      )
      const open = createRetryProtection(unreachable(how), {
        idempotencyFailure: 'open',
        onStoreError: (error) => errors.push(error),
      })
      t.same(await guard(open), { kind: 'forward', ticket: undefined, outcome: 'unprotected' }, how)
      open.settle({ key: 'k', token: 't' }, CREATED)
      open.settle({ key: 'k', token: 't' }, { kind: 'refused' })
      await new Promise((resolve) => setImmediate(resolve))
      t.equal(errors.length, 4, `${how}: every failure reported, none thrown`)
    }
    const silent = createRetryProtection(unreachable('reject'))
    silent.settle({ key: 'k', token: 't' }, CREATED)
    t.equal((await guard(silent)).kind, 'refuse', 'without a listener, still refused')
  },
)

t.test("inspect says what guard would decide, from the store's peek, without claiming", async (t) => {
  const protection = createRetryProtection(memory())
  t.equal(protection.inspect(passed()), 'claimed')
  t.equal(protection.inspect(passed()), 'claimed', 'still free: nothing was claimed')
  const ticket = ticketOf(await guard(protection))
  t.equal(protection.inspect(passed()), 'inProgress')
  protection.settle(ticket, CREATED)
  t.equal(protection.inspect(passed()), 'replayed')
  const other = passed('order-1', 'default', 999)
  t.equal(protection.inspect(other), 'alreadyUsed')
  const errors: unknown[] = []
  for (const how of ['throw', 'reject'] as const) {
    const store: IdempotencyStore = { ...unreachable(how), peek: unreachable(how).claim as never }
    t.equal(
      await createRetryProtection(store, { onStoreError: (error) => errors.push(error) }).inspect(passed()),
      'storeUnavailable',
      how,
    )
    t.equal(await createRetryProtection(store, { idempotencyFailure: 'open' }).inspect(passed()), 'unprotected', how)
  }
  t.equal(errors.length, 2, 'a failed peek is reported as a store failure')
  t.equal(
    createRetryProtection(unreachable('throw')).inspect(passed()),
    undefined,
    'a store without peek: nothing to say',
  )
})

/** A memory store that several protections share, as gateways share a Redis: each may hold other fingerprint keys. */
function shared() {
  const store = memory()
  return (keys: Buffer[]) => createRetryProtection(store, { idempotencyFingerprintKey: keys })
}

t.test(
  'a record under a fingerprint key this gateway does not hold: 503 with Retry-After, never 422, never forwarded',
  async (t) => {
    const [older, newer] = [Buffer.alloc(32, 'o'), Buffer.alloc(32, 'n')]
    const on = shared()
    const rolled = on([newer, older])
    rolled.settle(ticketOf(await guard(rolled)), CREATED)
    const notYet = on([older])
    const refused = await guard(notYet)
    t.match(refused, {
      kind: 'refuse',
      outcome: 'unknownKey',
      rejection: {
        status: 503,
        headers: { 'Retry-After': '1' },
        body: {
          errorName: 'serviceUnavailable',
          message:
            /fingerprint key this gateway does not hold.*Nothing was forwarded\. Retry with the same transactionReference after the time given in Retry-After\.$/,
        },
      },
    })
    t.match(await guard(notYet, passed('order-1', 'default', 999)), { outcome: 'unknownKey' }, 'whatever the body')
    t.equal(notYet.inspect(passed()), 'unknownKey', "report mode's look says so")
    t.match(
      await guard(on([older, newer])),
      { kind: 'replay', outcome: 'replayed' },
      'a gateway holding the key replays',
    )
    t.match(await guard(on([newer])), { kind: 'replay' })
    t.match(await guard(on([newer]), passed('order-1', 'default', 999)), { kind: 'refuse', outcome: 'alreadyUsed' })

    // The unknown outcome of a claim past its window is compared as a recorded answer is.
    let now = 0
    const late = new MemoryIdempotencyStore({
      ttlMs: 60_000,
      inFlightMs: 1000,
      oversizedAnswer: OVERSIZED_ANSWER,
      unknownAnswer: UNKNOWN_ANSWER,
      now: () => now,
    })
    await guard(createRetryProtection(late, { idempotencyFingerprintKey: [newer] }))
    now = 1000
    t.match(await guard(createRetryProtection(late, { idempotencyFingerprintKey: [older] })), { outcome: 'unknownKey' })
    t.match(await guard(createRetryProtection(late, { idempotencyFingerprintKey: [older, newer] })), {
      kind: 'replay',
      answer: UNKNOWN_ANSWER,
    })
  },
)

t.test('close closes the store', async (t) => {
  const store = unreachable('throw')
  await createRetryProtection(store).close()
  t.ok(store.closed)
})

t.test(
  'a record made before keyed fingerprints (the SHA-256 of the document forwarded) is still the same payment',
  async (t) => {
    const store = memory()
    const document = passed().asForwarded()
    const digest = createHash('sha256').update(document).digest('base64')
    const claim = store.claim(idempotencyKey('default', 'order-1'), `sale ${digest}`)
    if (claim.state === 'claimed') store.record(idempotencyKey('default', 'order-1'), claim.token, CREATED)
    const protection = createRetryProtection(store)
    t.match(await guard(protection), { kind: 'replay', answer: { status: 201 } }, 'replayed')
    t.match(
      await guard(protection, passed('order-1', 'default', 999)),
      { outcome: 'alreadyUsed' },
      'another payment: 422',
    )
    const reordered = saleBody() as PaymentRequest
    reordered.transactionReference = 'order-1'
    reordered.instruction.value.amount = 250
    const { instruction, ...rest } = reordered
    const shuffled = { instruction, ...rest }
    t.match(
      await guard(protection, protectedPayment('sale', 'default', shuffled, reordered)),
      { kind: 'replay' },
      'the same payment with its members in another order',
    )
  },
)

/** The sample policy for `default`, and `euro` taking euros only. */
const CHECKS = buildChecks({ policies: policies({ entity: 'euro', currencies: ['EUR'] }) })
/** The same, after `euro`'s policy changed to dollars only. */
const DOLLARS = buildChecks({ policies: policies({ entity: 'euro', currencies: ['USD'] }) })
const SHOP: Principal = { username: 'shop', entities: new Set(['default', 'euro']) }
const LONG_LINE = 'A narrative line longer than the twenty-four characters a card statement shows'

/** A sale that passed checks 1 to 9 for `euro`, in `currency`, as the proxy hands it to `createPayments`. */
function entitled(currency = 'EUR', amount = 250, reference = 'order-1', checks = CHECKS): Entitled {
  const body = saleBody({ entity: 'euro', transactionReference: reference })
  body.instruction.value = { amount, currency }
  body.instruction.narrative.line1 = LONG_LINE
  const verdict = checks.checkEntitled('sale', bytes(body), SHOP)
  if (verdict.ok !== 'entitled') throw new Error(`not entitled: ${JSON.stringify(verdict)}`)
  return verdict
}

/** A forwarder standing for the backend: it keeps each call, and the test tells each how it ended. */
function backend(): {
  forwarder: Pick<Forwarder, 'forward'>
  calls: { payload: Buffer | undefined; settled: OnSettled | undefined }[]
} {
  const calls: { payload: Buffer | undefined; settled: OnSettled | undefined }[] = []
  return {
    calls,
    forwarder: { forward: (_req, _res, payload, settled) => void calls.push({ payload, settled }) },
  }
}

interface Sent {
  status?: number
  headers?: unknown
  body?: unknown
}

/** One payment through `payments.forward`, with `checks`'s policy: what the client was sent (nothing when forwarded), and the exchange. */
async function pay(
  payments: Payments,
  payment: Entitled,
  checks: Checks = CHECKS,
): Promise<{ sent: Sent; exchange: Exchange }> {
  const sent: Sent = {}
  const res = {
    headersSent: false,
    writeHead(status: number, headers: unknown) {
      Object.assign(sent, { status, headers })
      this.headersSent = true
    },
    end(body: unknown) {
      sent.body = body
    },
  }
  const exchange = { errorName: undefined, retryProtection: undefined, sendBy: undefined } as unknown as Exchange
  await payments.forward(
    {} as IncomingMessage,
    res as unknown as GatewayResponse,
    exchange,
    payment,
    checks.checkPolicy,
  )
  return { sent, exchange }
}

const errorOf = (sent: Sent) => JSON.parse(String(sent.body)) as { errorName: string; message: string }

t.test(
  'the proxy: a payment forwarded once, policy applied; a copy in flight 409; its answer replayed; another payment 422',
  async (t) => {
    const { forwarder, calls } = backend()
    const metrics = createMetrics({ defaultMetrics: false })
    const payments = createPayments(forwarder, { timeout: 1_000, metrics })
    const before = performance.now()
    const first = await pay(payments, entitled())
    const after = performance.now()
    t.same(first.sent, {}, 'nothing answered by retry protection: the backend answers')
    t.equal(calls.length, 1)
    t.equal(
      JSON.parse(String(calls[0]?.payload)).instruction.narrative.line1,
      LONG_LINE.slice(0, 24),
      'the document as the policy rewrote it (line1 cut to 24 characters)',
    )
    t.match(first.exchange, { retryProtection: 'claimed' })
    const sendBy = first.exchange.sendBy as number
    t.ok(sendBy >= before + 1_000 && sendBy <= after + 1_000, 'sent by the timeout from now: the wait for a connection')

    const copy = await pay(payments, entitled())
    t.match(copy.sent, { status: 409, headers: { 'Retry-After': '1' } })
    t.match(copy.exchange, { errorName: 'paymentIsInProgress', retryProtection: 'inProgress' })
    t.equal(errorOf(copy.sent).errorName, 'paymentIsInProgress')

    calls[0]?.settled?.(CREATED)
    const retry = await pay(payments, entitled())
    t.same(retry.sent, {
      status: 201,
      headers: ['content-type', 'application/json', 'Idempotent-Replayed', 'true'],
      body: CREATED.body,
    })
    t.match(retry.exchange, { retryProtection: 'replayed', errorName: undefined })

    const other = await pay(payments, entitled('EUR', 999))
    t.match(other.sent, { status: 422 })
    t.match(other.exchange, { errorName: 'transactionReferenceIsAlreadyUsed', retryProtection: 'alreadyUsed' })
    t.equal(calls.length, 1, 'forwarded once')
    const counted = await metrics.registry.getSingleMetricAsString('payments_gate_retry_protection_total')
    for (const outcome of ['claimed', 'inProgress', 'replayed', 'alreadyUsed'])
      t.match(counted, new RegExp(`outcome="${outcome}"} 1$`, 'm'), `${outcome} counted`)
    t.equal(payments.inspect(passed('order-9')), 'claimed', "report mode's look")
    t.equal(await payments.ready(), true, 'a memory store is ready at once')
    await payments.close()
    await pay(payments, entitled())
    t.equal(calls.length, 2, 'closed: the store forgot')
  },
)

t.test(
  "a payment its policy refuses gets the policy's answer and frees its key; a recorded one is replayed whatever its policy says now",
  async (t) => {
    const { forwarder, calls } = backend()
    const metrics = createMetrics({ defaultMetrics: false })
    const payments = createPayments(forwarder, { timeout: 1_000, metrics })
    const refused = await pay(payments, entitled('GBP'))
    t.match(refused.sent, { status: 400 })
    t.equal(errorOf(refused.sent).errorName, 'currencyIsNotSupported')
    t.equal(refused.exchange.errorName, 'currencyIsNotSupported')
    t.equal(refused.exchange.retryProtection, undefined, 'no retry-protection outcome: it was never forwarded')
    t.equal(calls.length, 0)
    t.notMatch(await metrics.registry.getSingleMetricAsString('payments_gate_retry_protection_total'), /} 1/)
    const fixed = await pay(payments, entitled('EUR'))
    t.match(fixed.exchange, { retryProtection: 'claimed' }, 'the fixed payment under the same reference is forwarded')
    calls[0]?.settled?.(CREATED)
    const retry = await pay(payments, entitled('EUR'), DOLLARS)
    t.match(retry, { sent: { status: 201 }, exchange: { retryProtection: 'replayed' } }, 'replayed, not refused')
  },
)

/** A store that cannot be reached: every call throws. */
const DOWN = {
  claim: () => {
    throw new Error('store down')
  },
  record() {},
  release() {},
  close: async () => {},
} as unknown as IdempotencyStore

/** Payments on a store that cannot be reached, failure open and closed, and the failures they report. */
function onDownStore(forwarder: Pick<Forwarder, 'forward'>): { errors: unknown[]; open: Payments; closed: Payments } {
  const errors: unknown[] = []
  const options = {
    timeout: 1_000,
    metrics: undefined,
    idempotency: DOWN,
    onStoreError: (e: unknown) => errors.push(e),
  }
  return {
    errors,
    open: createPayments(forwarder, { ...options, idempotencyFailure: 'open' }),
    closed: createPayments(forwarder, options),
  }
}

t.test(
  "a store that cannot be reached, failure open: a payment its policy refuses still gets the policy's 400 (issue 47); one it accepts goes unprotected",
  async (t) => {
    const { forwarder, calls } = backend()
    const { errors, open, closed } = onDownStore(forwarder)
    const refused = await pay(open, entitled('GBP'))
    t.match(refused.sent, { status: 400 })
    t.equal(errorOf(refused.sent).errorName, 'currencyIsNotSupported')
    t.equal(refused.exchange.errorName, 'currencyIsNotSupported')
    t.match(errors, [{ message: 'store down' }], 'the store failure reported, and nothing else')
    t.equal(errors.length, 1)
    t.equal(calls.length, 0, 'not forwarded')
    const accepted = await pay(open, entitled('EUR'))
    t.same(accepted.sent, {})
    t.equal(accepted.exchange.retryProtection, 'unprotected')
    t.equal(calls.length, 1)
    t.equal(calls[0]?.settled, undefined, 'nothing to settle')

    for (const currency of ['EUR', 'GBP']) {
      const answer = await pay(closed, entitled(currency))
      t.match(answer.sent, { status: 503 }, currency)
      t.match(answer.exchange, { errorName: 'serviceUnavailable', retryProtection: 'storeUnavailable' })
    }
    t.equal(calls.length, 1, 'closed: nothing forwarded')
  },
)

/** The memory store answering through promises, as a Redis store does. */
function later(store: MemoryIdempotencyStore): IdempotencyStore {
  return {
    claim: async (
      key: string,
      fingerprint: string,
      matches?: (stored: string) => boolean | undefined,
    ): Promise<Claim> => store.claim(key, fingerprint, matches),
    record: async (...args: Parameters<MemoryIdempotencyStore['record']>) => store.record(...args),
    release: async (...args: Parameters<MemoryIdempotencyStore['release']>) => store.release(...args),
    peek: async (key: string, fingerprint: string): Promise<Peek> => store.peek(key, fingerprint),
    close: () => store.close(),
  } as IdempotencyStore
}

t.test('a store that answers later (Redis): the same decisions, once it answers', async (t) => {
  const { forwarder, calls } = backend()
  const payments = createPayments(forwarder, { timeout: 1_000, metrics: undefined, idempotency: later(memory()) })
  const pending = payments.forward(
    {} as IncomingMessage,
    { writeHead() {}, end() {} } as unknown as GatewayResponse,
    { errorName: undefined } as unknown as Exchange,
    entitled(),
    CHECKS.checkPolicy,
  )
  t.ok(pending instanceof Promise)
  await pending
  t.equal(calls.length, 1)
  t.match(await pay(payments, entitled()), { sent: { status: 409 } })
  const refused = await pay(payments, entitled('GBP', 250, 'order-2'))
  t.match(refused, { sent: { status: 400 }, exchange: { retryProtection: undefined } })
  await new Promise((resolve) => setImmediate(resolve))
  t.match(await pay(payments, entitled('EUR', 250, 'order-2')), { exchange: { retryProtection: 'claimed' } }, 'freed')
  calls[0]?.settled?.(CREATED)
  await new Promise((resolve) => setImmediate(resolve))
  t.match(await pay(payments, entitled()), { sent: { status: 201 }, exchange: { retryProtection: 'replayed' } })
  t.equal(await payments.inspect(passed('order-9')), 'claimed')
})

/** One payment through `payments.forward` at the in-flight cap: what the client was sent, and the entities shed. */
async function payShed(payments: Payments, payment: Entitled): Promise<{ sent: Sent; shed: string[] }> {
  const sent: Sent = {}
  const shed: string[] = []
  const res = {
    writeHead(status: number, headers: unknown) {
      Object.assign(sent, { status, headers })
    },
    end(body: unknown) {
      sent.body = body
    },
  }
  await payments.forward(
    {} as IncomingMessage,
    res as unknown as GatewayResponse,
    { errorName: undefined } as unknown as Exchange,
    payment,
    () => {
      throw new Error('the policy runs for no payment at the cap')
    },
    (_res, _exchange, entity) => void shed.push(entity),
  )
  return { sent, shed }
}

t.test(
  'at the in-flight cap: a payment retry protection knows gets its 409, its replay or its 422; a new one is shed, its claim freed',
  async (t) => {
    for (const [name, idempotency] of [
      ['memory', memory()],
      ['a store that answers later', later(memory())],
    ] as const) {
      const { forwarder, calls } = backend()
      const payments = createPayments(forwarder, { timeout: 1_000, metrics: undefined, idempotency })
      t.same(await payShed(payments, entitled()), { sent: {}, shed: ['euro'] }, `${name}: a new payment is shed`)
      await new Promise((resolve) => setImmediate(resolve))
      t.match(await pay(payments, entitled()), { exchange: { retryProtection: 'claimed' } }, `${name}: its key freed`)
      t.match(await payShed(payments, entitled()), { sent: { status: 409 }, shed: [] }, `${name}: in flight`)
      calls[0]?.settled?.(CREATED)
      await new Promise((resolve) => setImmediate(resolve))
      t.same(
        await payShed(payments, entitled()),
        {
          sent: { status: 201, headers: [...CREATED.headers, 'Idempotent-Replayed', 'true'], body: CREATED.body },
          shed: [],
        },
        `${name}: replayed`,
      )
      t.match(await payShed(payments, entitled('EUR', 999)), { sent: { status: 422 }, shed: [] }, `${name}: another`)
      t.equal(calls.length, 1, `${name}: nothing forwarded at the cap`)
    }
    const { forwarder, calls } = backend()
    const off = createPayments(forwarder, { timeout: 1_000, metrics: undefined, idempotency: 'off' })
    t.same(await payShed(off, entitled()), { sent: {}, shed: ['euro'] }, 'off: shed at once')
    t.same(await payShed(off, entitled()), { sent: {}, shed: ['euro'] }, 'off: nothing claimed')
    t.equal(calls.length, 0)
    const { errors, open, closed } = onDownStore(forwarder)
    t.same(await payShed(open, entitled()), { sent: {}, shed: ['euro'] }, 'a store down, failure open: shed')
    t.match(errors, [{ message: 'store down' }], 'the look-up failure reported')
    t.equal(errors.length, 1, 'and no release of a claim never made')
    t.match(await payShed(closed, entitled()), { sent: { status: 503 }, shed: [] }, 'closed')
  },
)

t.test('replicas to wait for need a Redis store', async (t) => {
  const message = 'idempotencyReplicas 1 needs a Redis store in idempotency: only Redis has replicas to wait for'
  for (const idempotency of ['memory', 'off'])
    t.throws(
      () => createRetryStore({ idempotency, idempotencyReplicas: 1, timeout: 1_000 }),
      { code: 'EIDEMPOTENCY', message },
      idempotency,
    )
  t.ok(createRetryStore({ idempotency: 'memory', idempotencyReplicas: 0, timeout: 1_000 }), 'none to wait for: taken')
})

t.test('off: the policy alone, every payment forwarded, nothing claimed or counted', async (t) => {
  const { forwarder, calls } = backend()
  const metrics = createMetrics({ defaultMetrics: false })
  const payments = createPayments(forwarder, { timeout: 1_000, metrics, idempotency: 'off' })
  const before = performance.now()
  const first = await pay(payments, entitled())
  t.ok((first.exchange.sendBy as number) >= before + 1_000)
  await pay(payments, entitled())
  t.equal(calls.length, 2, 'the same payment forwarded twice')
  t.equal(JSON.parse(String(calls[0]?.payload)).instruction.narrative.line1, LONG_LINE.slice(0, 24))
  t.equal(calls[0]?.settled, undefined)
  t.equal(first.exchange.retryProtection, undefined)
  const refused = await pay(payments, entitled('GBP'))
  t.match(refused.sent, { status: 400 })
  t.equal(refused.exchange.errorName, 'currencyIsNotSupported')
  t.equal(calls.length, 2)
  t.notMatch(await metrics.registry.getSingleMetricAsString('payments_gate_retry_protection_total'), /} 1/)
  t.equal(payments.inspect(passed()), undefined)
  t.equal(await payments.ready(), true)
  await payments.close()
})

/** Waits for the real clock to pass `ms`: the event a TTL on performance.now waits for. */
function pass(ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end);
}

t.test("the memory store by default, with the options' TTL and bounds", async (t) => {
  const { forwarder, calls } = backend()
  const short = createPayments(forwarder, { timeout: 1_000, metrics: undefined, idempotencyTtl: 0.002 })
  await pay(short, entitled())
  calls[0]?.settled?.(CREATED)
  pass(3)
  await pay(short, entitled())
  t.equal(calls.length, 2, 'a TTL of 2 ms: forwarded again after 3 ms')
  const day = createPayments(forwarder, { timeout: 1_000, metrics: undefined, idempotencyTtl: 1 })
  await pay(day, entitled())
  calls[2]?.settled?.(CREATED)
  pass(3)
  t.match(await pay(day, entitled()), { sent: { status: 201 } }, 'a TTL of 1 s: still replayed after 3 ms')

  const full: string[] = []
  const errors: unknown[] = []
  let window: (() => number) | undefined
  const one = createPayments(forwarder, {
    timeout: 1_000,
    metrics: undefined,
    idempotencyMaxEntries: 1,
    idempotencyReport: { evicted() {}, full: () => void full.push('full'), window: (read) => void (window = read) },
    onStoreError: (error) => errors.push(error),
  })
  t.equal(window?.(), 0, 'the window reported from the start')
  await pay(one, entitled())
  t.match(await pay(one, entitled('EUR', 250, 'order-2')), { sent: { status: 503 } }, 'one key at most')
  t.match(errors, [{ code: 'ESTOREFULL' }])
  t.same(full, ['full'])
  t.throws(
    () => createPayments(forwarder, { timeout: 1_000, metrics: undefined, idempotencyMaxBytes: MIN_MAX_BYTES - 1 }),
    RangeError,
  )

  const big = createPayments(forwarder, { timeout: 1_000, metrics: undefined })
  await pay(big, entitled())
  calls.at(-1)?.settled?.({ ...CREATED, body: Buffer.alloc(70_000, 'x') })
  const retry = await pay(big, entitled())
  t.same([retry.sent.status, String(retry.sent.body)], [500, String(OVERSIZED_ANSWER.body)], 'too large to keep')
})

t.test('a Redis store needs the fleet fingerprint key; the store given is used as it is', async (t) => {
  for (const idempotency of ['redis://127.0.0.1:6379', 'rediss-sentinel://127.0.0.1:26379#main'])
    t.throws(() => createRetryStore({ idempotency, timeout: 1_000 }), {
      code: 'EFINGERPRINTKEY',
      message:
        'idempotencyFingerprintKey must be given with a Redis store: every gateway sharing it fingerprints payments with the same key',
    })
  const redis = new Redis({ lazyConnect: true })
  const store = new RedisIdempotencyStore(redis, {
    ttlMs: 1_000,
    inFlightMs: 1_000,
    oversizedAnswer: OVERSIZED_ANSWER,
    unknownAnswer: UNKNOWN_ANSWER,
  })
  t.throws(() => createRetryStore({ idempotency: store, timeout: 1_000 }), { code: 'EFINGERPRINTKEY' })
  const options: PaymentsOptions = {
    idempotency: store,
    idempotencyFingerprintKey: FINGERPRINT_KEY,
    timeout: 1_000,
    metrics: undefined,
  }
  t.equal(createRetryStore(options), store)
  const payments = createPayments(backend().forwarder, options)
  t.equal(await payments.ready(5), false, "the Redis store's own readiness: not connected")
  await payments.close()
  t.equal(redis.status, 'end', 'closed')
  t.ok(createRetryStore({ timeout: 1_000 }) instanceof MemoryIdempotencyStore, 'memory without a key: a key of its own')
  t.equal(createRetryStore({ idempotency: 'off', timeout: 1_000 }), undefined)
})

t.test("memory in a node:cluster worker is refused: each worker's store alone would run a retry again", async (t) => {
  const message =
    "idempotency memory in a cluster worker (node:cluster, PM2's cluster mode): each worker would keep its own store and run a retry again; give idempotency a Redis URL that every worker shares (or off)"
  // In this process too, as node's flag says a worker: where the mutation tests (Stryker) see the refusal.
  const flag = cluster as { isWorker: boolean }
  flag.isWorker = true
  t.teardown(() => {
    flag.isWorker = false
  })
  t.throws(() => createRetryStore({ idempotency: 'memory', timeout: 1_000 }), { code: 'EIDEMPOTENCY', message })
  t.throws(() => createRetryStore({ timeout: 1_000 }), { code: 'EIDEMPOTENCY' }, 'the default store')
  t.equal(createRetryStore({ idempotency: 'off', timeout: 1_000 }), undefined)
  const credentials = await writeCredentials(t.testdir())
  const worker = spawnCli([credentials, 'memory', 'off'], {}, 'test/helpers/in-cluster-worker.ts')
  t.equal(await worker.exited, 0, worker.output().stderr)
  t.same(worker.output().stdout.trim().split('\n'), [`memory: EIDEMPOTENCY ${message}`, 'off: opened'])
})

t.test('a claim holds its key for three times the backend timeout and five seconds', async (t) => {
  t.equal(inFlightWindowMs(1_000), 8_000)
  t.equal(inFlightWindowMs(30_000), 95_000)
})

t.test('the messages of a store failure and of an unknown outcome say what happened and what to do', async (t) => {
  const refused = await guard(createRetryProtection(unreachable('throw')))
  t.match(refused, {
    outcome: 'storeUnavailable',
    rejection: {
      status: 503,
      body: {
        errorName: 'serviceUnavailable',
        message: 'Retry protection is unavailable, so the payment was not forwarded. Retry later.',
      },
    },
  })
  t.equal(UNKNOWN_ANSWER.status, 500)
  const unknown = JSON.parse(UNKNOWN_ANSWER.body.toString())
  t.equal(unknown.errorName, 'internalErrorOccurred')
  t.match(
    unknown.message,
    /^The outcome of this payment is unknown: it may have reached the backend, so it is not forwarded again/,
  )
  t.notMatch(unknown.message, /Retry later/, 'never "Retry later": the payment may have been charged')
})

t.test('a store that answers at once: settle reports no failure, and a payment pays no promise', async (t) => {
  const errors: unknown[] = []
  const protection = createRetryProtection(memory(), { onStoreError: (error) => errors.push(error) })
  protection.settle(ticketOf(await guard(protection)), CREATED)
  protection.settle(ticketOf(await guard(protection, passed('order-2'))), { kind: 'refused' })
  await new Promise((resolve) => setImmediate(resolve))
  t.same(errors, [], 'nothing reported')
  const { forwarder, calls } = backend()
  const payments = createPayments(forwarder, { timeout: 1_000, metrics: undefined })
  const sent = payments.forward(
    {} as IncomingMessage,
    { writeHead() {}, end() {} } as unknown as GatewayResponse,
    { errorName: undefined } as unknown as Exchange,
    entitled(),
    CHECKS.checkPolicy,
  )
  t.equal(sent, undefined, 'forwarded without a promise')
  t.equal(calls.length, 1)
})

/** `euro` taking euros only, at most one payment a minute. */
const LIMITED = buildChecks({
  policies: policies({ entity: 'euro', currencies: ['EUR'], rateLimit: { payments: 1, seconds: 60 } }),
})
const payLimited = (payments: Payments, currency: string, reference: string) =>
  pay(payments, entitled(currency, 250, reference, LIMITED), LIMITED)

t.test(
  "a rate limit with retry protection: a retry it answers is not counted, a payment over the limit 429, its policy's refusal 400",
  async (t) => {
    const { forwarder, calls } = backend()
    const payments = createPayments(forwarder, { timeout: 1_000, metrics: undefined })
    const first = await payLimited(payments, 'EUR', 'order-1')
    t.same(first.sent, {})
    t.match(first.exchange, { retryProtection: 'claimed' })
    t.ok(first.exchange.rateLimitFields, 'admitted: its answer carries the RateLimit fields')
    t.equal(calls.length, 1)
    t.match(await payLimited(payments, 'EUR', 'order-1'), { sent: { status: 409 } }, 'a copy in flight: 409, not 429')
    const over = await payLimited(payments, 'EUR', 'order-2')
    t.match(over.sent, { status: 429 })
    t.match(over.exchange, { errorName: 'requestRateIsTooHigh', limited: 'rateLimited', retryProtection: undefined })
    const refused = await payLimited(payments, 'GBP', 'order-3')
    t.match(refused.sent, { status: 400 })
    t.equal(refused.exchange.errorName, 'currencyIsNotSupported')
    calls[0]?.settled?.(CREATED)
    t.match(await payLimited(payments, 'EUR', 'order-1'), {
      sent: { status: 201 },
      exchange: { retryProtection: 'replayed' },
    })
    t.equal(calls.length, 1, 'forwarded once')
  },
)

t.test(
  'a Redis that cannot be reached, failure open: a payment of an entity with a rate limit goes unprotected and unlimited, each failure reported',
  async (t) => {
    const redis = new Redis({
      port: await freePort(),
      lazyConnect: true,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    })
    redis.on('error', () => {})
    const store = new RedisIdempotencyStore(redis, {
      ttlMs: 1_000,
      inFlightMs: 1_000,
      oversizedAnswer: OVERSIZED_ANSWER,
      unknownAnswer: UNKNOWN_ANSWER,
    })
    const { forwarder, calls } = backend()
    const errors: unknown[] = []
    const payments = createPayments(forwarder, {
      idempotency: store,
      idempotencyFingerprintKey: FINGERPRINT_KEY,
      idempotencyFailure: 'open',
      onStoreError: (error) => errors.push(error),
      timeout: 1_000,
      metrics: undefined,
    })
    const paid = await payLimited(payments, 'EUR', 'order-1')
    t.same(paid.sent, {}, 'forwarded')
    t.equal(paid.exchange.retryProtection, 'unprotected')
    t.equal(calls.length, 1)
    t.equal(
      errors.length,
      4,
      "every failure reported: retry protection's look and claim, the limit's count and its refund",
    )
    await payments.close()
  },
)

t.test("a rate limit without retry protection: the policy's refusal 400, then the limit", async (t) => {
  const { forwarder, calls } = backend()
  const payments = createPayments(forwarder, { timeout: 1_000, metrics: undefined, idempotency: 'off' })
  const refused = await payLimited(payments, 'GBP', 'order-1')
  t.match(refused.sent, { status: 400 })
  t.equal(refused.exchange.errorName, 'currencyIsNotSupported')
  t.equal(calls.length, 0, 'refused by its policy: not counted either')
  const first = await payLimited(payments, 'EUR', 'order-1')
  t.same(first.sent, {})
  t.ok(first.exchange.rateLimitFields)
  t.equal(calls.length, 1)
  t.equal(
    JSON.parse(String(calls[0]?.payload)).instruction.narrative.line1,
    LONG_LINE.slice(0, 24),
    'the document as its policy rewrote it',
  )
  t.match(await payLimited(payments, 'EUR', 'order-2'), {
    sent: { status: 429 },
    exchange: { errorName: 'requestRateIsTooHigh' },
  })
  t.equal(calls.length, 1)
})

/** The payment `entitled()` stands for, as retry protection sees it before its policy. */
function entitledPayment(): ProtectedPayment {
  const { operation, entity, document } = entitled()
  return protectedPayment(operation, entity, document, document as PaymentRequest)
}

t.test("a gate's retry protection, lent to the gateways built from its checks", async (t) => {
  const checks = buildChecks({ policies: policies({ entity: 'euro', currencies: ['EUR'] }) })
  t.equal(lentRetryProtection(checks, { timeout: 1_000 }), undefined, 'nothing lent')
  const store = memory()
  const key = Buffer.alloc(32, 'g')
  const lent = {
    protection: createRetryProtection(store, { idempotencyFingerprintKey: key }),
    store,
    inFlightMs: 8_000,
  }
  lendRetryProtection(checks, lent)
  t.equal(lentRetryProtection(checks, { timeout: 1_000 }), lent, 'a window of exactly 3 x timeout + 5 s is enough')
  t.equal(lentRetryProtection(checks, { timeout: 1_000, idempotency: 'memory' }), undefined, 'a store of its own')
  t.equal(lentRetryProtection(CHECKS, { timeout: 1_000 }), undefined, "another gate's checks")
  t.throws(() => lentRetryProtection(checks, { timeout: 1_001 }), {
    code: 'EIDEMPOTENCY',
    message:
      "the gate's idempotencyInFlight (8 s) is shorter than this gateway's in-flight window (3 x timeout + 5 s = 8.003 s): raise it, or give the gateway an idempotency of its own",
  })

  const { forwarder, calls } = backend()
  const windows: unknown[] = []
  const payments = createPayments(
    forwarder,
    {
      timeout: 1_000,
      metrics: undefined,
      idempotencyReport: { evicted() {}, full() {}, window: (read) => void windows.push(read) },
    },
    lent,
  )
  t.same(windows, [], 'no store of its own built')
  await pay(payments, entitled(), checks)
  t.equal(calls.length, 1)
  t.equal(store.size, 1, "claimed in the gate's store")
  calls[0]?.settled?.(CREATED)
  t.match(
    await guard(lent.protection, entitledPayment()),
    { kind: 'replay' },
    "recorded under the gate's fingerprint key",
  )
  await payments.close()
  t.equal(store.size, 1, "closing the gateway leaves the gate's store open")
})
