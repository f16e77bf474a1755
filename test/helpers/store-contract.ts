import type { Test } from 'tap'
import type { Claim, IdempotencyStore, IdempotencyStoreOptions, RecordedAnswer } from '../../lib/idempotency/store.js'

export interface StoreUnderTest {
  readonly store: IdempotencyStore
  /** Lets `ms` pass for the store's expiry: the memory store's clock moves, Redis is waited for. */
  advance(ms: number): Promise<void>
  /** Whether `advance` is exact, so a key can be seen alive just before it expires. */
  readonly exact: boolean
  /** Whether a claim past its window is held until its holder records or releases it, past any TTL (the memory store). */
  readonly holdsLate?: boolean
}

export type MakeStore = (
  t: Test,
  options: Pick<IdempotencyStoreOptions, 'ttlMs' | 'inFlightMs'>,
) => Promise<StoreUnderTest>

/** Bytes that are not UTF-8, a line feed, a quote and a backslash, so a replay that decoded, re-encoded or escaped the body would show. */
export const ANSWER: RecordedAnswer = Object.freeze({
  status: 201,
  headers: [
    'Content-Type',
    'application/vnd.example.payments-v6.hal+json',
    'Set-Cookie',
    'a=1',
    'Set-Cookie',
    'b=2',
    'X-Note',
    'café',
  ],
  body: Buffer.concat([
    Buffer.from('{"outcome":"authorized"}'),
    Buffer.from([0x00, 0xff, 0xfe, 0x80, 0xc3, 0x28, 0x0a, 0x0d, 0x22, 0x5c]),
  ]),
})

export const OVERSIZED: RecordedAnswer = Object.freeze({
  status: 422,
  headers: ['Content-Type', 'application/json'],
  body: Buffer.from('{"errorName":"transactionReferenceIsAlreadyUsed"}'),
})

export const UNKNOWN: RecordedAnswer = Object.freeze({
  status: 500,
  headers: ['Content-Type', 'application/json'],
  body: Buffer.from('{"errorName":"internalErrorOccurred","message":"unknown"}'),
})

/** The bound on answers every contract store is built with. */
/** A Redis store's settings in the tests of lib/idempotency/redis.ts: long windows, and a release tried again quickly. */
export const REDIS_STORE_OPTIONS = Object.freeze({
  ttlMs: 600_000,
  inFlightMs: 600_000,
  oversizedAnswer: OVERSIZED,
  unknownAnswer: UNKNOWN,
  releaseRetry: Object.freeze({ attempts: 3, firstDelayMs: 10, maxDelayMs: 20 }),
})

export const MAX_ANSWER_BYTES = 4096

const LONG = { ttlMs: 600_000, inFlightMs: 600_000 }

function same(t: Test, claim: Claim, answer: RecordedAnswer, message: string): void {
  t.equal(claim.state, 'recorded', message)
  if (claim.state !== 'recorded') return
  t.equal(claim.answer.status, answer.status, `${message}: status`)
  t.same([...claim.answer.headers], [...answer.headers], `${message}: headers`)
  t.ok(Buffer.isBuffer(claim.answer.body), `${message}: body is a Buffer`)
  t.equal(claim.answer.body.toString('hex'), answer.body.toString('hex'), `${message}: body byte for byte`)
}

async function claimed(t: Test, store: IdempotencyStore, key: string, fingerprint: string): Promise<string> {
  const claim = await store.claim(key, fingerprint)
  t.equal(claim.state, 'claimed', `${key} claimed`)
  return claim.state === 'claimed' ? claim.token : ''
}

/** What every IdempotencyStore promises (lib/idempotency/store.ts), run against each one. */
export function storeContract(t: Test, make: MakeStore): void {
  t.test('the first claim is claimed; the next, while in flight, is inFlight whatever its fingerprint', async (t) => {
    const { store } = await make(t, LONG)
    const token = await claimed(t, store, 'k', 'f1')
    t.type(token, 'string')
    t.same(await store.claim('k', 'f1'), { state: 'inFlight' })
    t.same(await store.claim('k', 'f2'), { state: 'inFlight' })
    await claimed(t, store, 'other', 'f1')
  })

  t.test(
    'a recorded answer is replayed byte for byte for the same fingerprint; another fingerprint is a mismatch',
    async (t) => {
      const { store } = await make(t, LONG)
      const token = await claimed(t, store, 'k', 'f1')
      await store.record('k', token, ANSWER)
      same(t, await store.claim('k', 'f1'), ANSWER, 'replayed')
      same(t, await store.claim('k', 'f1'), ANSWER, 'replayed again')
      t.same(await store.claim('k', 'f2'), { state: 'mismatch' })
      const empty = { status: 502, headers: [], body: Buffer.alloc(0) }
      await store.record('e', await claimed(t, store, 'e', 'f'), empty)
      same(t, await store.claim('e', 'f'), empty, 'no headers and no body')
    },
  )

  t.test('an answer over the bound is recorded as the stand-in answer', async (t) => {
    const { store } = await make(t, LONG)
    const big = { status: 200, headers: ['Content-Type', 'text/plain'], body: Buffer.alloc(MAX_ANSWER_BYTES, 0x61) }
    await store.record('k', await claimed(t, store, 'k', 'f'), big)
    same(t, await store.claim('k', 'f'), OVERSIZED, 'the stand-in')
    const fits = { status: 200, headers: [], body: Buffer.alloc(MAX_ANSWER_BYTES, 0x61) }
    await store.record('fits', await claimed(t, store, 'fits', 'f'), fits)
    same(t, await store.claim('fits', 'f'), fits, 'exactly at the bound is kept')
  })

  t.test(
    'a stored fingerprint of another form: `matches` decides, and one it cannot tell (a key not held) is unknownKey',
    async (t) => {
      const { store } = await make(t, LONG)
      await store.record('k', await claimed(t, store, 'k', 'hmac:old f1'), ANSWER)
      const asked: string[] = []
      const holds = (stored: string) => (asked.push(stored), stored === 'hmac:old f1')
      same(t, await store.claim('k', 'hmac:new f1', holds), ANSWER, 'the same payment under the older key: replayed')
      t.same(asked, ['hmac:old f1'], 'asked with the stored fingerprint')
      t.same(await store.claim('k', 'hmac:new f2', () => false), { state: 'mismatch' }, 'another payment')
      t.same(await store.claim('k', 'hmac:new f1', () => undefined), { state: 'unknownKey' }, 'cannot tell')
      t.same(await store.claim('k', 'hmac:new f1'), { state: 'mismatch' }, 'no matches: another payment')
      same(t, await store.claim('k', 'hmac:old f1', () => undefined), ANSWER, 'the same fingerprint needs no matches')
      t.same(await store.claim('k', 'hmac:new f1', () => undefined), { state: 'unknownKey' }, 'changed nothing')
      const token = await claimed(t, store, 'flying', 'hmac:old f1')
      t.same(await store.claim('flying', 'hmac:new f1', () => undefined), { state: 'inFlight' }, 'in flight: 409')
      await store.release('flying', token)
    },
  )

  t.test('release frees the key: the next claim is claimed', async (t) => {
    const { store } = await make(t, LONG)
    await store.release('k', await claimed(t, store, 'k', 'f1'))
    await claimed(t, store, 'k', 'f2')
  })

  t.test('a stale token can neither record nor release', async (t) => {
    const { store } = await make(t, LONG)
    const stale = await claimed(t, store, 'k', 'f')
    await store.release('k', stale)
    const owner = await claimed(t, store, 'k', 'f')
    t.not(owner, stale, 'a new token')
    await store.record('k', stale, ANSWER)
    t.same(await store.claim('k', 'f'), { state: 'inFlight' }, 'not recorded')
    await store.release('k', stale)
    t.same(await store.claim('k', 'f'), { state: 'inFlight' }, 'not released')
    await store.record('k', 'never-issued', ANSWER)
    await store.release('absent', owner)
    await store.record('absent', owner, ANSWER)
    await claimed(t, store, 'absent', 'f')
    await store.record('k', owner, ANSWER)
    await store.record('k', owner, OVERSIZED)
    await store.release('k', owner)
    same(t, await store.claim('k', 'f'), ANSWER, 'once recorded, the owner cannot record again nor release')
  })

  t.test('a recorded answer expires after ttlMs', async (t) => {
    const { store, advance, exact } = await make(t, { ttlMs: 300, inFlightMs: 600_000 })
    await store.record('k', await claimed(t, store, 'k', 'f'), ANSWER)
    if (exact) {
      await advance(299)
      same(t, await store.claim('k', 'f'), ANSWER, 'alive just before')
      await advance(2)
    } else await advance(301)
    await claimed(t, store, 'k', 'f')
  })

  t.test('50 concurrent claims of one key: exactly one is claimed', async (t) => {
    const { store } = await make(t, LONG)
    const claims = await Promise.all(Array.from({ length: 50 }, (_, i) => store.claim('k', `f${i % 3}`)))
    t.equal(claims.filter((claim) => claim.state === 'claimed').length, 1)
    t.equal(claims.filter((claim) => claim.state === 'inFlight').length, 49)
  })
}

/**
 * What every store promises of a claim that reaches the end of its in-flight
 * window with neither a record nor a release (lib/idempotency/store.ts): an
 * unknown outcome, replayed for a TTL, never a free key.
 */
export function unknownOutcomeContract(t: Test, make: MakeStore): void {
  const WINDOW = { ttlMs: 300, inFlightMs: 200 }

  t.test(
    'a claim past its window answers the unknown answer for its fingerprint, a mismatch for another, then expires a TTL later',
    async (t) => {
      const { store, advance, exact, holdsLate } = await make(t, WINDOW)
      const token = await claimed(t, store, 'k', 'f')
      if (exact) {
        await advance(199)
        t.same(await store.claim('k', 'f'), { state: 'inFlight' }, 'in flight just before')
        await advance(1)
      } else await advance(200)
      same(t, await store.claim('k', 'f'), UNKNOWN, 'unknown, never a free key')
      t.same(await store.claim('k', 'other'), { state: 'mismatch' })
      t.same(await store.claim('k', 'other', () => undefined), { state: 'unknownKey' }, 'a key not held: cannot tell')
      same(t, await store.claim('k', 'other', () => true), UNKNOWN, 'one `matches` recognizes')
      if (holdsLate === true) {
        await advance(300)
        same(t, await store.claim('k', 'f'), UNKNOWN, 'held past a TTL while its holder is at work')
        await store.release('k', token)
      } else if (exact) {
        await advance(299)
        same(t, await store.claim('k', 'f'), UNKNOWN, 'still unknown just before the TTL ends')
        await advance(1)
      } else await advance(300)
      await claimed(t, store, 'k', 'f')
    },
  )

  t.test("a late real answer replaces the unknown one; a stale token's does not", async (t) => {
    const { store, advance } = await make(t, WINDOW)
    const token = await claimed(t, store, 'k', 'f')
    await advance(200)
    await store.record('k', 'never-issued', ANSWER)
    same(t, await store.claim('k', 'f'), UNKNOWN, 'unknown')
    await store.record('k', token, ANSWER)
    same(t, await store.claim('k', 'f'), ANSWER, 'the real answer')
  })

  t.test("the owner's release past the window still frees the key", async (t) => {
    const { store, advance } = await make(t, WINDOW)
    const token = await claimed(t, store, 'k', 'f')
    await advance(200)
    await store.release('k', token)
    await claimed(t, store, 'k', 'f')
  })
}

/** Report mode's read-only look (docs/rollout.md): `peek` says what `claim` would, and never claims, records or refreshes. */
export function peekContract(t: Test, make: MakeStore): void {
  t.test('peek says what a claim would answer, and changes nothing', async (t) => {
    const { store, advance } = await make(t, { ttlMs: 600_000, inFlightMs: 200 })
    const peek = store.peek?.bind(store) as NonNullable<IdempotencyStore['peek']>
    t.equal(await peek('k', 'f'), 'free')
    t.equal(await peek('k', 'f'), 'free', 'a peek claims nothing')
    const token = await claimed(t, store, 'k', 'f')
    t.equal(await peek('k', 'f'), 'inFlight')
    await store.record('k', token, ANSWER)
    t.equal(await peek('k', 'f'), 'recorded')
    t.equal(await peek('k', 'other'), 'mismatch')
    t.equal(await peek('k', 'other', () => undefined), 'unknownKey')
    t.equal(await peek('k', 'other', () => true), 'recorded')
    t.equal(await peek('k', 'other', () => false), 'mismatch')
    same(t, await store.claim('k', 'f'), ANSWER, 'the recorded answer is still there')
    await claimed(t, store, 'held', 'f')
    await advance(150)
    t.equal(await peek('held', 'f'), 'inFlight')
    await advance(60)
    t.equal(
      await peek('held', 'f'),
      'recorded',
      'a peek did not keep the claim alive: past its window it is an unknown outcome',
    )
  })
}
