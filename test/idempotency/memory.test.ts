import { createHash, randomBytes } from 'node:crypto'
import t from 'tap'
import {
  ANSWER_ROOM,
  MIN_MAX_BYTES,
  MemoryIdempotencyStore,
  type MemoryIdempotencyStoreOptions,
} from '../../lib/idempotency/memory.js'
import { ANSWER, OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'

const OPTIONS = { ttlMs: 600_000, inFlightMs: 600_000, oversizedAnswer: OVERSIZED, unknownAnswer: UNKNOWN }

const headOf = (answer: typeof OVERSIZED) => JSON.stringify([answer.status, answer.headers]).length

function record(store: MemoryIdempotencyStore, key: string, body: Buffer): void {
  const claim = store.claim(key, 'f')
  if (claim.state === 'claimed') store.record(key, claim.token, { ...ANSWER, body })
}

function token(store: MemoryIdempotencyStore, key: string): string {
  const claim = store.claim(key, 'f')
  if (claim.state !== 'claimed') throw new Error(`${key} was ${claim.state}`)
  return claim.token
}

/** A store on a clock the test moves, telling what it reports. */
function watched(options: Partial<MemoryIdempotencyStoreOptions> = {}, time = 1_000_000) {
  const clock = { time }
  const seen = { evicted: 0, full: 0, read: (): number => Number.NaN }
  const store = new MemoryIdempotencyStore({
    ...OPTIONS,
    now: () => clock.time,
    report: { evicted: () => seen.evicted++, full: () => seen.full++, window: (read) => void (seen.read = read) },
    ...options,
  })
  return { store, clock, seen }
}

t.test('answers synchronously, so a payment pays no promise for it', async (t) => {
  const store = new MemoryIdempotencyStore(OPTIONS)
  const claim = store.claim('k', 'f')
  t.notOk(claim instanceof Promise)
  t.equal(claim.state, 'claimed')
  await store.close()
  t.equal(store.size, 0, 'close forgets every key')
})

t.test('a byte bound too small for the largest reference is refused', async (t) => {
  t.throws(
    () => new MemoryIdempotencyStore({ ...OPTIONS, maxBytes: MIN_MAX_BYTES - 1 }),
    new RangeError(`maxBytes must be at least ${MIN_MAX_BYTES}`),
  )
  t.ok(new MemoryIdempotencyStore({ ...OPTIONS, maxBytes: MIN_MAX_BYTES }))
})

t.test(
  'the entry bound evicts the oldest answer first, never a claim in flight: a claim with no room left fails',
  async (t) => {
    const { store, seen } = watched({ maxEntries: 2 })
    record(store, 'answered', Buffer.from('{}'))
    store.claim('a', 'f')
    store.claim('b', 'f')
    t.equal(seen.evicted, 1, 'the answer made room')
    t.same(store.claim('a', 'f'), { state: 'inFlight' }, 'a is still in flight: a retry is never forwarded again')
    t.throws(
      () => store.claim('c', 'f'),
      { code: 'ESTOREFULL', message: 'the retry-protection memory store is full of payments in flight' },
      'no room: a store failure',
    )
    t.throws(
      () => store.claim('answered', 'f'),
      { code: 'ESTOREFULL' },
      'the evicted key is free, and does not fit either',
    )
    t.equal(seen.full, 2, 'each refusal counted')
    t.equal(store.size, 2, 'nothing changed')
    t.same(
      [store.claim('a', 'f'), store.claim('b', 'f'), store.peek('c', 'f')],
      [{ state: 'inFlight' }, { state: 'inFlight' }, 'free'],
    )
    t.equal(seen.evicted, 1, 'no claim in flight was evicted')
  },
)

t.test(
  'a claim past its window whose relay is still at work: unknown to a retry, never evicted, its answer recorded',
  async (t) => {
    const { store, clock, seen } = watched({ maxEntries: 2, inFlightMs: 100, ttlMs: 100 })
    const late = token(store, 'late')
    clock.time += 100
    t.same(store.claim('late', 'f'), { state: 'recorded', answer: UNKNOWN }, 'a retry: the outcome is unknown')
    const other = token(store, 'a')
    t.throws(() => store.claim('b', 'f'), { code: 'ESTOREFULL' }, 'it counts as in flight')
    t.equal(seen.evicted, 0, 'and is never evicted')
    clock.time += 1000
    t.same(store.claim('late', 'f'), { state: 'recorded', answer: UNKNOWN }, 'nor ended by a TTL while held')
    store.record('late', late, ANSWER)
    t.same(store.claim('late', 'f'), { state: 'recorded', answer: ANSWER }, 'the late answer, recorded')
    store.claim('b', 'f')
    t.equal(seen.evicted, 1, 'once answered, an answer like the others')
    store.release('a', other)
    t.equal(store.peek('a', 'f'), 'free', 'a late claim released is free')
  },
)

t.test(
  'an answer with no room left beside the claims is kept as the stand-in, never evicted as it is recorded',
  async (t) => {
    const { store, seen } = watched({ maxBytes: MIN_MAX_BYTES })
    const key = (i: number) => String(i).padEnd(16_384 - 224 - 1 - ANSWER_ROOM, 'k')
    const tokens: string[] = []
    for (let i = 0; i < 8; i++) tokens.push(token(store, key(i)))
    store.record(key(0), tokens[0] as string, { ...ANSWER, body: randomBytes(60_000) })
    t.equal(store.peek(key(0), 'f'), 'recorded', 'the first big answer fits: it became the reference')
    const body = randomBytes(60_000)
    store.record(key(1), tokens[1] as string, { ...ANSWER, body })
    t.equal(seen.evicted, 1, 'the older answer made room')
    t.same(
      store.claim(key(1), 'f'),
      { state: 'recorded', answer: OVERSIZED },
      'kept as the stand-in: not forwarded again',
    )
    t.equal(
      store.bytes,
      6 * 16_384 + (8_704 + 60_000) + (16_384 - ANSWER_ROOM + headOf(OVERSIZED) + OVERSIZED.body.length),
      'six claims, the reference the evicted answer was, and the stand-in counted as an answer',
    )
    t.ok(headOf(OVERSIZED) + OVERSIZED.body.length <= ANSWER_ROOM, "the stand-in fits in a claim's room")
  },
)

t.test(
  'the byte bound: claims in flight always leave room for the largest reference, and a claim past that fails',
  async (t) => {
    const { store, seen } = watched({ maxBytes: MIN_MAX_BYTES })
    // Long keys fill the bytes with a few claims: eight of 16,384 bytes counted (their answers' room with them) fill what the reference leaves exactly.
    const key = (i: number) => String(i).padEnd(16_384 - 224 - 1 - ANSWER_ROOM, 'k')
    let claims = 0
    for (; claims < 100; claims++) {
      try {
        store.claim(key(claims), 'f')
      } catch {
        break
      }
    }
    t.equal(claims, 8, 'as many as fit beside the reference, the last to the byte')
    t.equal(seen.full, 1)
    t.ok(store.bytes + 65_535 + 8_704 <= MIN_MAX_BYTES, `${store.bytes} bytes in flight`)
    store.release(key(0), '1')
    t.equal(store.claim(key(claims), 'f').state, 'claimed', 'a release makes room at once')
    for (let i = 3; i < claims; i++) store.release(key(i), String(i + 1))
    const body = randomBytes(60_000)
    store.record(key(1), '2', { ...ANSWER, body })
    t.equal(store.claim(key(1), 'f').state, 'recorded', 'a first big answer fits beside its reference')
    t.ok(store.bytes <= MIN_MAX_BYTES)
    store.record(key(2), '3', { ...ANSWER, body: randomBytes(60_000) })
    store.record(key(claims), String(claims + 1), { ...ANSWER, body: randomBytes(60_000) })
    t.ok(seen.evicted >= 1, 'three do not fit')
    const kept = [store.peek(key(1), 'f'), store.peek(key(2), 'f'), store.peek(key(claims), 'f')]
    t.same(
      kept,
      ['free', seen.evicted === 1 ? 'recorded' : 'free', 'recorded'],
      'the oldest went first, until the last fit',
    )
    t.ok(store.bytes <= MIN_MAX_BYTES, `${store.bytes} bytes held`)
  },
)

t.test('the byte bound evicts: recorded answers count by their size', async (t) => {
  // Random bodies, which no reference shortens: each entry counts its body, key, fingerprint and headers and a few hundred
  // bytes of bookkeeping, and the first body is also the reference the next ones are tried against.
  const bodies = ['a', 'b', 'c', 'd', 'e'].map((key) => [key, randomBytes(55_000)] as const)
  const unbounded = new MemoryIdempotencyStore({ ...OPTIONS, maxAnswerBytes: 60_000 })
  for (const [key, body] of bodies.slice(0, 4)) record(unbounded, key, body)
  t.ok(unbounded.bytes > 4 * 55_000 + 8_192, `four count ${unbounded.bytes} bytes`)
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxBytes: unbounded.bytes + 1_000, maxAnswerBytes: 60_000 })
  for (const [key, body] of bodies.slice(0, 4)) record(store, key, body)
  t.equal(store.size, 4, 'four fit')
  t.equal(store.bytes, unbounded.bytes)
  record(store, 'e', (bodies[4] as readonly [string, Buffer])[1])
  // The first entry's body is the reference itself, counted apart while it is in use: evicting it frees a few hundred bytes.
  t.equal(store.size, 3, 'the two oldest went')
  t.ok(store.bytes <= unbounded.bytes + 1_000)
  t.equal(store.claim('b', 'f').state, 'claimed', 'the oldest were evicted')
  t.equal(store.claim('c', 'f').state, 'recorded')
  t.equal(store.claim('e', 'f').state, 'recorded')
})

t.test('a store at its byte bound to the byte evicts nothing', async (t) => {
  const bodies = ['a', 'b', 'c', 'd'].map((key) => [key, randomBytes(55_000)] as const)
  const unbounded = new MemoryIdempotencyStore({ ...OPTIONS, maxAnswerBytes: 60_000 })
  for (const [key, body] of bodies) record(unbounded, key, body)
  const { store, seen } = watched({ maxBytes: unbounded.bytes, maxAnswerBytes: 60_000 })
  for (const [key, body] of bodies) record(store, key, body)
  t.same([store.size, store.bytes, seen.evicted], [4, unbounded.bytes, 0])
})

t.test("a recorded answer is the store's own copy: the buffer it came in may be reused", async (t) => {
  const store = new MemoryIdempotencyStore(OPTIONS)
  const body = Buffer.from(ANSWER.body)
  record(store, 'k', body)
  body.fill(0)
  const claim = store.claim('k', 'f')
  t.equal(claim.state === 'recorded' && claim.answer.body.toString('hex'), ANSWER.body.toString('hex'))
})

t.test('counts the answers evicted before their end, and only those', async (t) => {
  const { store, clock, seen } = watched({ maxEntries: 2, ttlMs: 1000, inFlightMs: 1000 })
  record(store, 'a', Buffer.from('{}'))
  record(store, 'b', Buffer.from('{}'))
  record(store, 'c', Buffer.from('{}'))
  t.equal(seen.evicted, 1, 'a was evicted before its TTL')
  clock.time += 1000
  record(store, 'd', Buffer.from('{}'))
  record(store, 'e', Buffer.from('{}'))
  t.equal(seen.evicted, 1, 'b and c had expired: not evictions')
  store.claim('f', 'f')
  t.equal(seen.evicted, 2, 'd was evicted')
  const released = watched({ maxEntries: 2 })
  released.store.release('x', token(released.store, 'x'))
  released.store.claim('y', 'f')
  released.store.claim('z', 'f')
  t.equal(released.seen.evicted, 0, 'a released key leaves as no eviction')
  t.equal(released.store.size, 2)
})

t.test('released and expired entries stop counting at once', async (t) => {
  const { store, clock, seen } = watched({ ttlMs: 1000, inFlightMs: 1000, maxEntries: 2 })
  for (let i = 0; i < 5000; i++) store.release(`k${i}`, token(store, `k${i}`))
  t.equal(store.bytes, 0, 'nothing counted after 5000 released claims')
  t.equal(store.size, 0)
  record(store, 'old', Buffer.from('{}'))
  record(store, 'older', Buffer.from('{}'))
  const recorded = store.bytes
  clock.time += 999
  t.equal(store.bytes, recorded, 'alive, counted')
  clock.time += 1
  const again = token(store, 'old')
  t.pass('an expired key is free')
  t.equal(store.size, 1, 'both expired answers left at once')
  const fresh = token(store, 'new')
  t.equal(seen.evicted, 0, 'room without an eviction')
  t.equal(seen.full, 0)
  clock.time += 2000
  t.equal(store.peek('new', 'f'), 'recorded', 'a claim past its window and TTL is held while its holder is at work')
  store.release('new', fresh)
  store.release('old', again)
  t.equal(store.bytes, 0)
})

t.test(
  'the window: the age of the oldest entry kept, a claim from its claim, an answer from its record, in seconds',
  async (t) => {
    const { store, clock, seen } = watched({ ttlMs: 10_000, inFlightMs: 4_000 })
    t.equal(seen.read(), 0, 'nothing kept')
    const first = token(store, 'a')
    clock.time += 1500
    t.equal(seen.read(), 1.5, 'an entry in flight, from its claim')
    store.record('a', first, ANSWER)
    clock.time += 500
    t.equal(seen.read(), 0.5, 'a recorded entry, from its record')
    const second = token(store, 'b')
    clock.time += 9_500
    t.equal(seen.read(), 9.5, 'a has expired: b, held past its window, from its claim, is the oldest')
    store.release('b', second)
    t.equal(seen.read(), 0, 'released')
    t.equal(store.window, seen.read())
  },
)

t.test('close forgets every entry and the reference, and the store still works', async (t) => {
  const { store } = watched()
  const body = Buffer.from(JSON.stringify({ outcome: 'authorized', note: 'x'.repeat(100) }))
  record(store, 'a', body)
  const fresh = store.bytes
  store.claim('b', 'f')
  await store.close()
  t.equal(store.bytes, 0)
  t.equal(store.window, 0)
  record(store, 'a', body)
  t.equal(store.bytes, fresh, 'counted as in a new store: a new reference')
  t.equal(store.claim('a', 'f').state, 'recorded')
  t.equal(store.claim('b', 'f').state, 'claimed')
})

t.test(
  "one backend's answers are kept as differences from a reference; a new kind of answer becomes the reference after eight",
  async (t) => {
    const store = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 4 })
    const like = (i: number) =>
      Buffer.from(
        JSON.stringify({
          outcome: 'authorized',
          paymentId: `payment-${i}`,
          _links: { self: { href: `/payments/events/${i}` } },
          note: 'x'.repeat(200),
        }),
      )
    const other = () => randomBytes(300)
    const replayed = (key: string) => {
      const claim = store.claim(key, 'f')
      return claim.state === 'recorded' ? claim.answer.body.toString('hex') : claim.state
    }
    for (let i = 0; i < 4; i++) record(store, `like-${i}`, like(i))
    for (let i = 0; i < 4; i++)
      t.equal(replayed(`like-${i}`), like(i).toString('hex'), `like-${i} replayed byte for byte`)
    const similar = store.bytes
    const others = Array.from({ length: 12 }, other)
    others.forEach((body, i) => record(store, `other-${i}`, body))
    for (let i = 8; i < 12; i++)
      t.equal(replayed(`other-${i}`), (others[i] as Buffer).toString('hex'), `other-${i} replayed byte for byte`)
    t.ok(store.bytes > similar, 'unlike bodies take more')
    record(store, 'like-again', like(99))
    t.equal(replayed('like-again'), like(99).toString('hex'), 'written against the new reference, or kept whole')
    const mixed = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 30 })
    for (let i = 0; i < 10; i++) record(mixed, `o${i}`, other())
    for (let i = 0; i < 10; i++) record(mixed, `l${i}`, like(i))
    for (let i = 0; i < 10; i++) {
      const claim = mixed.claim(`l${i}`, 'f')
      t.equal(
        claim.state === 'recorded' && claim.answer.body.toString(),
        like(i).toString(),
        `l${i} after the reference changed`,
      )
    }
  },
)

t.test('a reference no entry uses any more leaves the count', async (t) => {
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 10 })
  const kind = (letter: string, i: number) => Buffer.from(`${letter.repeat(400)}${i}`)
  record(store, 'a0', kind('a', 0))
  for (let i = 0; i < 9; i++) record(store, `b${i}`, randomBytes(400))
  const before = store.bytes
  record(store, 'c0', kind('c', 0))
  t.ok(
    store.bytes < before - 8_000,
    `${before} bytes, then ${store.bytes}: a0 left, and with it the reference it was the last to use`,
  )
  const released = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 2 })
  record(released, 'a0', kind('a', 0))
  const first = released.bytes
  for (let i = 0; i < 9; i++) record(released, `b${i}`, randomBytes(400))
  t.ok(
    released.bytes < first + 2 * 1_000 + 9_000,
    `${released.bytes} bytes: two entries and the current reference, no retired one`,
  )
  record(released, 'x', Buffer.from('{}'))
  record(released, 'y', Buffer.from('{}'))
  record(released, 'c2', kind('c', 2))
  const claim = released.claim('c2', 'f')
  t.equal(
    claim.state === 'recorded' && claim.answer.body.toString(),
    kind('c', 2).toString(),
    'the current reference outlives its last user',
  )
  const late = new MemoryIdempotencyStore({ ...OPTIONS, inFlightMs: 0 })
  const owner = token(late, 'u')
  late.record('u', owner, { ...ANSWER, body: kind('u', 0) })
  const answer = late.claim('u', 'f')
  t.equal(
    answer.state === 'recorded' && answer.answer.body.toString(),
    kind('u', 0).toString(),
    'a late answer in place of an unknown outcome is written against a reference too',
  )
})

t.test(
  "a token acts only on its own claim: not another key's, not a place outside the store, not on an empty store",
  async (t) => {
    const store = new MemoryIdempotencyStore(OPTIONS)
    store.release('k', '1')
    store.record('k', '1', ANSWER)
    t.equal(store.size, 0, 'nothing held, nothing done')
    const a = token(store, 'a')
    const b = token(store, 'b')
    store.record('b', a, ANSWER)
    store.release('a', b)
    store.record('a', `${a}.5`, ANSWER)
    store.record('a', ` ${a}`, ANSWER)
    store.record('a', String(Number(b) + 1), ANSWER)
    store.record('a', '0', ANSWER)
    t.same(
      [store.claim('a', 'f'), store.claim('b', 'f')],
      [{ state: 'inFlight' }, { state: 'inFlight' }],
      'both still in flight',
    )
    store.record('a', a, ANSWER)
    store.release('b', b)
    t.equal(store.claim('a', 'f').state, 'recorded')
    t.equal(store.claim('b', 'f').state, 'claimed')
  },
)

t.test('past 2^31 ms of uptime and past 2^31 claims: windows to the ms, tokens apart (issue 27, item 7)', async (t) => {
  for (const [start, claims] of [
    [2 ** 31 - 150, 2 ** 31 - 2],
    [2 ** 32 + 7, 2 ** 30 - 1],
    [2 ** 52 + 3, 2 ** 53 - 4],
  ] as const) {
    const { store, clock, seen } = watched({ ttlMs: 300, inFlightMs: 200, claims, maxEntries: 3 }, start)
    const a = token(store, 'a')
    const b = token(store, 'b')
    t.equal(a, String((claims + 1) % 2 ** 30), 'the count goes on from the claims already made')
    t.not(a, b, `tokens ${a} and ${b} from ${claims} claims`)
    t.ok(Number(a) < 2 ** 30 && Number(b) < 2 ** 30, 'small integers')
    clock.time += 199
    t.same(store.claim('a', 'f'), { state: 'inFlight' }, `from ${start} ms: in flight just before the window ends`)
    store.record('b', b, ANSWER)
    clock.time += 1
    t.same(store.claim('a', 'f'), { state: 'recorded', answer: UNKNOWN }, 'unknown at its end')
    clock.time += 298
    t.equal(store.peek('b', 'f'), 'recorded', 'an answer alive just before its TTL')
    clock.time += 1
    t.equal(store.peek('b', 'f'), 'free', 'gone at its end')
    t.equal(store.peek('a', 'f'), 'recorded')
    clock.time += 1
    t.equal(store.peek('a', 'f'), 'recorded', 'the unknown outcome held while its holder is at work')
    store.release('a', a)
    t.equal(store.bytes, 0, 'until it releases it')
    t.equal(store.claim('a', 'f').state, 'claimed')
    store.release('a', a)
    t.equal(store.peek('a', 'f'), 'inFlight', "a stale token from before the counter's turn does nothing")
    t.equal(seen.evicted + seen.full, 0)
  }
})

t.test('a pause longer than half the clock turn ends every entry, as no eviction', async (t) => {
  const { store, clock, seen } = watched({ ttlMs: 1000, inFlightMs: 1000 })
  record(store, 'a', Buffer.from('{}'))
  store.claim('b', 'f')
  clock.time += 2 ** 30 + 10
  t.same(
    [store.peek('a', 'f'), store.peek('b', 'f')],
    ['free', 'free'],
    'the clock turned: without the pause seen, both would look alive',
  )
  t.equal(store.bytes, 0)
  t.equal(seen.evicted, 0)
})

t.test('a TTL longer than 2^29 ms: coarser ticks, never a shorter window', async (t) => {
  const ttlMs = 2 ** 31
  // Started inside a tick: the window still lasts its whole length.
  const { store, clock } = watched({ ttlMs, inFlightMs: 1000 }, 1_000_007)
  record(store, 'a', Buffer.from('{}'))
  clock.time += ttlMs - 1
  t.equal(store.peek('a', 'f'), 'recorded', 'alive to the last ms')
  t.ok(Math.abs(store.window - (ttlMs - 1) / 1000) < 0.01, `the window, ${store.window} s, to a tick`)
  clock.time += 1_000
  t.equal(store.peek('a', 'f'), 'free', 'gone within a few ticks after')
  store.claim('b', 'f')
  clock.time += 999
  t.equal(store.peek('b', 'f'), 'inFlight')
  clock.time += 20
  t.equal(store.peek('b', 'f'), 'recorded', 'unknown within a few ticks after its window')
})

/** 100 bytes, no two alike, and a byte none of them is. */
const PLAIN = Buffer.from(Array.from({ length: 100 }, (_, i) => (i * 37) & 0xff))
const FILLER = Array.from({ length: 256 }, (_, i) => i).find((byte) => !PLAIN.includes(byte)) as number

t.test(
  'what an entry counts against maxBytes (docs/idempotency.md): 224 bytes of its own, its key and fingerprint, room for its answer, then its answer',
  async (t) => {
    const { store } = watched()
    const [key, print] = ['k'.repeat(100), 'f'.repeat(50)]
    const claim = store.claim(key, print)
    t.equal(store.bytes, 224 + 100 + 50 + ANSWER_ROOM, "a claim: room for a typical answer's 512 bytes")
    const body = Buffer.from('{"outcome":"authorized"}')
    if (claim.state === 'claimed') store.record(key, claim.token, { ...ANSWER, body })
    const first = 224 + 100 + 50 + headOf(ANSWER) + body.length
    t.equal(store.bytes, first, 'recorded: its head (status and headers) and its body, shorter than 64 bytes, as it is')
    const again = store.claim('j', 'g')
    if (again.state === 'claimed') store.record('j', again.token, { ...ANSWER, body })
    t.equal(store.bytes, first + 224 + 1 + 1 + body.length, 'an answer with the same head as the last counts it once')
    const before = store.bytes
    const other = store.claim('i', 'h')
    if (other.state === 'claimed') store.record('i', other.token, { ...ANSWER, status: 200, body })
    t.equal(store.bytes, before + 224 + 1 + 1 + headOf(ANSWER) + body.length, 'another head counts its own')

    const big = { status: 500, headers: ['Content-Type', 'application/json'], body: Buffer.alloc(1_000, 'x') }
    const roomy = watched({ oversizedAnswer: big }).store
    roomy.claim('k', 'f')
    t.equal(roomy.bytes, 224 + 1 + 1 + headOf(big) + 1_000, 'a claim holds room for a stand-in larger than 512 bytes')
  },
)

t.test('an answer shares the last head only when its status and every header are the same', async (t) => {
  const { store } = watched()
  const body = Buffer.from('{}')
  const headers = ['Content-Type', 'application/json', 'Date', 'Sun, 29 Nov 2026 02:00:00 GMT']
  const replayed = (key: string) => {
    const claim = store.claim(key, 'f')
    if (claim.state !== 'recorded') throw new Error(`${key} was ${claim.state}`)
    return claim.answer
  }
  const counted = (key: string, answer: { status: number; headers: string[] }) => {
    const before = store.bytes
    store.record(key, token(store, key), { ...answer, body })
    // What the new entry counts besides its own 224 bytes, its key, its fingerprint `f` and its body: its head.
    return store.bytes - before - (224 + key.length + 1 + body.length)
  }
  const first = { status: 201, headers }
  t.equal(counted('a', first), headOf({ ...first, body }), 'the first head is counted')
  t.equal(counted('b', { status: 201, headers: [...headers] }), 0, 'the same status and headers, another list: shared')
  const later = { status: 201, headers: [...headers.slice(0, 3), 'Sun, 29 Nov 2026 02:00:01 GMT'] }
  t.equal(counted('c', later), headOf({ ...later, body }), 'one value changed, the same length: its own head')
  t.same(replayed('b').headers, headers)
  t.same(replayed('c').headers, later.headers)
  const fewer = { status: 201, headers: later.headers.slice(0, 2) }
  t.equal(counted('p', fewer), headOf({ ...fewer, body }), "the last one's first headers alone: its own head")
  t.equal(counted('q', later), headOf({ ...later, body }), 'and the last one again after it: its own head too')
  t.same(replayed('p').headers, fewer.headers)
  // The recorded list changed by its caller after the record: the store compares against its own copy.
  later.headers[3] = 'Sun, 29 Nov 2026 02:00:02 GMT'
  t.equal(counted('d', later), headOf({ ...later, body }), 'a list changed after its record is another head')
  t.same(replayed('c').headers[3], 'Sun, 29 Nov 2026 02:00:01 GMT', 'and the earlier answer is replayed as recorded')
  t.same(replayed('d').headers[3], 'Sun, 29 Nov 2026 02:00:02 GMT')
  await store.close()
  t.equal(counted('e', later), headOf({ ...later, body }), 'after close, the same head is counted again')
  t.same(replayed('e'), { ...later, body })
  // Nothing kept yet: even the status and headers a fresh store starts comparing with get a head of their own.
  const fresh = watched().store
  const bare = { status: 0, headers: [], body }
  fresh.record('f', token(fresh, 'f'), bare)
  const claim = fresh.claim('f', 'f')
  t.same(claim.state === 'recorded' && claim.answer, bare, 'a first answer is never taken for an unknown outcome')
})

t.test(
  'a body of 64 bytes or more is written against a reference, which counts its bytes and 8,704 more',
  async (t) => {
    const short = watched().store
    record(short, 'k', PLAIN.subarray(0, 63))
    t.equal(short.bytes, 224 + 1 + 1 + headOf(ANSWER) + 63, '63 bytes: kept as they are')
    const long = watched().store
    record(long, 'k', PLAIN.subarray(0, 64))
    t.equal(long.bytes, 224 + 1 + 1 + headOf(ANSWER) + 9 + 8_704 + 64, '64: the first reference, and one copy of it')
  },
)

/** The bytes an answer adds to the store as it is recorded under a one-letter key. */
function added(store: MemoryIdempotencyStore, key: string, body: Buffer): number {
  const before = store.bytes
  record(store, key, body)
  const claim = store.claim(key, 'f')
  if (claim.state !== 'recorded' || !claim.answer.body.equals(body)) throw new Error(`${key} not replayed as recorded`)
  return store.bytes - before
}

t.test('a body the reference halves is written against it, to the byte; one it does not is kept whole', async (t) => {
  const store = watched().store
  added(store, 'r', PLAIN)
  const entry = 224 + 1 + 1
  // The reference's first 50 bytes (one five-byte copy) and 30 others (a count and 30 literals), behind the 4-byte length.
  const halved = Buffer.concat([PLAIN.subarray(0, 50), Buffer.alloc(30, FILLER)])
  t.equal(added(store, 'h', halved), entry + 4 + 5 + 1 + 30, '80 bytes written in 40')
  const not = Buffer.concat([PLAIN.subarray(0, 50), Buffer.alloc(31, FILLER)])
  t.equal(added(store, 'n', not), entry + 81, '81 bytes that would take 41: kept whole')
})

t.test(
  'after eight bodies in a row the reference does not halve, the eighth becomes the reference the next are written against',
  async (t) => {
    const store = watched().store
    added(store, 'r', PLAIN)
    // Bytes that look random, the same every run: a random body is one copy of itself only when no later place
    // of it shares its first place's slot of the index, which one in twenty does not.
    const digest = (text: string) => createHash('sha512').update(text).digest()
    const unlike = Array.from({ length: 8 }, (_, i) =>
      Buffer.concat([digest(`unlike ${i}`), digest(`more ${i}`)]).subarray(0, 100),
    )
    const counts = unlike.map((body, i) => added(store, `u${i}`, body))
    t.same(counts.slice(0, 7), Array(7).fill(224 + 2 + 1 + 100), 'seven kept whole')
    t.equal(counts[7], 224 + 2 + 1 + 9 + 8_704 + 100, 'the eighth: the new reference, one copy of it')
    const like = Buffer.from(unlike[7] as Buffer)
    like[99] = (like[99] as number) ^ 1
    t.equal(added(store, 'l', like), 224 + 1 + 1 + 4 + 5 + 1 + 1, 'one like it: a copy and a literal')
  },
)

t.test(
  'once every answer has ended, only the current reference is counted, whatever references came before',
  async (t) => {
    const { store, clock } = watched({ ttlMs: 1_000, inFlightMs: 1_000 })
    added(store, 'r', PLAIN)
    clock.time += 1_000
    t.equal(store.peek('r', 'f'), 'free', 'the first reference outlives its only answer')
    const unlike = Array.from({ length: 8 }, () => randomBytes(100))
    unlike.forEach((body, i) => added(store, `u${i}`, body))
    const like = Buffer.from(unlike[7] as Buffer)
    like[99] = (like[99] as number) ^ 1
    t.ok(added(store, 'like', like) < 300, 'the second reference in use when the third comes')
    const next = Array.from({ length: 8 }, () => randomBytes(100))
    next.forEach((body, i) => added(store, `w${i}`, body))
    clock.time += 1_000
    t.same([store.window, store.size], [0, 0], 'every answer ended')
    const fresh = watched({ ttlMs: 1_000, inFlightMs: 1_000 })
    added(fresh.store, 'w', next[7] as Buffer)
    fresh.clock.time += 1_000
    t.same([fresh.store.window, fresh.store.size], [0, 0])
    t.equal(store.bytes, fresh.store.bytes, 'what a store that saw only the last reference counts')
  },
)

t.test('without a clock of its own, the store reads performance.now', async (t) => {
  const store = new MemoryIdempotencyStore({ ...OPTIONS, ttlMs: 1, inFlightMs: 1 })
  record(store, 'a', Buffer.from('{}'))
  const recorded = performance.now()
  // The TTL passing on the real clock: the event waited for, two ms at most.
  while (performance.now() < recorded + 2);
  t.equal(store.peek('a', 'f'), 'free', 'a TTL of 1 ms has ended')
})

t.test('a full store without a report still fails a claim as a store failure', async (t) => {
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 1 })
  store.claim('a', 'f')
  t.throws(() => store.claim('b', 'f'), { code: 'ESTOREFULL' })
})

t.test('after close, an entry of before never ends nor counts against one of after', async (t) => {
  const { store, clock } = watched({ ttlMs: 1_000, inFlightMs: 1_000 })
  record(store, 'a', Buffer.from('{}'))
  store.claim('b', 'f')
  await store.close()
  clock.time += 500
  record(store, 'a', Buffer.from('{}'))
  const b = token(store, 'b')
  const held = store.bytes
  clock.time += 600
  t.same(
    [store.peek('a', 'f'), store.peek('b', 'f')],
    ['recorded', 'inFlight'],
    'the entries of before would have ended now',
  )
  t.equal(store.bytes, held)
  store.release('b', b)
  t.equal(store.peek('b', 'f'), 'free')
})

t.test('a release, even of a key it does not hold, ends what has ended by now, as every call does', async (t) => {
  const { store, clock } = watched({ ttlMs: 1000, inFlightMs: 1000 })
  record(store, 'old', Buffer.from('{}'))
  clock.time += 1000
  store.release('other', '1')
  t.equal(store.size, 0, 'the expired answer left')
  t.equal(store.bytes, 0, 'and stopped counting')
})

t.test('a fingerprint is kept as it was given, whatever its latin1 characters', async (t) => {
  const store = new MemoryIdempotencyStore(OPTIONS)
  const fingerprint = 'sale \u00e9\u00ff\u0080'
  const claim = store.claim('k', fingerprint)
  if (claim.state === 'claimed') store.record('k', claim.token, ANSWER)
  t.same(store.claim('k', fingerprint), { state: 'recorded', answer: ANSWER }, 'the same payment')
  t.equal(store.peek('k', fingerprint), 'recorded')
  t.same(store.claim('k', 'sale \u00e9\u00ff\u0081'), { state: 'mismatch' }, 'another one')
})
