import { randomBytes } from 'node:crypto'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import t from 'tap'
import { MemoryIdempotencyStore, type MemoryIdempotencyStoreOptions } from '../../lib/idempotency/memory.js'
import { ANSWER, OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'

const OPTIONS = { ttlMs: 600_000, inFlightMs: 600_000, oversizedAnswer: OVERSIZED, unknownAnswer: UNKNOWN }

function record(store: MemoryIdempotencyStore, key: string, body: Buffer): void {
  const claim = store.claim(key, 'f')
  if (claim.state === 'claimed') store.record(key, claim.token, { ...ANSWER, body })
}

t.test('answers synchronously, so a payment pays no promise for it', async (t) => {
  const store = new MemoryIdempotencyStore(OPTIONS)
  const claim = store.claim('k', 'f')
  t.notOk(claim instanceof Promise)
  t.equal(claim.state, 'claimed')
  await store.close()
  t.equal(store.size, 0, 'close forgets every key')
})

t.test('the entry bound evicts the oldest claim first', async (t) => {
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 2 })
  store.claim('a', 'f')
  store.claim('b', 'f')
  store.claim('c', 'f')
  t.equal(store.size, 2)
  t.equal(store.claim('a', 'f').state, 'claimed', 'a was evicted')
  t.same(store.claim('c', 'f'), { state: 'inFlight' }, 'c was kept')
})

t.test('the byte bound evicts: recorded answers count by their size', async (t) => {
  // Random bodies, which no reference shortens: each entry counts its body, key, fingerprint and headers and a few hundred
  // bytes of bookkeeping, and the first body is also the reference the next ones are tried against.
  const bodies = ['a', 'b', 'c', 'd', 'e'].map((key) => [key, randomBytes(4_000)] as const)
  const unbounded = new MemoryIdempotencyStore({ ...OPTIONS, maxAnswerBytes: 8_000 })
  for (const [key, body] of bodies.slice(0, 4)) record(unbounded, key, body)
  t.ok(unbounded.bytes > 4 * 4_000 + 8_192, `four count ${unbounded.bytes} bytes`)
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxBytes: unbounded.bytes + 1_000, maxAnswerBytes: 8_000 })
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

t.test('the bytes counted against maxBytes cover what each entry really holds in the heap', async (t) => {
  setFlagsFromString('--expose-gc')
  const gc = runInNewContext('gc') as () => void
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 60_000, maxBytes: 1e9 })
  // Each entry as a payment makes it: its key, a fingerprint joined from the operation and a digest, a backend answer.
  const fill = (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const key = JSON.stringify(['default', `order-${String(i).padStart(12, '0')}`])
      const claim = store.claim(key, `sale ${Buffer.from(key).toString('base64')}`)
      if (claim.state !== 'claimed') throw new Error('every key is new')
      store.record(key, claim.token, { status: 201, headers: ['Location', `/payments/${i}`, ...ANSWER.headers], body: Buffer.from(`{"paymentId":"${i}"}`) })
    }
  }
  // The first entries also grow the cache's fixed arrays (sized for maxEntries): the growth after them is each entry's own.
  fill(0, 10_000)
  gc()
  const heap = process.memoryUsage().heapUsed
  const counted = store.bytes
  fill(10_000, 50_000)
  gc()
  const perEntry = (process.memoryUsage().heapUsed - heap) / 40_000
  t.ok(perEntry <= (store.bytes - counted) / 40_000, `an entry grows the heap by ${perEntry.toFixed(0)} bytes, no more than the ${((store.bytes - counted) / 40_000).toFixed(0)} it is counted as`)
})

t.test("a recorded answer is the store's own copy: the buffer it came in may be reused", async (t) => {
  const store = new MemoryIdempotencyStore(OPTIONS)
  const body = Buffer.from(ANSWER.body)
  record(store, 'k', body)
  body.fill(0)
  const claim = store.claim('k', 'f')
  t.equal(claim.state === 'recorded' && claim.answer.body.toString('hex'), ANSWER.body.toString('hex'))
})

/** A store on a clock the test moves, telling what it reports. */
function watched(options: Partial<MemoryIdempotencyStoreOptions> = {}) {
  const clock = { time: 1_000_000 }
  const seen = { evicted: 0, read: (): number => Number.NaN }
  const store = new MemoryIdempotencyStore({
    ...OPTIONS,
    now: () => clock.time,
    report: { evicted: () => seen.evicted++, window: (read) => void (seen.read = read) },
    ...options,
  })
  return { store, clock, seen }
}

t.test('counts the entries evicted before their end, and only those', async (t) => {
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
  const claim = released.store.claim('x', 'f')
  if (claim.state === 'claimed') released.store.release('x', claim.token)
  released.store.claim('y', 'f')
  released.store.claim('z', 'f')
  t.equal(released.seen.evicted, 0, 'a released key leaves as no eviction')
  t.equal(released.store.size, 2)
})

t.test('the window: the age of the oldest entry still kept, in seconds', async (t) => {
  const { store, clock, seen } = watched({ ttlMs: 10_000, inFlightMs: 4_000 })
  t.equal(seen.read(), 0, 'nothing kept')
  const first = store.claim('a', 'f')
  clock.time += 1500
  t.equal(seen.read(), 1.5, 'an entry in flight, from its claim')
  if (first.state === 'claimed') store.record('a', first.token, ANSWER)
  clock.time += 500
  t.equal(seen.read(), 0.5, 'a recorded entry, from its record')
  const second = store.claim('b', 'f')
  clock.time += 9_500
  t.equal(seen.read(), 9.5, 'a has expired: b, still unknown past its window, is the oldest')
  if (second.state === 'claimed') store.release('b', second.token)
  t.equal(seen.read(), 0, 'released')
  t.equal(store.window, seen.read())
})

t.test('released and expired entries are counted until they leave, and leave when room is needed, as no eviction', async (t) => {
  const { store, clock, seen } = watched({ ttlMs: 1000, inFlightMs: 1000, maxBytes: 10_000 })
  for (let i = 0; i < 5000; i++) {
    const claim = store.claim(`k${i}`, 'f')
    if (claim.state === 'claimed') store.release(`k${i}`, claim.token)
  }
  t.ok(store.bytes <= 10_000, `${store.bytes} bytes held after 5000 released claims`)
  t.equal(seen.evicted, 0)
  record(store, 'old', Buffer.from('{}'))
  clock.time += 1000
  t.equal(store.claim('old', 'f').state, 'claimed', 'an expired key is free')
  clock.time += 2000
  store.claim('new', 'f')
  t.equal(store.size, 1, 'the expired ones left')
})

t.test('close forgets every entry and the store still works', async (t) => {
  const { store } = watched()
  record(store, 'a', Buffer.from('{}'))
  await store.close()
  t.equal(store.bytes, 0)
  t.equal(store.window, 0)
  record(store, 'a', Buffer.from('{}'))
  t.equal(store.claim('a', 'f').state, 'recorded')
})

t.test("one backend's answers are kept as differences from a reference; a new kind of answer becomes the reference after eight", async (t) => {
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 4 })
  const like = (i: number) => Buffer.from(JSON.stringify({ outcome: 'authorized', paymentId: `payment-${i}`, _links: { self: { href: `/payments/events/${i}` } }, note: 'x'.repeat(200) }))
  const other = () => randomBytes(300)
  const replayed = (key: string) => {
    const claim = store.claim(key, 'f')
    return claim.state === 'recorded' ? claim.answer.body.toString('hex') : claim.state
  }
  for (let i = 0; i < 4; i++) record(store, `like-${i}`, like(i))
  for (let i = 0; i < 4; i++) t.equal(replayed(`like-${i}`), like(i).toString('hex'), `like-${i} replayed byte for byte`)
  const similar = store.bytes
  const others = Array.from({ length: 12 }, other)
  others.forEach((body, i) => record(store, `other-${i}`, body))
  for (let i = 8; i < 12; i++) t.equal(replayed(`other-${i}`), (others[i] as Buffer).toString('hex'), `other-${i} replayed byte for byte`)
  t.ok(store.bytes > similar, 'unlike bodies take more')
  record(store, 'like-again', like(99))
  t.equal(replayed('like-again'), like(99).toString('hex'), 'written against the new reference, or kept whole')
  const mixed = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 30 })
  for (let i = 0; i < 10; i++) record(mixed, `o${i}`, other())
  for (let i = 0; i < 10; i++) record(mixed, `l${i}`, like(i))
  for (let i = 0; i < 10; i++) {
    const claim = mixed.claim(`l${i}`, 'f')
    t.equal(claim.state === 'recorded' && claim.answer.body.toString(), like(i).toString(), `l${i} after the reference changed`)
  }
})

t.test('a reference no entry uses any more leaves the count', async (t) => {
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 10 })
  const kind = (letter: string, i: number) => Buffer.from(`${letter.repeat(400)}${i}`)
  record(store, 'a0', kind('a', 0))
  for (let i = 0; i < 9; i++) record(store, `b${i}`, randomBytes(400))
  const before = store.bytes
  record(store, 'c0', kind('c', 0))
  t.ok(store.bytes < before - 8_000, `${before} bytes, then ${store.bytes}: a0 left, and with it the reference it was the last to use`)
  const released = new MemoryIdempotencyStore({ ...OPTIONS, maxEntries: 2 })
  record(released, 'a0', kind('a', 0))
  const first = released.bytes
  for (let i = 0; i < 9; i++) record(released, `b${i}`, randomBytes(400))
  t.ok(released.bytes < first + 2 * 1_000 + 9_000, `${released.bytes} bytes: two entries and the current reference, no retired one`)
  released.claim('x', 'f')
  released.claim('y', 'f')
  record(released, 'c2', kind('c', 2))
  const claim = released.claim('c2', 'f')
  t.equal(claim.state === 'recorded' && claim.answer.body.toString(), kind('c', 2).toString(), 'the current reference outlives its last user')
})

t.test("a token acts only on its own claim: not another key's, not a place outside the store, not on an empty store", async (t) => {
  const store = new MemoryIdempotencyStore(OPTIONS)
  store.release('k', '1')
  store.record('k', '1', ANSWER)
  t.equal(store.size, 0, 'nothing held, nothing done')
  const a = store.claim('a', 'f')
  const b = store.claim('b', 'f')
  if (a.state !== 'claimed' || b.state !== 'claimed') throw new Error('both claimed')
  store.record('b', a.token, ANSWER)
  store.release('a', b.token)
  store.record('a', `${a.token}.5`, ANSWER)
  store.record('a', String(Number(b.token) + 1), ANSWER)
  store.record('a', '0', ANSWER)
  t.same([store.claim('a', 'f'), store.claim('b', 'f')], [{ state: 'inFlight' }, { state: 'inFlight' }], 'both still in flight')
  store.record('a', a.token, ANSWER)
  store.release('b', b.token)
  t.equal(store.claim('a', 'f').state, 'recorded')
  t.equal(store.claim('b', 'f').state, 'claimed')
})
