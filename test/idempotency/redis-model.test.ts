import fc from 'fast-check'
import type { Redis } from 'ioredis'
import t from 'tap'
import { createRedisClient, whenReady } from '../../lib/idempotency/redis-client.js'
import { REDIS_KEY_PREFIX, RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import type { Claim, IdempotencyStore, Matches, Peek, RecordedAnswer } from '../../lib/idempotency/store.js'
import { type FaultyProxy, startFaultyProxy } from '../helpers/faulty-proxy.js'
import { runs } from '../helpers/fuzz.js'
import { startRedis } from '../helpers/redis.js'
import { OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'
import { runStoreModel, storeCommands, type ModelSettings } from '../helpers/store-model.js'

/**
 * The commands of the plain model (test/helpers/store-model.ts) against the
 * Redis store through the faulty proxy (test/helpers/faulty-proxy.ts): before
 * a command, a fault may be armed for it (its reply cut after it ran, the
 * command dropped, its reply delayed past the command timeout, every
 * connection reset). A command that fails is tried again, as a client retries
 * a payment; a claim is tried again once what the failed one left is released.
 * The model must hold as if no fault had happened: a failed claim leaves no
 * claim behind (never stuck at 409), a record or a release that is repeated
 * changes nothing, and no release is given up. Redis's clock cannot be moved:
 * windows and TTLs outlast a run, and time does not pass.
 */

const COMMAND_TIMEOUT_MS = 150
const SETTINGS: ModelSettings = {
  ttlMs: 600_000,
  inFlightMs: 600_000,
  maxAnswerBytes: 2000,
  oversizedAnswer: OVERSIZED,
  unknownAnswer: UNKNOWN,
  capacity: Number.POSITIVE_INFINITY,
}

type Fault =
  | { readonly kind: 'none' }
  | { readonly kind: 'cut' | 'drop' | 'delay' }
  | { readonly kind: 'reset'; readonly afterMs: number }

const FAULT: fc.Arbitrary<Fault> = fc.oneof(
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

/**
 * The store as a client that retries sees it: each operation meets the next
 * planned fault on its first attempt, and is tried again until it answers.
 */
class RetryingStore implements IdempotencyStore {
  readonly #store: RedisIdempotencyStore
  readonly #proxy: FaultyProxy
  readonly #direct: Redis
  readonly #faults: Fault[]
  /** Tokens of the claims that answered: any other token in Redis is a failed claim's, to be released. */
  readonly #tokens = new Set<string>()
  readonly #failed: () => void

  constructor(store: RedisIdempotencyStore, proxy: FaultyProxy, direct: Redis, faults: Fault[], failed: () => void) {
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
    const text = REDIS_KEY_PREFIX + key
    if (fault.kind === 'cut') void this.#proxy.cutReply(text)
    else if (fault.kind === 'drop') void this.#proxy.dropCommand(text)
    else if (fault.kind === 'delay') void this.#proxy.delayReply(text, 2 * COMMAND_TIMEOUT_MS)
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
      await beforeRetry()
      first = operation()
    }
  }

  /** Waits until no claim of a failed attempt holds the key: its release landed (or it never ran). */
  async #released(key: string): Promise<void> {
    for (let attempt = 0; attempt < 200; attempt++) {
      const value = await this.#direct.get(REDIS_KEY_PREFIX + key)
      if (value === null || this.#tokens.has((JSON.parse(value) as { token: string }).token)) return
      await pause(20)
    }
    throw new Error(`a failed claim of ${key} still holds it: its release never landed`)
  }
}

t.test(
  'the Redis store keeps the contract of the plain model through cut, dropped, late replies and resets',
  async (t) => {
    const redis = await startRedis(t)
    if (redis === undefined) return
    const proxy = await startFaultyProxy(t, redis.port)
    const direct = createRedisClient(redis.url) as Redis
    t.teardown(() => direct.disconnect())
    t.ok(await whenReady(direct, 5000))
    const given: Error[] = []
    let failures = 0
    let commands = 0
    await fc.assert(
      fc.asyncProperty(
        storeCommands(SETTINGS, { advance: false, maxCommands: 20, maxBody: 3000 }),
        fc.array(FAULT, { maxLength: 20 }),
        async (run, planned) => {
          await direct.flushdb()
          const start = async () => {
            const options = {
              ...SETTINGS,
              commandTimeoutMs: COMMAND_TIMEOUT_MS,
              releaseRetry: { attempts: 30, firstDelayMs: 10, maxDelayMs: 50 },
              onError: (error: Error) => {
                if ((error as { code?: string }).code === 'ERELEASE') given.push(error)
              },
            }
            const store = new RedisIdempotencyStore(createRedisClient(proxy.url, options), options)
            if (!(await store.ready(5000))) throw new Error('the store did not connect')
            return {
              store: new RetryingStore(store, proxy, direct, [...planned], () => failures++),
              check: () => void commands++,
            }
          }
          await runStoreModel(SETTINGS, start, run)
        },
      ),
      runs(0.04),
    )
    t.ok(commands > 0, `${commands} commands checked`)
    t.ok(failures > 0, `${failures} attempts failed and were tried again`)
    t.same(given, [], 'no release was given up')
  },
)
