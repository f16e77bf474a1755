/**
 * The Redis store as a client that retries sees it, through the faulty proxy (test/helpers/faulty-proxy.ts), for
 * the model's commands (test/helpers/store-model.ts): before an operation, a fault may be armed for its key (its
 * reply cut after it ran, the command dropped, its reply delayed past the command timeout, every connection reset);
 * an operation that fails is tried again, and a claim once what the failed one left is released. Used against one
 * Redis (test/idempotency/redis-model.test.ts) and a Redis Cluster (test/idempotency/redis-cluster.test.ts).
 */
import fc from 'fast-check'
import type { Test } from 'tap'
import type { RedisClient } from '../../lib/idempotency/redis-client.js'
import { redisKey, RedisIdempotencyStore, type RedisIdempotencyStoreOptions } from '../../lib/idempotency/redis.js'
import type { Claim, IdempotencyStore, Matches, Peek, RecordedAnswer } from '../../lib/idempotency/store.js'
import type { FaultyProxy } from './faulty-proxy.js'
import { runs } from './fuzz.js'
import { OVERSIZED, UNKNOWN } from './store-contract.js'
import { runStoreModel, storeCommands, type ModelSettings } from './store-model.js'

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

/** The store's command timeout: short, so that a dropped command fails within a run. */
const MODEL_COMMAND_TIMEOUT_MS = 150
/** How late a delayed reply comes: past the store's command timeout. */
const LATE_MS = 2 * MODEL_COMMAND_TIMEOUT_MS

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** How many times a failed command is tried again: enough to outlast a delayed reply and a reconnection. */
const ATTEMPTS = 60

/** How long a retry waits for the store to be connected again after a reset: a loaded machine reconnects late. */
const RECONNECT_WAIT_MS = 10_000

/**
 * The store as a client that retries sees it: each operation meets the next
 * planned fault on its first attempt, and is tried again until it answers.
 */
class RetryingStore implements IdempotencyStore {
  readonly #store: RedisIdempotencyStore
  readonly #proxy: FaultyProxy
  readonly #direct: RedisClient
  /** Whether the store's keys carry a Cluster hash tag (lib/idempotency/redis.ts, redisKey). */
  readonly #cluster: boolean
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
    cluster: boolean,
  ) {
    this.#cluster = cluster
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
    const text = redisKey(key, this.#cluster)
    if (fault.kind === 'cut') void this.#proxy.cutReply(text)
    else if (fault.kind === 'drop') void this.#proxy.dropCommand(text)
    else if (fault.kind === 'delay') void this.#proxy.delayReply(text, LATE_MS)
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
      const value = await this.#direct.get(redisKey(key, this.#cluster))
      if (value === null || this.#tokens.has((JSON.parse(value) as { token: string }).token)) return
      await pause(20)
    }
    throw new Error(`a failed claim of ${key} still holds it: its release never landed`)
  }
}

/**
 * The plain model's settings for a store behind the faulty proxy: Redis's clock cannot be moved, so windows and
 * TTLs outlast a run, and time does not pass.
 */
export const FAULTY_MODEL_SETTINGS: ModelSettings = {
  ttlMs: 600_000,
  inFlightMs: 600_000,
  maxAnswerBytes: 2000,
  oversizedAnswer: OVERSIZED,
  unknownAnswer: UNKNOWN,
  capacity: Number.POSITIVE_INFINITY,
}

/** The store behind the proxy: the model's settings, its releases tried until a node cut off is reached again. */
export const FAULTY_STORE_OPTIONS: RedisIdempotencyStoreOptions = {
  ...FAULTY_MODEL_SETTINGS,
  releaseRetry: { attempts: 30, firstDelayMs: 10, maxDelayMs: 50 },
}

/** A Redis store's deployment behind the faulty proxy, for `checkModelThroughFaults`. */
export interface FaultyDeployment {
  readonly proxy: FaultyProxy
  /** A client past the proxy. */
  readonly direct: RedisClient
  /** A client with the store's options whose commands pass the proxy. */
  client(options: RedisIdempotencyStoreOptions): RedisClient
  /** Whether the store runs on a Redis Cluster (its keys carry a hash tag). */
  readonly cluster: boolean
  /** Empties every node the store writes to, before each run. */
  flush(): Promise<unknown>
  /** The share of the fuzz runs (test/helpers/fuzz.ts) this deployment takes. */
  readonly share: number
}

/**
 * The commands of the plain model (test/helpers/store-model.ts) against the Redis store of `deployment` through
 * the faulty proxy, each command meeting a planned fault and tried again until it answers: the model must hold
 * as if no fault had happened, and no release is given up.
 */
export async function checkModelThroughFaults(t: Test, deployment: FaultyDeployment): Promise<void> {
  const given: Error[] = []
  let failures = 0
  let commands = 0
  const start = async (planned: Fault[]) => {
    const options: RedisIdempotencyStoreOptions = {
      ...FAULTY_STORE_OPTIONS,
      commandTimeoutMs: MODEL_COMMAND_TIMEOUT_MS,
      onError: (error: Error) => {
        if ((error as { code?: string }).code === 'ERELEASE') given.push(error)
      },
    }
    const store = new RedisIdempotencyStore(deployment.client(options), options)
    if (!(await store.ready(RECONNECT_WAIT_MS))) throw new Error('the store did not connect')
    return {
      store: new RetryingStore(
        store,
        deployment.proxy,
        deployment.direct,
        planned,
        () => failures++,
        deployment.cluster,
      ),
      check: () => void commands++,
    }
  }
  await fc.assert(
    fc.asyncProperty(
      storeCommands(FAULTY_MODEL_SETTINGS, { advance: false, maxCommands: 20, maxBody: 3000 }),
      fc.array(FAULT, { maxLength: 20 }),
      async (run, planned) => {
        await deployment.flush()
        await runStoreModel(FAULTY_MODEL_SETTINGS, () => start([...planned]), run)
      },
    ),
    runs(deployment.share),
  )
  t.ok(commands > 0, `${commands} commands checked`)
  t.ok(failures > 0, `${failures} attempts failed and were tried again`)
  t.same(given, [], 'no release was given up')
}
