import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import t from 'tap'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
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

t.test('the entry bound evicts the least recently used key', async (t) => {
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
