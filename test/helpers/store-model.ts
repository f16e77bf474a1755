/**
 * A plain model of the IdempotencyStore contract (lib/idempotency/store.ts,
 * docs/idempotency.md) and fast-check commands that drive a real store and the
 * model side by side: claims and retries, records (bodies alike, copies of
 * earlier ones with an edit, unrelated ones, oversized ones), releases, stale
 * and foreign tokens, peeks, and time passing when the store's clock can be
 * moved. Each command checks the contract as it runs:
 *
 * - never two forwards for one key while a record or a claim could still say
 *   otherwise: a claim is `claimed` only where the model holds nothing;
 * - every replay is byte for byte the answer recorded (or the stand-ins), and a stored fingerprint
 *   under a key the claiming gateway does not hold is `unknownKey`, never a replay nor a mismatch;
 * - a store that may evict (`evictions`) forgets only answers, oldest first,
 *   as many as it reports; a claim fails only with `capacity` claims in flight;
 * - a store whose claims' holders live in its process (`holdsLate`) keeps a
 *   claim past its window until its holder records or releases it.
 *
 * Generic over the store: the memory store runs it with its injected clock
 * (test/idempotency/memory-model.test.ts); a store without one (Redis) leaves
 * `advance` out, and no command lets time pass.
 */
import fc from 'fast-check'
import type { Claim, IdempotencyStore, Matches, RecordedAnswer } from '../../lib/idempotency/store.js'

export interface ModelSettings {
  readonly ttlMs: number
  readonly inFlightMs: number
  /** The store's `maxAnswerBytes`: a larger answer is recorded as `oversizedAnswer`. */
  readonly maxAnswerBytes: number
  readonly oversizedAnswer: RecordedAnswer
  readonly unknownAnswer: RecordedAnswer
  /** How many claims in flight the store must take: a claim of a free key may fail only with this many. Infinity: never. */
  readonly capacity: number
  /**
   * A claim past its window answers as unknown but is held, never evicted nor ended by a TTL, until its holder
   * records or releases it, and counts as in flight (the memory store: every holder is in its process).
   */
  readonly holdsLate?: boolean
}

/** The real side of a run: the store, and what the model needs to know of it. */
export interface StoreRun {
  readonly store: IdempotencyStore
  /** Moves the store's clock by `ms`; without it, time never passes in a run. */
  advance?(ms: number): void | Promise<void>
  /** Answers the store evicted so far; without it, the store may evict nothing. */
  evictions?(): number
  /** The store's own invariants, checked after every command (its bounds, what it holds). */
  check?(model: StoreModel): void
}

/** One key as the model holds it: a claim in flight, or an answer (recorded, or the unknown outcome). */
interface Slot {
  readonly key: string
  readonly fingerprint: string
  /** The token of the claim that made it. */
  readonly token: string
  /** Undefined while in flight. */
  answer: RecordedAnswer | undefined
  /** Whether a real answer was recorded: then no token acts on it any more. */
  recorded: boolean
  /** When it was claimed while in flight; when it was recorded or became unknown once answered. */
  start: number
}

/** What the store must hold, by the contract and nothing else. */
export class StoreModel {
  readonly settings: ModelSettings
  now = 0
  readonly slots = new Map<string, Slot>()
  /** Claims in flight in the order of their claims, answers in the order they were recorded or became unknown. */
  flying: Slot[] = []
  /** Claims past their window still held (`holdsLate`), in the order their windows ended. */
  late: Slot[] = []
  answers: Slot[] = []
  /** Every token the store gave for a key, oldest first. */
  readonly tokens = new Map<string, string[]>()
  /** Bodies recorded so far, for copies. */
  readonly bodies: Buffer[] = []
  evicted = 0

  constructor(settings: ModelSettings) {
    this.settings = settings
  }

  /** Entries past their end, as of `now`: a claim past its window turns unknown, an answer past its TTL leaves. */
  settle(): void {
    const { inFlightMs, ttlMs, unknownAnswer } = this.settings
    while (this.flying.length > 0 && this.now - (this.flying[0] as Slot).start >= inFlightMs) {
      const slot = this.flying.shift() as Slot
      slot.answer = unknownAnswer
      if (this.settings.holdsLate === true) {
        this.late.push(slot)
        continue
      }
      slot.start += inFlightMs
      let at = this.answers.length
      while (at > 0 && (this.answers[at - 1] as Slot).start > slot.start) at--
      this.answers.splice(at, 0, slot)
    }
    while (this.answers.length > 0 && this.now - (this.answers[0] as Slot).start >= ttlMs)
      this.slots.delete((this.answers.shift() as Slot).key)
  }

  /** The store reported `count` evictions in all: the oldest answers are gone. */
  evict(count: number): void {
    if (count < this.evicted) throw new Error(`the eviction count went back from ${this.evicted} to ${count}`)
    for (; this.evicted < count; this.evicted++) {
      const oldest = this.answers.shift()
      if (oldest === undefined) throw new Error('an eviction with no answer held: a claim in flight was evicted')
      this.slots.delete(oldest.key)
    }
  }

  /** Keys held: claims in flight and answers. */
  get live(): number {
    return this.slots.size
  }

  kept(answer: RecordedAnswer): RecordedAnswer {
    let bytes = answer.body.length
    for (const item of answer.headers) bytes += Buffer.byteLength(item)
    return bytes > this.settings.maxAnswerBytes ? this.settings.oversizedAnswer : answer
  }

  /** The live slot that `token` owns and that holds no real answer yet, if any. */
  owned(key: string, token: string): Slot | undefined {
    const slot = this.slots.get(key)
    return slot !== undefined && slot.token === token && !slot.recorded ? slot : undefined
  }

  /** Takes a flying, late or answered slot out of its line. */
  unlink(slot: Slot): void {
    this.flying = this.flying.filter((other) => other !== slot)
    this.late = this.late.filter((other) => other !== slot)
    this.answers = this.answers.filter((other) => other !== slot)
  }

  /** The claims the store holds as in flight. */
  get claims(): number {
    return this.flying.length + this.late.length
  }
}

type Command = fc.AsyncCommand<StoreModel, StoreRun>

/**
 * A request's fingerprint as the store sees it: `KEY DOCUMENT`, made under one of two fingerprint keys,
 * and the keys its gateway holds: `matches` compares a stored one under a held key by its document, and
 * cannot tell (undefined) for one under a key not held; no `matches` at all when `holds` is undefined.
 */
export interface Print {
  readonly key: 'k1' | 'k2'
  readonly document: 'f1' | 'f2'
  readonly holds: readonly string[] | undefined
}

const valueOf = (print: Print) => `${print.key} ${print.document}`

function matchesOf(print: Print): Matches | undefined {
  const { holds, document } = print
  if (holds === undefined) return undefined
  return (stored) => {
    const [key, storedDocument] = stored.split(' ')
    return holds.includes(key as string) ? storedDocument === document : undefined
  }
}

/** What the store must answer for an answer held under `stored`: a replay, a mismatch, or unknownKey. */
function expectedFor(stored: string, print: Print): 'recorded' | 'mismatch' | 'unknownKey' {
  if (stored === valueOf(print)) return 'recorded'
  const [key, document] = stored.split(' ')
  if (print.holds === undefined) return 'mismatch'
  if (!print.holds.includes(key as string)) return 'unknownKey'
  return document === print.document ? 'recorded' : 'mismatch'
}

const printText = (print: Print) =>
  `${valueOf(print)}${print.holds === undefined ? '' : ` holding ${print.holds.join('+')}`}`

function differs(replayed: RecordedAnswer, answer: RecordedAnswer): string | undefined {
  if (replayed.status !== answer.status) return `status ${replayed.status}, recorded ${answer.status}`
  if (JSON.stringify(replayed.headers) !== JSON.stringify(answer.headers))
    return `headers ${JSON.stringify(replayed.headers)}, recorded ${JSON.stringify(answer.headers)}`
  if (!Buffer.isBuffer(replayed.body) || !replayed.body.equals(answer.body))
    return `a body of ${replayed.body.length} bytes differs from the ${answer.body.length} recorded`
  return undefined
}

/** After the real store ran a command: its evictions applied to the model, then its own invariants. */
function synced(model: StoreModel, real: StoreRun): void {
  model.evict(real.evictions?.() ?? 0)
  real.check?.(model)
}

class ClaimCommand implements Command {
  readonly key: string
  readonly print: Print

  constructor(key: string, print: Print) {
    this.key = key
    this.print = print
  }

  check = () => true

  async run(model: StoreModel, real: StoreRun): Promise<void> {
    model.settle()
    const fingerprint = valueOf(this.print)
    let claim: Claim | 'failed'
    try {
      claim = await real.store.claim(this.key, fingerprint, matchesOf(this.print))
    } catch {
      claim = 'failed'
    }
    const slot = model.slots.get(this.key)
    const got = typeof claim === 'string' ? claim : claim.state
    if (slot === undefined) {
      if (claim === 'failed') {
        if (model.claims < model.settings.capacity)
          throw new Error(`claim ${this.key} failed with ${model.claims} claims in flight`)
      } else if (claim.state !== 'claimed') throw new Error(`claim ${this.key}: ${got}, where nothing is held`)
      else {
        const claimed: Slot = {
          key: this.key,
          fingerprint,
          token: claim.token,
          answer: undefined,
          recorded: false,
          start: model.now,
        }
        model.slots.set(this.key, claimed)
        model.flying.push(claimed)
        model.tokens.set(this.key, [...(model.tokens.get(this.key) ?? []), claim.token])
      }
    } else if (got === 'claimed')
      throw new Error(
        `claim ${this.key}: claimed again, forwarded twice, while ${slot.answer === undefined ? 'a claim is in flight' : 'an answer is held'}`,
      )
    else if (slot.answer === undefined) {
      if (got !== 'inFlight') throw new Error(`claim ${this.key}: ${got}, while its claim is in flight`)
    } else if (expectedFor(slot.fingerprint, this.print) !== 'recorded') {
      const expected = expectedFor(slot.fingerprint, this.print)
      if (got !== expected) throw new Error(`claim ${this.key} over ${slot.fingerprint}: ${got}, expected ${expected}`)
    } else {
      if (claim === 'failed' || claim.state !== 'recorded')
        throw new Error(`claim ${this.key}: ${got}, where an answer is held`)
      const difference = differs(claim.answer, slot.answer)
      if (difference !== undefined) throw new Error(`replay of ${this.key}: ${difference}`)
    }
    synced(model, real)
  }

  toString = () => `claim(${this.key}, ${printText(this.print)})`
}

/** Which token a record or a release uses: the latest the key got, an earlier one, or one never issued. */
export type TokenPick =
  { readonly kind: 'latest' } | { readonly kind: 'earlier'; readonly back: number } | { readonly kind: 'bogus' }

function tokenOf(model: StoreModel, key: string, pick: TokenPick): string {
  const tokens = model.tokens.get(key) ?? []
  if (pick.kind === 'bogus' || tokens.length === 0) return 'never-issued'
  return tokens[pick.kind === 'latest' ? tokens.length - 1 : Math.max(0, tokens.length - 1 - pick.back)] as string
}

/** A body to record: small, like the others of one backend, unrelated, a copy of an earlier one with an edit, or near the answer bound. */
export type BodySpec =
  | { readonly kind: 'small'; readonly bytes: Uint8Array }
  | { readonly kind: 'like'; readonly seed: number; readonly pad: number }
  | { readonly kind: 'random'; readonly length: number; readonly seed: number }
  | {
      readonly kind: 'copy'
      readonly from: number
      readonly at: number
      readonly cut: number
      readonly insert: Uint8Array
    }

/** Bytes that no reference shortens, from a seed (xorshift32): cheap to make at any length. */
function noise(length: number, seed: number): Buffer {
  const bytes = Buffer.allocUnsafe(length)
  let x = seed | 1
  for (let i = 0; i < length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    bytes[i] = x & 0xff
  }
  return bytes
}

function bodyOf(model: StoreModel, spec: BodySpec): Buffer {
  switch (spec.kind) {
    case 'small':
      return Buffer.from(spec.bytes)
    case 'like':
      return Buffer.from(
        JSON.stringify({
          outcome: 'authorized',
          paymentId: `payment-${spec.seed}`,
          _links: { self: { href: `/payments/events/${spec.seed}` } },
          note: 'n'.repeat(spec.pad),
        }),
      )
    case 'random':
      return noise(spec.length, spec.seed)
    default: {
      const earlier = model.bodies[spec.from % Math.max(1, model.bodies.length)] ?? Buffer.alloc(0)
      const at = spec.at % (earlier.length + 1)
      return Buffer.concat([earlier.subarray(0, at), spec.insert, earlier.subarray(at + spec.cut)])
    }
  }
}

const HEADS = [
  {
    status: 201,
    headers: ['Content-Type', 'application/vnd.example.payments-v6.hal+json', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2'],
  },
  { status: 201, headers: ['Content-Type', 'application/vnd.example.payments-v6.hal+json', 'X-Note', 'café'] },
  { status: 502, headers: [] },
] as const

class RecordCommand implements Command {
  readonly key: string
  readonly pick: TokenPick
  readonly head: number
  readonly body: BodySpec

  constructor(key: string, pick: TokenPick, head: number, body: BodySpec) {
    this.key = key
    this.pick = pick
    this.head = head
    this.body = body
  }

  check = () => true

  async run(model: StoreModel, real: StoreRun): Promise<void> {
    model.settle()
    const token = tokenOf(model, this.key, this.pick)
    const { status, headers } = HEADS[this.head % HEADS.length] as (typeof HEADS)[number]
    const body = bodyOf(model, this.body)
    const expected: RecordedAnswer = { status, headers: [...headers], body: Buffer.from(body) }
    model.bodies.push(expected.body)
    await real.store.record(this.key, token, { status, headers: [...headers], body })
    // The store keeps its own copy: the caller may reuse the buffer.
    body.fill(0x5a)
    const slot = model.owned(this.key, token)
    if (slot !== undefined) {
      model.unlink(slot)
      slot.answer = model.kept(expected)
      slot.recorded = true
      slot.start = model.now
      model.answers.push(slot)
    }
    synced(model, real)
  }

  toString = () => `record(${this.key}, ${JSON.stringify(this.pick)}, head ${this.head}, ${this.body.kind})`
}

class ReleaseCommand implements Command {
  readonly key: string
  readonly pick: TokenPick

  constructor(key: string, pick: TokenPick) {
    this.key = key
    this.pick = pick
  }

  check = () => true

  async run(model: StoreModel, real: StoreRun): Promise<void> {
    model.settle()
    const token = tokenOf(model, this.key, this.pick)
    await real.store.release(this.key, token)
    const slot = model.owned(this.key, token)
    if (slot !== undefined) {
      model.unlink(slot)
      model.slots.delete(this.key)
    }
    synced(model, real)
  }

  toString = () => `release(${this.key}, ${JSON.stringify(this.pick)})`
}

class PeekCommand implements Command {
  readonly key: string
  readonly print: Print

  constructor(key: string, print: Print) {
    this.key = key
    this.print = print
  }

  check = () => true

  async run(model: StoreModel, real: StoreRun): Promise<void> {
    if (real.store.peek === undefined) return
    model.settle()
    const got = await real.store.peek(this.key, valueOf(this.print), matchesOf(this.print))
    const slot = model.slots.get(this.key)
    const expected =
      slot === undefined ? 'free' : slot.answer === undefined ? 'inFlight' : expectedFor(slot.fingerprint, this.print)
    if (got !== expected) throw new Error(`peek ${this.key}: ${got}, expected ${expected}`)
    synced(model, real)
  }

  toString = () => `peek(${this.key}, ${printText(this.print)})`
}

class AdvanceCommand implements Command {
  readonly ms: number

  constructor(ms: number) {
    this.ms = ms
  }

  check = () => true

  async run(model: StoreModel, real: StoreRun): Promise<void> {
    if (real.advance === undefined) return
    model.now += this.ms
    await real.advance(this.ms)
  }

  toString = () => `advance(${this.ms})`
}

export interface CommandOptions {
  /** How many keys the commands use: few, so that claims meet retries. Default 5. */
  readonly keys?: number
  /** Whether time passes (a store whose clock the run moves). Default true. */
  readonly advance?: boolean
  /** Most commands in a run. Default 60. */
  readonly maxCommands?: number
  /** Longest random body. Default 70000, past the default answer bound. */
  readonly maxBody?: number
}

const ARBITRARY_TOKEN: fc.Arbitrary<TokenPick> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'latest' } as const), weight: 6 },
  { arbitrary: fc.nat({ max: 3 }).map((back) => ({ kind: 'earlier', back }) as const), weight: 1 },
  { arbitrary: fc.constant({ kind: 'bogus' } as const), weight: 1 },
)

/** Sequences of commands for one run against a store built with `settings`. */
export function storeCommands(
  settings: Pick<ModelSettings, 'ttlMs' | 'inFlightMs'>,
  options: CommandOptions = {},
): fc.Arbitrary<Iterable<Command>> {
  const key = fc.nat({ max: (options.keys ?? 5) - 1 }).map((i) => `key-${i}`)
  // Two fingerprint keys, held by the claiming gateway or not, as during a rotation (docs/idempotency.md).
  const fingerprint: fc.Arbitrary<Print> = fc.record({
    key: fc.constantFrom('k1', 'k2'),
    document: fc.constantFrom('f1', 'f2'),
    holds: fc.constantFrom(undefined, ['k1'], ['k2'], ['k1', 'k2']),
  })
  const body: fc.Arbitrary<BodySpec> = fc.oneof(
    fc.uint8Array({ maxLength: 90 }).map((bytes) => ({ kind: 'small', bytes }) as const),
    fc.record({ seed: fc.nat(), pad: fc.nat({ max: 2000 }) }).map((spec) => ({ kind: 'like', ...spec }) as const),
    fc
      .record({ length: fc.integer({ min: 64, max: options.maxBody ?? 70_000 }), seed: fc.nat() })
      .map((spec) => ({ kind: 'random', ...spec }) as const),
    fc
      .record({ from: fc.nat(), at: fc.nat(), cut: fc.nat({ max: 40 }), insert: fc.uint8Array({ maxLength: 40 }) })
      .map((spec) => ({ kind: 'copy', ...spec }) as const),
  )
  const { ttlMs, inFlightMs } = settings
  const pause = fc.oneof(
    fc.integer({ min: 0, max: 2 * Math.max(ttlMs, inFlightMs) }),
    fc.constantFrom(1, inFlightMs - 1, inFlightMs, ttlMs - 1, ttlMs).filter((ms) => ms >= 0),
  )
  const commands: fc.Arbitrary<Command>[] = [
    fc.tuple(key, fingerprint).map(([k, f]) => new ClaimCommand(k, f)),
    fc.tuple(key, fingerprint).map(([k, f]) => new ClaimCommand(k, f)),
    fc
      .tuple(key, ARBITRARY_TOKEN, fc.nat(), body)
      .map(([k, pick, head, spec]) => new RecordCommand(k, pick, head, spec)),
    fc.tuple(key, ARBITRARY_TOKEN).map(([k, pick]) => new ReleaseCommand(k, pick)),
    fc.tuple(key, fingerprint).map(([k, f]) => new PeekCommand(k, f)),
  ]
  if (options.advance ?? true) commands.push(pause.map((ms) => new AdvanceCommand(ms)))
  return fc.commands(commands, { maxCommands: options.maxCommands ?? 60, size: 'max' })
}

/** Runs `commands` against a fresh store from `start` and the model; rejects at the first break of the contract. Closes the store. */
export async function runStoreModel(
  settings: ModelSettings,
  start: () => StoreRun | Promise<StoreRun>,
  commands: Iterable<Command>,
): Promise<void> {
  const real = await start()
  try {
    await fc.asyncModelRun(() => ({ model: new StoreModel(settings), real }), commands)
  } finally {
    await real.store.close()
  }
}
