import { LRUCache } from 'lru-cache'
import { answerBytes, keptAnswer } from './answer-size.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import type { Claim, IdempotencyStore, IdempotencyStoreOptions, RecordedAnswer } from './store.js'

export interface MemoryIdempotencyStoreOptions extends IdempotencyStoreOptions {
  /** Most keys held. Default 100000. */
  maxEntries?: number
  /** Most bytes held (answers, fingerprints and keys). Default 64 MiB. */
  maxBytes?: number
  /** The clock, in ms; for tests. Default `performance.now`. */
  now?: () => number
}

interface Entry {
  readonly fingerprint: string
  readonly token: string
  /** Undefined while the claim is in flight. */
  readonly answer: RecordedAnswer | undefined
}

/**
 * A body kept for a day gets memory of its own: a small Buffer is a slice of
 * node's shared 8 KiB allocation pool, and keeping the slice keeps the whole
 * slab, with whatever else was allocated in it, for as long as the entry lives.
 */
function ownCopy(body: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(body.length)
  body.copy(copy)
  return copy
}

/**
 * What an entry holds in memory besides the bytes of its strings and body,
 * measured (a process with 50,000 entries, after a full GC): its objects, the
 * token, the answer's Buffer and the cache's own bookkeeping. Counted so that
 * `maxBytes` bounds what the process really holds, not just the payload.
 */
const ENTRY_OVERHEAD = 1024
/** The same for each header name or value kept: a string object of its own. */
const HEADER_OVERHEAD = 32

const CLAIMED_ELSEWHERE: Claim = Object.freeze({ state: 'inFlight' })
const MISMATCH: Claim = Object.freeze({ state: 'mismatch' })

/**
 * The store of one process: synchronous, so a payment pays no promise for it.
 * Bounded by entries and bytes; under pressure the least recently used keys go
 * first (docs/idempotency.md, memory store limits).
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  readonly #entries: LRUCache<string, Entry>
  readonly #options: MemoryIdempotencyStoreOptions
  #sequence = 0

  constructor(options: MemoryIdempotencyStoreOptions) {
    this.#options = options
    const now = options.now ?? (() => performance.now())
    this.#entries = new LRUCache<string, Entry>({
      max: options.maxEntries ?? IDEMPOTENCY_DEFAULTS.maxEntries,
      maxSize: options.maxBytes ?? IDEMPOTENCY_DEFAULTS.maxBytes,
      sizeCalculation: (entry, key) =>
        ENTRY_OVERHEAD +
        key.length +
        entry.fingerprint.length +
        (entry.answer === undefined ? 0 : answerBytes(entry.answer) + HEADER_OVERHEAD * entry.answer.headers.length),
      // ttlResolution 0: read the clock on each look-up rather than arm a timer to memoize it.
      ttlResolution: 0,
      perf: { now },
    })
  }

  /** How many keys are held. */
  get size(): number {
    return this.#entries.size
  }

  claim(key: string, fingerprint: string): Claim {
    const entry = this.#entries.get(key)
    if (entry === undefined) {
      const token = String(++this.#sequence)
      this.#entries.set(key, { fingerprint, token, answer: undefined }, { ttl: this.#options.inFlightMs })
      return { state: 'claimed', token }
    }
    if (entry.answer === undefined) return CLAIMED_ELSEWHERE
    return entry.fingerprint === fingerprint ? { state: 'recorded', answer: entry.answer } : MISMATCH
  }

  record(key: string, token: string, answer: RecordedAnswer): void {
    const entry = this.#owned(key, token)
    if (entry === undefined) return
    const kept = keptAnswer(answer, this.#options)
    const answerKept = { status: kept.status, headers: kept.headers, body: ownCopy(kept.body) }
    this.#entries.set(key, { fingerprint: entry.fingerprint, token, answer: answerKept }, { ttl: this.#options.ttlMs })
  }

  release(key: string, token: string): void {
    if (this.#owned(key, token) !== undefined) this.#entries.delete(key)
  }

  async close(): Promise<void> {
    this.#entries.clear()
  }

  /** The key's claim when `token` still owns it and no answer is recorded yet. */
  #owned(key: string, token: string): Entry | undefined {
    const entry = this.#entries.peek(key)
    return entry !== undefined && entry.token === token && entry.answer === undefined ? entry : undefined
  }
}
