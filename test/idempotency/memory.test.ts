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
  // Each entry counts its body, its key, fingerprint and headers, and a few hundred bytes of bookkeeping: two fit in 12,000 bytes, three do not.
  const store = new MemoryIdempotencyStore({ ...OPTIONS, maxBytes: 12_000, maxAnswerBytes: 8_000 })
  record(store, 'a', Buffer.alloc(4_000))
  record(store, 'b', Buffer.alloc(4_000))
  t.equal(store.size, 2, 'both fit')
  record(store, 'c', Buffer.alloc(4_000))
  t.equal(store.size, 2, 'one went')
  t.equal(store.claim('a', 'f').state, 'claimed', 'the oldest was evicted')
  t.equal(store.claim('c', 'f').state, 'recorded')
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
