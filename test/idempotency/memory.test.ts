import t from 'tap'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import { ANSWER, OVERSIZED } from '../helpers/store-contract.js'

const OPTIONS = { ttlMs: 600_000, inFlightMs: 600_000, oversizedAnswer: OVERSIZED }

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

t.test("a recorded answer is the store's own copy: the buffer it came in may be reused", async (t) => {
  const store = new MemoryIdempotencyStore(OPTIONS)
  const body = Buffer.from(ANSWER.body)
  record(store, 'k', body)
  body.fill(0)
  const claim = store.claim('k', 'f')
  t.equal(claim.state === 'recorded' && claim.answer.body.toString('hex'), ANSWER.body.toString('hex'))
})
