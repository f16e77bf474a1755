/**
 * The Redis store as a client that retries sees it, through the faulty proxy (test/helpers/faulty-proxy.ts), for
 * the model's commands (test/helpers/store-model.ts): before an operation, a fault may be armed for its key (its
 * reply cut after it ran, the command dropped, its reply delayed past the command timeout, every connection reset);
 * an operation that fails is tried again, and a claim once what the failed one left is released. Used against one
 * Redis (test/idempotency/redis-model.test.ts) and a Redis Cluster (test/idempotency/redis-cluster.test.ts).
 */
import fc from 'fast-check'
import type { RedisClient } from '../../lib/idempotency/redis-client.js'
import type { RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import type { Claim, IdempotencyStore, Matches, Peek, RecordedAnswer } from '../../lib/idempotency/store.js'
import type { FaultyProxy } from './faulty-proxy.js'

export type Fault =
  | { readonly kind: 'none' }
  | { readonly kind: 'cut' | 'drop' | 'delay' }
  | { readonly kind: 'reset'; readonly afterMs: number }

export const FAULT: fc.Arbitrary<Fault> = fc.oneof(
  { arbitrary: fc.constant({ kind: 'none' } as const), weight: 6 },
  {
    arbitrary: fc.constantFrom({ kind: 'cut' } as const, { kind: 'drop' } as const, { kind: 'delay' } as const),
    weight: 3,
  },
  { arbitrary: fc.nat({ max: 3 }).map((afterMs) => ({ kind: 'reset', afterMs }) as const), weight: 1 },
)

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** How many times a failed command is tried again: enough to outlast a delayed reply and a reconnection. */
const ATTEMPTS = 60

/** How long a retry waits for the store to be connected again after a reset: a loaded machine reconnects late. */
const RECONNECT_WAIT_MS = 10_000

/**
 * The store as a client that retries sees it: each operation meets the next
 * planned fault on its first attempt, and is tried again until it answers.
 */
export class RetryingStore implements IdempotencyStore {
  readonly #store: RedisIdempotencyStore
  readonly #proxy: FaultyProxy
  readonly #direct: RedisClient
  /** The store's key in Redis of a key given to it. */
  readonly #stored: (key: string) => string
  /** How late a delayed reply comes: past the store's command timeout. */
  readonly #lateMs: number
  readonly #faults: Fault[]
  /** Tokens of the claims that answered: any other token in Redis is a failed claim's, to be released. */
  readonly #tokens = new Set<string>()
  readonly #failed: () => void

  constructor(
    store: RedisIdempotencyStore,
    proxy: FaultyProxy,
    direct: RedisClient,
    faults: Fault[],
    failed: () => void,
    settings: { readonly stored: (key: string) => string; readonly lateMs: number },
  ) {
    this.#stored = settings.stored
    this.#lateMs = settings.lateMs
    this.#store = store
    this.#proxy = proxy
    this.#direct = direct
    this.#faults = faults
    this.#failed = failed
  }

  async claim(key: string, fingerprint: string, matches?: Matches): Promise<Claim> {
    const claim = await this.#retried(
      key,
      () => this.#store.claim(key, fingerprint, matches),
      () => this.#released(key),
    )
    if (claim.state === 'claimed') this.#tokens.add(claim.token)
    return claim
  }

  record(key: string, token: string, answer: RecordedAnswer): Promise<void> {
    // The store may read the body only once sent: a copy per attempt, since the model overwrites the caller's buffer after.
    const body = Buffer.from(answer.body)
    return this.#retried(key, () => this.#store.record(key, token, { ...answer, body: Buffer.from(body) }))
  }

  release(key: string, token: string): Promise<void> {
    return this.#retried(key, () => this.#store.release(key, token))
  }

  peek(key: string, fingerprint: string, matches?: Matches): Promise<Peek> {
    return this.#retried(key, () => this.#store.peek(key, fingerprint, matches))
  }

  close(): Promise<void> {
    return this.#store.close()
  }

  async #retried<T>(
    key: string,
    operation: () => Promise<T>,
    beforeRetry: () => Promise<void> = async () => {},
  ): Promise<T> {
    const fault = this.#faults.shift() ?? { kind: 'none' }
    const text = this.#stored(key)
    if (fault.kind === 'cut') void this.#proxy.cutReply(text)
    else if (fault.kind === 'drop') void this.#proxy.dropCommand(text)
    else if (fault.kind === 'delay') void this.#proxy.delayReply(text, this.#lateMs)
    let first = operation()
    if (fault.kind === 'reset') setTimeout(() => this.#proxy.reset(), fault.afterMs)
    for (let attempt = 1; ; attempt++) {
      try {
        return await first
      } catch (error) {
        this.#failed()
        if (attempt === ATTEMPTS) throw error
      } finally {
        this.#proxy.disarm()
      }
      await pause(20)
      // Waited for, not counted: attempts spent while the client reconnects would run out on a loaded machine.
      await this.#store.ready(RECONNECT_WAIT_MS)
      await beforeRetry()
      first = operation()
    }
  }

  /** Waits until no claim of a failed attempt holds the key: its release landed (or it never ran). */
  async #released(key: string): Promise<void> {
    for (let attempt = 0; attempt < 200; attempt++) {
      const value = await this.#direct.get(this.#stored(key))
      if (value === null || this.#tokens.has((JSON.parse(value) as { token: string }).token)) return
      await pause(20)
    }
    throw new Error(`a failed claim of ${key} still holds it: its release never landed`)
  }
}
