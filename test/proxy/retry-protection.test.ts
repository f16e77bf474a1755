import t from 'tap'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import type { IdempotencyStore } from '../../lib/idempotency/store.js'
import type { PaymentRequest } from '../../lib/schema/payment.js'
import type { BackendOutcome } from '../../lib/proxy/forward.js'
import {
  createRetryProtection,
  OVERSIZED_ANSWER,
  protectedPayment,
  UNKNOWN_ANSWER,
  type Guard,
  type ProtectedPayment,
  type Ticket,
} from '../../lib/proxy/retry-protection.js'
import { saleBody } from '../helpers/fixtures.js'

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
