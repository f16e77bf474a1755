import { LRUCache } from 'lru-cache'
import { keptAnswer } from './answer-size.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import type { Claim, IdempotencyStore, IdempotencyStoreOptions, Peek, RecordedAnswer } from './store.js'

export interface MemoryIdempotencyStoreOptions extends IdempotencyStoreOptions {
  /** Most keys held. Default 100000. */
  maxEntries?: number
  /** Most bytes held (answers, fingerprints and keys). Default 64 MiB. */
  maxBytes?: number
  /** The clock, in ms; for tests. Default `performance.now`. */
  now?: () => number
}

/**
 * One key's entry: its owner's token, the fingerprint, and once recorded the
 * answer as one string: the JSON of [status, headers], a line feed
 * (JSON.stringify writes none), then the body's bytes as latin1 (one
 * character a byte, so any bytes round-trip). Tens of thousands of entries
 * live in the old generation, and every major GC walks each object they hold:
 * an answer kept as objects (its header list, each header string, a Buffer
 * and its ArrayBuffer) made some sixteen objects an entry, this makes a
 * handful, and the store holds twice as many payments in the same bytes.
 *
 * Both strings are kept flat, one object each. A string joined from pieces
 * (a template, `+`) is a rope in V8, an object for the join and one for each
 * piece, all copied out of the young generation and marked for as long as
 * the entry lives: kept as ropes, they more than doubled what an entry holds
 * besides its characters (ENTRY_OVERHEAD; docs/performance.md).
 */
interface Entry {
  readonly token: string
  readonly fingerprint: string
  /** Undefined while the claim is in flight. */
  readonly answer: string | undefined
}

const LINE_FEED = Buffer.from('\n')

/** One flat string, made once from the bytes: header names and values are latin1 text, so their JSON is too. */
function encode(answer: RecordedAnswer): string {
  const head = Buffer.from(JSON.stringify([answer.status, answer.headers]), 'latin1')
  return Buffer.concat([head, LINE_FEED, answer.body]).toString('latin1')
}

/** The same text, as one flat string (the fingerprint is ASCII: `operation digest`, joined by its maker). */
const flat = (text: string) => Buffer.from(text, 'latin1').toString('latin1')

function decode(answer: string): RecordedAnswer {
  const end = answer.indexOf('\n')
  const [status, headers] = JSON.parse(answer.slice(0, end)) as [number, string[]]
  return { status, headers, body: Buffer.from(answer.slice(end + 1), 'latin1') }
}

/**
 * What an entry holds in memory besides the characters of its key,
 * fingerprint and answer: its objects, the token, and the cache's own
 * bookkeeping (about 165 bytes, measured as the heap's growth from 10,000 to
 * 50,000 entries after a full GC; test/idempotency/memory.test.ts checks
 * that this covers it). Counted so that `maxBytes` bounds what the process
 * really holds, not just the payload. The answer, a string, is also the
 * store's own copy: it never keeps a slice of node's shared buffer pool alive.
 */
const ENTRY_OVERHEAD = 200

const CLAIMED_ELSEWHERE: Claim = Object.freeze({ state: 'inFlight' })
const MISMATCH: Claim = Object.freeze({ state: 'mismatch' })

/** The bytes an entry takes: its strings are one byte a character (latin1, and JSON of latin1). */
const sizeOf = (key: string, fingerprint: string, answer: string) => ENTRY_OVERHEAD + key.length + fingerprint.length + answer.length

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
      // ttlResolution 0: read the clock on each look-up rather than arm a timer to memoize it.
      ttlResolution: 0,
      perf: { now },
    })
  }

  /** How many keys are held. */
  get size(): number {
    return this.#entries.size
  }

  /** The bytes they are counted as, against `maxBytes`. */
  get bytes(): number {
    return this.#entries.calculatedSize
  }

  claim(key: string, fingerprint: string): Claim {
    const entry = this.#entries.get(key)
    if (entry === undefined) {
      const token = String(++this.#sequence)
      this.#entries.set(key, { token, fingerprint: flat(fingerprint), answer: undefined }, { ttl: this.#options.inFlightMs, size: sizeOf(key, fingerprint, '') })
      return { state: 'claimed', token }
    }
    if (entry.answer === undefined) return CLAIMED_ELSEWHERE
    return entry.fingerprint === fingerprint ? { state: 'recorded', answer: decode(entry.answer) } : MISMATCH
  }

  record(key: string, token: string, answer: RecordedAnswer): void {
    const entry = this.#owned(key, token)
    if (entry === undefined) return
    const kept = encode(keptAnswer(answer, this.#options))
    this.#entries.set(key, { token, fingerprint: entry.fingerprint, answer: kept }, { ttl: this.#options.ttlMs, size: sizeOf(key, entry.fingerprint, kept) })
  }

  release(key: string, token: string): void {
    if (this.#owned(key, token) !== undefined) this.#entries.delete(key)
  }

  peek(key: string, fingerprint: string): Peek {
    // The cache's peek: no recency update, no write, an expired entry read as none.
    const entry = this.#entries.peek(key)
    if (entry === undefined) return 'free'
    if (entry.answer === undefined) return 'inFlight'
    return entry.fingerprint === fingerprint ? 'recorded' : 'mismatch'
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
