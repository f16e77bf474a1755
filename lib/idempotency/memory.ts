import { keptAnswer } from './answer-size.js'
import { decode as decodeBody, encode, Reference } from './body-delta.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import type { Claim, IdempotencyStore, IdempotencyStoreOptions, Peek, RecordedAnswer } from './store.js'

/** What the memory store tells its owner about how long it remembers (docs/idempotency.md, the memory store). */
export interface MemoryStoreReport {
  /** An entry left before its TTL ended, to make room: a retry of that payment would be forwarded again. */
  evicted(): void
  /** Called once, with what reads the age of the oldest entry kept, in seconds: the protection window in force. */
  window(read: () => number): void
}

export interface MemoryIdempotencyStoreOptions extends IdempotencyStoreOptions {
  /** Most keys held. Default 1000000: the byte bound is the one that binds. */
  maxEntries?: number
  /** Most bytes held (answers, fingerprints, keys and each entry's own objects). Default 64 MiB. */
  maxBytes?: number
  /** The clock, in ms; for tests. Default `performance.now`. */
  now?: () => number
  report?: MemoryStoreReport
}

/**
 * One key's entry. Few objects, and no number that is not a small integer
 * (V8 keeps such a number as an object of its own): tens of thousands of
 * entries live in the old generation, and every major GC walks each object
 * they hold. A recorded answer is two flat strings, its status and headers as
 * JSON (`head`) and its body's bytes as latin1 (one character a byte, so any
 * bytes round-trip); one string each, never a string joined from pieces, which
 * V8 keeps as an object for the join and one for each piece.
 */
class Entry {
  readonly key: string
  readonly fingerprint: string
  /** The claim's number: its token is this number's decimal. */
  readonly owner: number
  /** When the entry ends, in whole ms of the store's clock: the claim's time plus in-flight window and TTL, or the record's plus TTL; GONE once it left the map. */
  expires: number
  /** Undefined while the claim is in flight, and once it became unknown. */
  head: string | undefined
  /** The body's bytes as latin1, or written against `reference` (body-delta.ts). */
  body: string | undefined
  reference: Reference | undefined
  /** What the entry is counted as against `maxBytes`. */
  bytes: number

  constructor(
    key: string,
    fingerprint: string,
    owner: number,
    expires: number,
    head: string | undefined,
    body: string | undefined,
    reference: Reference | undefined,
    bytes: number,
  ) {
    this.key = key
    this.fingerprint = fingerprint
    this.owner = owner
    this.expires = expires
    this.head = head
    this.body = body
    this.reference = reference
    this.bytes = bytes
  }
}

/**
 * What an entry holds in memory besides the characters of its key,
 * fingerprint and answer: its objects, the map's and the queue's slots
 * (docs/idempotency.md has the figure; test/idempotency/memory.test.ts
 * checks against the heap's growth that this covers it). Counted so that
 * `maxBytes` bounds what the process really holds, not just the payload.
 */
const ENTRY_OVERHEAD = 224

/** The end of an entry no longer in the map (released, or its key claimed again after it expired): before any time. */
const GONE = -1

const CLAIMED_ELSEWHERE: Claim = Object.freeze({ state: 'inFlight' })
const MISMATCH: Claim = Object.freeze({ state: 'mismatch' })

/** The answer's status and headers as JSON: header names and values are latin1 text, so their JSON is too. */
const headOf = (answer: RecordedAnswer) => JSON.stringify([answer.status, answer.headers])

/**
 * The same text as one flat string. The fingerprint is joined from the
 * operation and a digest, which V8 keeps as three objects for as long as the
 * entry lives; rebuilt from its bytes (ASCII), it is one.
 */
const flat = (text: string) => Buffer.from(text, 'latin1').toString('latin1')

function decode(entry: Entry): RecordedAnswer {
  const [status, headers] = JSON.parse(entry.head as string) as [number, string[]]
  const body = entry.body as string
  return { status, headers, body: entry.reference === undefined ? Buffer.from(body, 'latin1') : decodeBody(body, entry.reference) }
}

/** Bodies shorter than this are kept as they are. */
const DELTA_MIN = 64
/** Bodies in a row that the reference did not halve before the next one becomes the reference. */
const ADOPT_AFTER = 8
/** What a reference holds besides its bytes: its objects and, while current, its index. */
const REFERENCE_OVERHEAD = 8192 + 512
const referenceBytes = (reference: Reference) => REFERENCE_OVERHEAD + reference.bytes.length

/**
 * The store of one process: synchronous, so a payment pays no promise for it.
 * Entries are kept in the order of their claims; under pressure the oldest go
 * first, so the age of the oldest kept entry is the window in which a retry is
 * still recognized (docs/idempotency.md, memory store limits).
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  readonly #entries = new Map<string, Entry>()
  /** Every entry held, in the order of their claims, as a ring: also those released or expired, until they reach its head. */
  #queue: (Entry | undefined)[] = new Array<Entry | undefined>(1024)
  #head = 0
  #held = 0
  #bytes = 0
  #sequence = 0
  /** The body others are written against, how many in a row it failed to halve, and the one the last body was written against. */
  #reference: Reference | undefined
  #misses = 0
  #with: Reference | undefined
  /** The last answer head kept: answers of one backend within a second share their status and headers, and so the string. */
  #lastHead = ''
  readonly #ttl: number
  readonly #inFlight: number
  readonly #maxEntries: number
  readonly #maxBytes: number
  readonly #now: () => number
  readonly #options: MemoryIdempotencyStoreOptions

  constructor(options: MemoryIdempotencyStoreOptions) {
    this.#options = options
    this.#ttl = options.ttlMs
    this.#inFlight = options.inFlightMs
    this.#maxEntries = options.maxEntries ?? IDEMPOTENCY_DEFAULTS.maxEntries
    this.#maxBytes = options.maxBytes ?? IDEMPOTENCY_DEFAULTS.maxBytes
    this.#now = options.now ?? (() => performance.now())
    options.report?.window(() => this.window)
  }

  /** How many keys are held. */
  get size(): number {
    return this.#entries.size
  }

  /** The bytes held, as counted against `maxBytes`. */
  get bytes(): number {
    return this.#bytes
  }

  /** The age of the oldest entry still kept, in seconds (0 when there is none): the protection window in force. */
  get window(): number {
    const time = this.#time()
    const mask = this.#queue.length - 1
    for (let i = 0; i < this.#held; i++) {
      const entry = this.#queue[(this.#head + i) & mask] as Entry
      if (entry.expires > time) {
        const start = entry.expires - this.#ttl - (entry.head === undefined ? this.#inFlight : 0)
        return (time - start) / 1000
      }
    }
    return 0
  }

  claim(key: string, fingerprint: string): Claim {
    const time = this.#time()
    const entry = this.#entries.get(key)
    if (entry === undefined) return this.#claimed(key, fingerprint, time)
    if (entry.expires <= time) {
      entry.expires = GONE
      return this.#claimed(key, fingerprint, time)
    }
    if (entry.head === undefined && entry.expires - this.#ttl > time) return CLAIMED_ELSEWHERE
    if (entry.fingerprint !== fingerprint) return MISMATCH
    // No answer past the in-flight window: the outcome is unknown, and a retry is never forwarded again (docs/idempotency.md).
    return { state: 'recorded', answer: entry.head === undefined ? this.#options.unknownAnswer : decode(entry) }
  }

  record(key: string, token: string, answer: RecordedAnswer): void {
    const time = this.#time()
    const entry = this.#owned(key, token, time)
    if (entry === undefined) return
    const kept = keptAnswer(answer, this.#options)
    // A shared head is counted once, by the entry that brought it.
    let headBytes = 0
    let head = headOf(kept)
    if (head === this.#lastHead) head = this.#lastHead
    else {
      this.#lastHead = head
      headBytes = head.length
    }
    const body = this.#written(kept.body)
    entry.reference = this.#with
    if (this.#with !== undefined) this.#with.users++
    const bytes = ENTRY_OVERHEAD + key.length + entry.fingerprint.length + headBytes + body.length
    entry.head = head
    entry.body = body
    entry.expires = time + this.#ttl
    this.#bytes += bytes - entry.bytes
    entry.bytes = bytes
    this.#bound(time)
  }

  release(key: string, token: string): void {
    const entry = this.#owned(key, token, this.#time())
    if (entry === undefined) return
    this.#entries.delete(key)
    entry.expires = GONE
  }

  peek(key: string, fingerprint: string): Peek {
    // What claim would answer, without its write: an expired entry reads as none, a claim past its window as recorded.
    const time = this.#time()
    const entry = this.#entries.get(key)
    if (entry === undefined || entry.expires <= time) return 'free'
    if (entry.head === undefined && entry.expires - this.#ttl > time) return 'inFlight'
    return entry.fingerprint === fingerprint ? 'recorded' : 'mismatch'
  }

  async close(): Promise<void> {
    this.#entries.clear()
    this.#queue = new Array<Entry | undefined>(1024)
    this.#head = this.#held = this.#bytes = this.#misses = 0
    this.#reference = undefined
  }

  /** Whole ms: a whole number is kept in an entry as is, a fraction as an object of its own. */
  #time(): number {
    return Math.floor(this.#now())
  }

  /** The body as kept: written against the current reference when that halves it at least; `#with` says against which, if any. */
  #written(body: Buffer): string {
    this.#with = undefined
    if (body.length < DELTA_MIN) return body.toString('latin1')
    if (this.#reference !== undefined) {
      const encoded = encode(body, this.#reference)
      if (encoded.length * 2 <= body.length) {
        this.#misses = 0
        this.#with = this.#reference
        return encoded
      }
      if (++this.#misses < ADOPT_AFTER) return body.toString('latin1')
      this.#release(this.#reference)
    }
    // The first body, or one of a new kind: the next ones are written against it.
    const reference = new Reference(body)
    this.#reference = reference
    this.#misses = 0
    this.#bytes += referenceBytes(reference)
    this.#with = reference
    return encode(body, reference)
  }

  /** A reference no longer current, or an entry gone that used one: its bytes leave the count once neither holds it. */
  #release(reference: Reference): void {
    if (reference === this.#reference) {
      reference.retire()
      this.#reference = undefined
    }
    if (reference.users === 0) this.#bytes -= referenceBytes(reference)
  }

  #claimed(key: string, fingerprint: string, time: number): Claim {
    const owner = ++this.#sequence
    const entry = new Entry(key, flat(fingerprint), owner, time + this.#inFlight + this.#ttl, undefined, undefined, undefined, ENTRY_OVERHEAD + key.length + fingerprint.length)
    this.#entries.set(key, entry)
    this.#push(entry)
    this.#bound(time)
    return { state: 'claimed', token: String(owner) }
  }

  /** The key's entry when `token` owns it, it is alive, and no answer is recorded yet (in flight, or unknown past its window). */
  #owned(key: string, token: string, time: number): Entry | undefined {
    // Every claim adds one entry to the queue, numbered in order: the token's entry is found by its place, without the map.
    const place = Number(token) - (this.#held === 0 ? 0 : (this.#queue[this.#head] as Entry).owner)
    if (!(Number.isInteger(place) && place >= 0 && place < this.#held)) return undefined
    const entry = this.#queue[(this.#head + place) & (this.#queue.length - 1)] as Entry
    return entry.key === key && entry.head === undefined && entry.expires > time ? entry : undefined
  }

  #push(entry: Entry): void {
    let queue = this.#queue
    if (this.#held === queue.length) {
      const grown = new Array<Entry | undefined>(queue.length * 2)
      for (let i = 0; i < this.#held; i++) grown[i] = queue[(this.#head + i) & (queue.length - 1)]
      this.#queue = queue = grown
      this.#head = 0
    }
    queue[(this.#head + this.#held) & (queue.length - 1)] = entry
    this.#bytes += entry.bytes
    this.#held++
  }

  /**
   * Drops entries from the oldest end while the oldest has expired or the
   * store is over a bound. One that is still the key's, and not expired, is
   * an eviction; one released or claimed again since is not.
   */
  #bound(time: number): void {
    const queue = this.#queue
    const mask = queue.length - 1
    while (this.#held > 0) {
      const entry = queue[this.#head] as Entry
      // A released or replaced entry is counted until it gets here.
      if (entry.expires > time && this.#held <= this.#maxEntries && this.#bytes <= this.#maxBytes) return
      if (entry.expires !== GONE) {
        this.#entries.delete(entry.key)
        if (entry.expires > time) this.#options.report?.evicted()
      }
      queue[this.#head] = undefined
      this.#head = (this.#head + 1) & mask
      this.#held--
      this.#bytes -= entry.bytes
      const reference = entry.reference
      if (reference !== undefined && --reference.users === 0 && reference !== this.#reference) this.#release(reference)
    }
  }
}
