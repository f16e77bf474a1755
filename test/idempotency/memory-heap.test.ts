// The memory store's byte count against the heap's real growth: slow (a few hundred thousand entries and full
// collections), so it stays out of the tests Stryker runs for each mutant (stryker.config.json).
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import t from 'tap'
import { createFingerprinter, processFingerprintKeys } from '../../lib/idempotency/fingerprint.js'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import { ANSWER, OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** How much the heap grows for each of 40,000 entries, as a payment makes them, and how much the store counts for each. */
function growth(start: { time: number; claims: number }): { heap: number; counted: number } {
  const store = new MemoryIdempotencyStore({
    ttlMs: 86_400_000,
    inFlightMs: 65_000,
    oversizedAnswer: OVERSIZED,
    unknownAnswer: UNKNOWN,
    maxEntries: 60_000,
    maxBytes: 1e9,
    now: () => start.time,
    claims: start.claims,
  })
  // Each entry as a payment makes it: its key, its fingerprint by the gateway's fingerprinter, a backend answer.
  const fingerprinter = createFingerprinter(processFingerprintKeys())
  const fill = (from: number, to: number) => {
    for (let i = from; i < to; i++) {
      const key = JSON.stringify(['default', `order-${String(i).padStart(12, '0')}`])
      const claim = store.claim(key, fingerprinter.of('sale', key, () => []).value)
      if (claim.state !== 'claimed') throw new Error('every key is new')
      store.record(key, claim.token, {
        status: 201,
        headers: ['Location', `/payments/${i}`, ...ANSWER.headers],
        body: Buffer.from(`{"paymentId":"${i}"}`),
      })
      start.time += 0.25
    }
  }
  // The first entries also grow the map's tables: the growth after them is each entry's own.
  fill(0, 10_000)
  gc()
  const heap = process.memoryUsage().heapUsed
  const counted = store.bytes
  fill(10_000, 50_000)
  gc()
  const result = { heap: (process.memoryUsage().heapUsed - heap) / 40_000, counted: (store.bytes - counted) / 40_000 }
  void store.close()
  return result
}

t.test(
  'the bytes counted against maxBytes cover what each entry really holds, after 24 days of uptime and after 2^31 claims too',
  async (t) => {
    const fresh = growth({ time: 1000.5, claims: 0 })
    t.ok(
      fresh.heap <= fresh.counted,
      `an entry grows the heap by ${fresh.heap.toFixed(0)} bytes, no more than the ${fresh.counted.toFixed(0)} it is counted as`,
    )
    for (const [label, start] of [
      ['after 2^31 ms (24.9 days)', { time: 2 ** 31 + 0.5, claims: 0 }],
      ['after 2^32 ms', { time: 2 ** 32 + 0.5, claims: 0 }],
      ['after 2^31 claims', { time: 1000.5, claims: 2 ** 31 }],
      ['after 2^31 claims and 2^31 ms', { time: 2 ** 31 + 0.5, claims: 2 ** 31 }],
    ] as const) {
      const late = growth(start)
      t.equal(late.counted, fresh.counted, `${label}: counted the same`)
      // Numbers that stopped being small integers would add an object of their own to every entry.
      t.ok(
        late.heap <= fresh.counted && late.heap < fresh.heap + 8,
        `${label}: ${late.heap.toFixed(0)} bytes an entry, as at start (${fresh.heap.toFixed(0)})`,
      )
    }
  },
)
