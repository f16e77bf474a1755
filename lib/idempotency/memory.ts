import { keptAnswer } from './answer-size.js'
import { decode as decodeBody, encode, MAX_REFERENCE, Reference } from './body-delta.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { CodedError } from '../coded-error.js'
import {
  recordedPeek,
  sameFingerprint,
  type Claim,
  type IdempotencyStore,
  type IdempotencyStoreOptions,
  type Matches,
  type Peek,
  type RecordedAnswer,
} from './store.js'

/** What the memory store tells its owner about how long it remembers (docs/idempotency-reference.md, the memory store). */
export interface MemoryStoreReport {
  /** A recorded answer left before its TTL ended, to make room: a retry of that payment would be forwarded again. */
  evicted(): void
  /** A new claim refused because claims in flight fill the store: the claim failed as a store failure does. */
  full(): void
  /** Called once, with what reads the age of the oldest entry kept, in seconds: the protection window in force. */
  window(read: () => number): void
}

export interface MemoryIdempotencyStoreOptions extends IdempotencyStoreOptions {
  /** Most keys held. Default 1000000: the byte bound is the one that binds. */
  maxEntries?: number
  /** Most bytes held (answers, fingerprints, keys and each entry's own objects), at least `MIN_MAX_BYTES`. Default 64 MiB. */
  maxBytes?: number
  /** The clock, in ms; for tests. Default `performance.now`. */
  now?: () => number
  /** Claims already made, where the claim counter starts; for tests. Default 0. */
  claims?: number
  report?: MemoryStoreReport
}

/**
 * One key's entry. Few objects, and no number that is not a small integer
 * (V8 keeps such a number as an object of its own): tens of thousands of
 * entries live in the old generation, and every major GC walks each object
 * they hold. A recorded answer is two flat strings, its status and headers as
 * JSON (`head`) and its body's bytes as latin1 (one character a byte, so any
 * bytes round-trip); one string each, never a string joined from pieces, which
 * V8 keeps as an object for the join and one for each piece. The key and the
 * fingerprint come flat as well (key.ts and fingerprint.ts write them so).
 */
class Entry {
  readonly key: string
  readonly fingerprint: string
  /** The claim's number, counted modulo `TICKS`: its token is this number's decimal. */
  readonly owner: number
  /** In ticks modulo `TICKS`: the claim's time while in flight; once answered, when it was recorded. */
  start: number
  /** Undefined while the claim is in flight, `UNKNOWN` once its window ended with its holder still at work. */
  head: string | undefined = undefined
  /** The body's bytes as latin1, or written against `reference` (body-delta.ts). */
  body: string | undefined = undefined
  reference: Reference | undefined = undefined
  /** What the entry is counted as against `maxBytes`. */
  bytes: number
  /** Its neighbours in its line: the claims in flight, the late ones, or the answers. */
  previous: Entry | undefined = undefined
  next: Entry | undefined = undefined

  constructor(key: string, fingerprint: string, owner: number, start: number, bytes: number) {
    this.key = key
    this.fingerprint = fingerprint
    this.owner = owner
    this.start = start
    this.bytes = bytes
  }
}

/** Entries in the order they joined: both ends and any entry leave at once. */
class Line {
  first: Entry | undefined = undefined
  last: Entry | undefined = undefined

  push(entry: Entry): void {
    entry.previous = this.last
    entry.next = undefined
    if (this.last === undefined) this.first = entry
    else this.last.next = entry
    this.last = entry
  }

  remove(entry: Entry): void {
    if (entry.previous === undefined) this.first = entry.next
    else entry.previous.next = entry.next
    if (entry.next === undefined) this.last = entry.previous
    else entry.next.previous = entry.previous
    entry.previous = entry.next = undefined
  }
}

/**
 * What an entry holds in memory besides the characters of its key,
 * fingerprint and answer: its objects and the map's slots
 * (docs/idempotency.md has the figure; test/idempotency/memory-heap.test.ts
 * checks against the heap's growth that this covers it). Counted so that
 * `maxBytes` bounds what the process really holds, not just the payload.
 */
const ENTRY_OVERHEAD = 224

/** What a reference holds besides its bytes: its objects and, while current, its index. */
const REFERENCE_OVERHEAD = 8192 + 512
const referenceBytes = (reference: Reference) => REFERENCE_OVERHEAD + reference.bytes.length
/** Room always kept beside the claims in flight, so the largest reference can be made whatever is in flight. */
const REFERENCE_ROOM = REFERENCE_OVERHEAD + MAX_REFERENCE

/**
 * What a claim in flight holds for its answer, counted from its claim to its record: a typical answer
 * kept (its head shared, its body written against a reference), not the largest. An answer larger
 * than what it finds at its record makes room by evicting older answers; with none left, it is kept
 * as the stand-in `oversizedAnswer`, which fits in this (docs/idempotency-reference.md, memory store).
 */
export const ANSWER_ROOM = 512

/** The least `maxBytes` (`--idempotency-max-bytes`): the largest reference, and beside it room for twice the largest answer. */
export const MIN_MAX_BYTES = REFERENCE_ROOM + 2 * IDEMPOTENCY_DEFAULTS.maxAnswerBytes

/**
 * Times and claim numbers are kept modulo 2^30, so every one is a small integer
 * whatever the uptime and however many claims; an age is a difference modulo
 * 2^30 (the serial number arithmetic of RFC 1982), exact while below 2^29.
 */
const TICKS = 2 ** 30
const MASK = TICKS - 1
const HALF = TICKS / 2

/** The head of a claim past its window whose holder has neither recorded nor released it yet. */
const UNKNOWN = ''

const CLAIMED_ELSEWHERE: Claim = Object.freeze({ state: 'inFlight' })
const MISMATCH: Claim = Object.freeze({ state: 'mismatch' })
const UNKNOWN_KEY: Claim = Object.freeze({ state: 'unknownKey' })
/** One error for every refused claim: nothing about it differs from one to the next. */
const FULL = new CodedError('ESTOREFULL', 'the retry-protection memory store is full of payments in flight')

/** The answer's status and headers as JSON: header names and values are latin1 text, so their JSON is too. */
const headOf = (answer: RecordedAnswer) => JSON.stringify([answer.status, answer.headers])

function sameItems(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** Bodies shorter than this are kept as they are. */
const DELTA_MIN = 64
/** Bodies in a row that the reference did not halve before the next one becomes the reference. */
const ADOPT_AFTER = 8

/**
 * The store of one process: synchronous, so a payment pays no promise for it.
 * Claims in flight are never evicted: a payment may be at the backend. Nor is
 * a claim past its window: its holder is in this process, and until it
 * records or releases the claim its relay is still at work (a retry gets the
 * unknown outcome meanwhile). Answers are kept in the order they were
 * recorded, and under pressure the oldest go first, so the age of the oldest
 * kept answer is the window in which a retry is still recognized; when
 * claims leave no room, a new claim fails (docs/idempotency-reference.md, memory store).
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  readonly #entries = new Map<string, Entry>()
  /** Claims in the order of their claims, claims past their window, answers in the order of their records: each line's oldest first. */
  readonly #flying = new Line()
  readonly #late = new Line()
  readonly #answers = new Line()
  /** Claims in flight and late ones, and what they hold with their answers' room: never evicted. */
  #flyingCount = 0
  #flyingBytes = 0
  #bytes = 0
  #sequence: number
  /** The clock's last reading, in ticks (not reduced): a longer pause than any window means every entry ended. */
  #last: number
  /** The body others are written against, how many in a row it failed to halve, and the one the last body was written against. */
  #reference: Reference | undefined
  #misses = 0
  #with: Reference | undefined
  /**
   * The last answer head kept, and the status and headers it was written from: answers of one backend within a
   * second share their status and headers, and so the string, which is then not written again for each.
   */
  #lastHead = UNKNOWN
  #lastStatus = 0
  #lastHeaders: readonly string[] = []
  /** Milliseconds in a tick: 1, or the power of two that keeps the longest window below 2^29 ticks. */
  readonly #unit: number
  readonly #ttl: number
  readonly #inFlight: number
  /** What each claim holds for its answer: `ANSWER_ROOM`, or the stand-in's size when larger. */
  readonly #answerRoom: number
  readonly #maxEntries: number
  readonly #maxBytes: number
  readonly #now: () => number
  readonly #options: MemoryIdempotencyStoreOptions

  constructor(options: MemoryIdempotencyStoreOptions) {
    this.#options = options
    this.#maxEntries = options.maxEntries ?? IDEMPOTENCY_DEFAULTS.maxEntries
    this.#maxBytes = options.maxBytes ?? IDEMPOTENCY_DEFAULTS.maxBytes
    if (!(this.#maxBytes >= MIN_MAX_BYTES)) throw new RangeError(`maxBytes must be at least ${MIN_MAX_BYTES}`)
    this.#now = options.now ?? (() => performance.now())
    this.#answerRoom = Math.max(
      ANSWER_ROOM,
      headOf(options.oversizedAnswer).length + options.oversizedAnswer.body.length,
    )
    this.#sequence = (options.claims ?? 0) & MASK
    const longest = Math.max(options.ttlMs, options.inFlightMs)
    let unit = 1
    while (Math.ceil(longest / unit) + 1 >= HALF) unit *= 2
    this.#unit = unit
    // Rounded up, and a tick more when a tick is coarser than a ms: never shorter than asked.
    const span = (ms: number) => Math.ceil(ms / unit) + (unit === 1 ? 0 : 1)
    this.#ttl = span(options.ttlMs)
    this.#inFlight = span(options.inFlightMs)
    this.#last = Math.floor(this.#now() / unit)
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

  /** The age of the oldest entry kept, in seconds (0 when there is none): a claim's from its claim (a late one's too), an answer's from its record. */
  get window(): number {
    const time = this.#tick()
    let age = 0
    for (const oldest of [this.#late.first, this.#flying.first, this.#answers.first])
      if (oldest !== undefined) age = Math.max(age, (time - oldest.start) & MASK)
    return (age * this.#unit) / 1000
  }

  // `matches` is asked only when the fingerprints differ: a store given to gateways with keys of their own.
  claim(key: string, fingerprint: string, matches?: Matches): Claim {
    const time = this.#tick()
    const entry = this.#entries.get(key)
    if (entry === undefined) return this.#claimed(key, fingerprint, time)
    if (entry.head === undefined) return CLAIMED_ELSEWHERE
    const same = sameFingerprint(entry.fingerprint, fingerprint, matches)
    if (same !== true) return same === false ? MISMATCH : UNKNOWN_KEY
    // No answer by the end of the in-flight window: the outcome is unknown, and a retry is never forwarded again (docs/idempotency.md).
    return { state: 'recorded', answer: entry.head === UNKNOWN ? this.#options.unknownAnswer : this.#decode(entry) }
  }

  record(key: string, token: string, answer: RecordedAnswer): void {
    const time = this.#tick()
    const entry = this.#owned(key, token)
    if (entry === undefined) return
    const kept = keptAnswer(answer, this.#options)
    // A shared head is counted once, by the entry that brought it.
    let headBytes = 0
    let head = this.#lastHead
    if (head === UNKNOWN || kept.status !== this.#lastStatus || !sameItems(kept.headers, this.#lastHeaders)) {
      head = headOf(kept)
      headBytes = head.length
      this.#lastHead = head
      this.#lastStatus = kept.status
      // A copy: the caller's list is the caller's to change.
      this.#lastHeaders = [...kept.headers]
    }
    this.#leave(entry)
    const body = this.#written(kept.body)
    entry.reference = this.#with
    if (this.#with !== undefined) this.#with.users++
    entry.head = head
    entry.body = body
    entry.start = time
    entry.bytes = ENTRY_OVERHEAD + key.length + entry.fingerprint.length + headBytes + body.length
    this.#bytes += entry.bytes
    this.#answers.push(entry)
    this.#bound(entry)
  }

  release(key: string, token: string): void {
    this.#tick()
    const entry = this.#owned(key, token)
    if (entry === undefined) return
    this.#leave(entry)
    this.#entries.delete(key)
  }

  peek(key: string, fingerprint: string, matches?: Matches): Peek {
    // What claim would answer, without its write.
    this.#tick()
    const entry = this.#entries.get(key)
    if (entry === undefined) return 'free'
    if (entry.head === undefined) return 'inFlight'
    return recordedPeek(sameFingerprint(entry.fingerprint, fingerprint, matches))
  }

  async close(): Promise<void> {
    this.#entries.clear()
    for (const line of [this.#flying, this.#late, this.#answers]) line.first = line.last = undefined
    this.#flyingCount = this.#flyingBytes = this.#bytes = this.#misses = 0
    this.#reference = this.#with = undefined
    this.#lastHead = UNKNOWN
  }

  /**
   * The time now, in ticks modulo `TICKS`, with every entry that ended by now
   * gone: a claim past its window turns unknown, still held until its holder
   * records or releases it; an answer past its TTL leaves. So what the map
   * holds is alive.
   */
  #tick(): number {
    const ticks = Math.floor(this.#now() / this.#unit)
    if (ticks - this.#last >= HALF) this.#expireAll()
    this.#last = ticks
    const time = ticks & MASK
    for (
      let entry = this.#flying.first;
      entry !== undefined && ((time - entry.start) & MASK) >= this.#inFlight;
      entry = this.#flying.first
    ) {
      this.#flying.remove(entry)
      entry.head = UNKNOWN
      this.#late.push(entry)
    }
    for (
      let entry = this.#answers.first;
      entry !== undefined && ((time - entry.start) & MASK) >= this.#ttl;
      entry = this.#answers.first
    ) {
      this.#leave(entry)
      this.#entries.delete(entry.key)
    }
    return time
  }

  /** After a pause longer than any window, every entry has ended: ages modulo 2^30 could no longer tell. */
  #expireAll(): void {
    for (const line of [this.#flying, this.#answers]) {
      while (line.first !== undefined) {
        this.#entries.delete(line.first.key)
        this.#leave(line.first)
      }
    }
  }

  #decode(entry: Entry): RecordedAnswer {
    const [status, headers] = JSON.parse(entry.head as string) as [number, string[]]
    const body = entry.body as string
    return {
      status,
      headers,
      body: entry.reference === undefined ? Buffer.from(body, 'latin1') : decodeBody(body, entry.reference),
    }
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

  /**
   * A new claim, when the claims in flight leave room for it, its answer's
   * room and the largest reference; answers are evicted, oldest first, to
   * make it. Else the store fails, as one that cannot be reached: its claims
   * are payments that may be at the backend now, never evicted.
   */
  #claimed(key: string, fingerprint: string, time: number): Claim {
    const bytes = ENTRY_OVERHEAD + key.length + fingerprint.length + this.#answerRoom
    if (this.#flyingCount >= this.#maxEntries || this.#flyingBytes + bytes + REFERENCE_ROOM > this.#maxBytes) {
      this.#options.report?.full()
      throw FULL
    }
    // Modulo 2^30: a token is matched while its claim lives, which no 2^30 claims fit into.
    this.#sequence = (this.#sequence + 1) & MASK
    const entry = new Entry(key, fingerprint, this.#sequence, time, bytes)
    this.#entries.set(key, entry)
    this.#flying.push(entry)
    this.#flyingCount++
    this.#flyingBytes += bytes
    this.#bytes += bytes
    this.#bound()
    return { state: 'claimed', token: String(entry.owner) }
  }

  /** The key's entry when `token` owns it and no answer is recorded yet (in flight, or unknown past its window). */
  #owned(key: string, token: string): Entry | undefined {
    const entry = this.#entries.get(key)
    return entry !== undefined && (entry.head === undefined || entry.head === UNKNOWN) && String(entry.owner) === token
      ? entry
      : undefined
  }

  /** Takes the entry out of its line and out of the count, and its answer's reference with it; the map is the caller's. */
  #leave(entry: Entry): void {
    if (entry.head === undefined || entry.head === UNKNOWN) {
      ;(entry.head === undefined ? this.#flying : this.#late).remove(entry)
      this.#flyingCount--
      this.#flyingBytes -= entry.bytes
    } else this.#answers.remove(entry)
    this.#bytes -= entry.bytes
    const reference = entry.reference
    if (reference === undefined) return
    entry.reference = undefined
    if (--reference.users === 0 && reference !== this.#reference) this.#release(reference)
  }

  /**
   * Evicts answers, oldest first, while the store is over a bound, never
   * `recorded`, the answer being recorded: with no other answer left, it is
   * kept as the stand-in instead, which its claim's room holds. There is
   * always one or the other while the store is over: the claims leave room
   * for the largest reference, and retired references are held by answers only.
   */
  #bound(recorded?: Entry): void {
    while (this.#entries.size > this.#maxEntries || this.#bytes > this.#maxBytes) {
      const oldest = this.#answers.first as Entry
      if (oldest === recorded) {
        this.#standIn(oldest)
        return
      }
      this.#leave(oldest)
      this.#entries.delete(oldest.key)
      this.#options.report?.evicted()
    }
  }

  /** The answer of `entry` replaced by `oversizedAnswer`, kept whole: the payment happened, its answer is not replayed. */
  #standIn(entry: Entry): void {
    this.#leave(entry)
    const { oversizedAnswer } = this.#options
    entry.head = headOf(oversizedAnswer)
    entry.body = oversizedAnswer.body.toString('latin1')
    entry.bytes = ENTRY_OVERHEAD + entry.key.length + entry.fingerprint.length + entry.head.length + entry.body.length
    this.#bytes += entry.bytes
    this.#answers.push(entry)
  }
}
