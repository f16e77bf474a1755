import { randomUUID } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { CodedError } from '../coded-error.js'
import { keptAnswer } from './answer-size.js'
import { hashTag } from '../hash-tag.js'
import { EvictionWatch } from './eviction.js'
import { closeRedisClient, connectNode, duplicateRedis, whenReady, type RedisClient } from './redis-client.js'
import { notRun, ShardWriters } from './redis-cluster.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
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

/** Every key this store writes starts so, to share a Redis with other uses. */
export const REDIS_KEY_PREFIX = 'payments-gate:idem:'

/**
 * A payment's key in Redis: the prefix and its idempotency key (key.ts). On a Redis Cluster, the idempotency key
 * as a hash tag, so that each payment's key has a slot of its own and payments spread over the shards; on one
 * Redis, as it always was, so that a fleet on one Redis never splits between two spellings during an upgrade.
 */
export function redisKey(key: string, cluster: boolean): string {
  return REDIS_KEY_PREFIX + (cluster ? hashTag(key) : key)
}

export interface RedisIdempotencyStoreOptions extends IdempotencyStoreOptions {
  /** Replicas that must acknowledge a claim or a record (Redis `WAIT`) before it counts. Default 0. */
  replicas?: number
  /** Longest wait for one command, and for the replicas' acknowledgement, in ms. Default 1000. */
  commandTimeoutMs?: number
  /** Told of the errors of the connections this store opens for acknowledged writes, of each failed attempt of a release, and of a release given up. */
  onError?: (error: Error) => void
  /** Told of each acknowledged write sent to another node of a Redis Cluster than the one it was sent to first (MOVED, ASK). */
  onRedirection?: (kind: string, node: string) => void
  /** How a release or a record that failed is tried again. Default: 40 attempts, 100 ms apart at first, doubling up to 10 s. */
  releaseRetry?: ReleaseRetry
  /** How long after each answer a connection's server is asked its `maxmemory-policy` again, in ms. Default 10000. */
  policyRecheckMs?: number
}

/** How a release or a record that failed (Redis unreachable, a timeout) is tried again, until it lands or the claim expires. */
export interface ReleaseRetry {
  /** Most attempts, the first included. */
  readonly attempts: number
  /** Pause after the first failed attempt, in ms; doubled after each next one. */
  readonly firstDelayMs: number
  /** Longest pause between two attempts, in ms. */
  readonly maxDelayMs: number
}

/** About six minutes of attempts: a Redis restart or a Sentinel failover is over well before (docs/idempotency.md). */
const RELEASE_RETRY: ReleaseRetry = Object.freeze({ attempts: 40, firstDelayMs: 100, maxDelayMs: 10_000 })

/** A key's value in Redis: a claim in flight until `deadline` (Redis's clock, in ms), or an answer recorded (body in base64). */
type Stored =
  | { readonly state: 'inFlight'; readonly fingerprint: string; readonly token: string; readonly deadline: number }
  | {
      readonly state: 'recorded'
      readonly fingerprint: string
      readonly token: string
      readonly answer: { readonly status: number; readonly headers: readonly string[]; readonly body: string }
    }

/**
 * Each script runs atomically in Redis, so no other gateway acts between its
 * read and its write. The claim returns what was there, and whether a claim
 * found is past its in-flight window, by Redis's own clock (`TIME`), so the
 * gateways' clocks do not matter; or writes the claim, kept for the window and
 * a TTL after it (a claim past its window is an unknown outcome, replayed for
 * a TTL). A claim that finds its own token in flight (the same claim sent
 * again) is its owner's, as it was. Record and release act only for the
 * claim's owner, while no answer is recorded, also past the window: a late
 * answer replaces the unknown one. Record keeps the claim's fingerprint and
 * nests the answer, JSON built by the caller, as it is (cjson would turn an
 * empty list of headers into an object).
 */
const LOOK = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local found = redis.call('GET', KEYS[1])
local value = found and cjson.decode(found)
`
const FOUND = `
if found then return {found, (value.state == 'inFlight' and now >= value.deadline) and 1 or 0} end
`
const PEEK = `${LOOK}${FOUND}
return false
`
// Its own claim is written again as it is, so that the WAIT after it (replicas) has a write of this connection to acknowledge.
const CLAIM = `${LOOK}
if found and value.state == 'inFlight' and value.token == ARGV[2] and now < value.deadline then
  redis.call('SET', KEYS[1], found, 'PX', redis.call('PTTL', KEYS[1]))
  return false
end
${FOUND}
local claim = '{"state":"inFlight","fingerprint":' .. cjson.encode(ARGV[1]) .. ',"token":' .. cjson.encode(ARGV[2])
  .. ',"deadline":' .. string.format('%d', now + tonumber(ARGV[3])) .. '}'
redis.call('SET', KEYS[1], claim, 'PX', tonumber(ARGV[3]) + tonumber(ARGV[4]))
return false
`
const OWNED = `
local found = redis.call('GET', KEYS[1])
if not found then return 0 end
local value = cjson.decode(found)
if value.state ~= 'inFlight' or value.token ~= ARGV[1] then return 0 end
`
const RECORD = `${OWNED}
local recorded = '{"state":"recorded","fingerprint":' .. cjson.encode(value.fingerprint)
  .. ',"token":' .. cjson.encode(value.token) .. ',"answer":' .. ARGV[2] .. '}'
redis.call('SET', KEYS[1], recorded, 'PX', ARGV[3])
return 1
`
const RELEASE = `${OWNED}
redis.call('DEL', KEYS[1])
return 1
`

interface Scripts {
  paymentsGateIdemClaim(
    key: string,
    fingerprint: string,
    token: string,
    inFlightMs: number,
    ttlMs: number,
  ): Promise<[string, number] | null>
  paymentsGateIdemRecord(key: string, token: string, answer: string, ttlMs: number): Promise<number>
  paymentsGateIdemRelease(key: string, token: string): Promise<number>
  paymentsGateIdemPeek(key: string): Promise<[string, number] | null>
}

type Connection = RedisClient & Scripts
/** A connection of acknowledged writes: to one server, its `WAIT` counting that connection's writes. */
type Writer = Redis & Scripts

function withScripts<C extends RedisClient>(redis: C): C & Scripts {
  redis.defineCommand('paymentsGateIdemClaim', { numberOfKeys: 1, lua: CLAIM })
  redis.defineCommand('paymentsGateIdemRecord', { numberOfKeys: 1, lua: RECORD })
  redis.defineCommand('paymentsGateIdemRelease', { numberOfKeys: 1, lua: RELEASE })
  redis.defineCommand('paymentsGateIdemPeek', { numberOfKeys: 1, lua: PEEK })
  return redis as C & Scripts
}

/**
 * Connections for writes that wait for replicas. `WAIT` blocks its
 * connection until the replicas answer, and acknowledges that connection's
 * writes, so each write takes a connection of its own for itself and its
 * `WAIT`: a slow replica holds these, never the client the login throttle and
 * the releases share, and a write that finds none free within the command
 * timeout fails instead of queuing behind another's `WAIT`. On a Redis
 * Cluster, one such pool per primary (redis-cluster.ts).
 */
class Writers {
  readonly #all: Writer[]
  readonly #idle: Writer[]
  readonly #waiting: ((connection: Writer) => void)[] = []
  readonly #timeoutMs: number

  /** `size` connections `open` makes, each given the scripts. */
  constructor(open: () => Redis, size: number, timeoutMs: number) {
    this.#all = Array.from({ length: size }, () => withScripts(open()))
    this.#idle = [...this.#all]
    this.#timeoutMs = timeoutMs
  }

  /** Runs `run` on a connection of its own; `key` does not choose one: this pool's server holds every key. */
  async with<T>(key: string, run: (connection: Writer) => Promise<T>): Promise<T> {
    const connection = this.#idle.pop() ?? (await this.#free())
    try {
      return await run(connection)
    } finally {
      const next = this.#waiting.shift()
      if (next === undefined) this.#idle.push(connection)
      else next(connection)
    }
  }

  ready(timeoutMs: number): Promise<boolean[]> {
    return Promise.all(this.#all.map((connection) => whenReady(connection, timeoutMs)))
  }

  async close(): Promise<void> {
    await Promise.all(this.#all.map(closeRedisClient))
  }

  #free(): Promise<Writer> {
    return new Promise((resolve, reject) => {
      const take = (connection: Writer) => {
        clearTimeout(timer)
        resolve(connection)
      }
      const timer = setTimeout(() => {
        this.#waiting.splice(this.#waiting.indexOf(take), 1)
        reject(new Error(`no connection for an acknowledged write was free within ${this.#timeoutMs} ms`))
      }, this.#timeoutMs)
      this.#waiting.push(take)
    })
  }
}

/** How many connections carry acknowledged writes (to each primary, on a cluster): each holds one write and its WAIT at a time. */
const WRITE_CONNECTIONS = 8

/** Where the writes that wait for replicas go: a pool of connections to the one server, or a pool to each primary of a cluster. */
type AcknowledgedWrites = Writers | ShardWriters<Writer>

function acknowledgedWrites(
  redis: RedisClient,
  timeoutMs: number,
  options: RedisIdempotencyStoreOptions,
  eviction: EvictionWatch,
): AcknowledgedWrites {
  // A WAIT answers within its own timeout: each connection's allows for that and the write before it.
  const settings = { commandTimeoutMs: 2 * timeoutMs, onError: options.onError }
  const pool = (open: () => Redis) => new Writers(open, WRITE_CONNECTIONS, timeoutMs)
  if (redis.isCluster) {
    const cluster = redis as Cluster
    return new ShardWriters(
      cluster,
      (node) => pool(() => eviction.add(connectNode(cluster, node, settings))),
      options.onRedirection,
    )
  }
  return pool(() => eviction.add(duplicateRedis(redis as Redis, settings)))
}

const IN_FLIGHT: Claim = Object.freeze({ state: 'inFlight' })
const MISMATCH: Claim = Object.freeze({ state: 'mismatch' })
const UNKNOWN_KEY: Claim = Object.freeze({ state: 'unknownKey' })

/** A release that failed every attempt: the claim holds its key until it expires, although its payment was never forwarded. */
function releaseFailed(attempts: number, cause: unknown): CodedError<'ERELEASE'> {
  return new CodedError(
    'ERELEASE',
    `a release failed ${attempts} times, so its key stays held until the claim expires: ${(cause as Error).message}`,
  )
}

/** A record that failed every attempt: past its window the claim answers as the unknown outcome, never the answer. */
function recordFailed(attempts: number, cause: unknown): CodedError<'ERECORD'> {
  return new CodedError(
    'ERECORD',
    `a record failed ${attempts} times, so its key answers as the unknown outcome once its window ends: ${(cause as Error).message}`,
  )
}

/**
 * The store shared by every gateway on one Redis (through Sentinel or not) or
 * one Redis Cluster, so a retry that lands on
 * another replica is still replayed. It owns its client: `close()` quits it.
 * A command fails within the client's command timeout while Redis is down,
 * and the same instance works again once Redis is back. With `replicas`,
 * claims and records also wait for that many replicas (docs/idempotency.md).
 * The client never sends a command twice (`autoResendUnfulfilledCommands` off,
 * redis-client.ts); each command below says whether repeating it is safe.
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  /** The client of claims (without replicas) and releases: one server's, or a Redis Cluster's. */
  readonly redis: RedisClient
  readonly #client: Connection
  readonly #cluster: boolean
  readonly #options: RedisIdempotencyStoreOptions
  readonly #replicas: number
  readonly #waitMs: number
  readonly #writers: AcknowledgedWrites | undefined
  readonly #retry: ReleaseRetry
  readonly #eviction: EvictionWatch
  /** The pauses of releases and records waiting for their next attempt: cut short by `close`. */
  readonly #pauses = new Set<() => void>()
  /** The releases and records not landed yet: `close` waits for their last attempt before it quits the connections. */
  readonly #pending = new Set<Promise<void>>()
  #closed = false

  constructor(redis: RedisClient, options: RedisIdempotencyStoreOptions) {
    this.redis = redis
    this.#client = withScripts(redis)
    this.#cluster = redis.isCluster
    this.#options = options
    this.#replicas = options.replicas ?? 0
    this.#waitMs = options.commandTimeoutMs ?? IDEMPOTENCY_DEFAULTS.commandTimeoutMs
    this.#eviction = new EvictionWatch(redis, options.policyRecheckMs)
    this.#writers = this.#replicas > 0 ? acknowledgedWrites(redis, this.#waitMs, options, this.#eviction) : undefined
    this.#retry = options.releaseRetry ?? RELEASE_RETRY
  }

  /**
   * Once connected (or after `timeoutMs`) and each server's policy read, the refusal of a server that may evict keys:
   * `serve` refuses to start on one (docs/idempotency.md). Undefined when none was read so.
   */
  async evicting(timeoutMs: number = IDEMPOTENCY_DEFAULTS.commandTimeoutMs): Promise<CodedError | undefined> {
    await this.ready(timeoutMs)
    return this.#eviction.evicting
  }

  /** Resolves true once connected (commands sent before then reject), false after `timeoutMs`; never rejects. */
  async ready(timeoutMs: number = IDEMPOTENCY_DEFAULTS.commandTimeoutMs): Promise<boolean> {
    const ready = await Promise.all([
      whenReady(this.redis, timeoutMs),
      ...((await this.#writers?.ready(timeoutMs)) ?? []),
    ])
    // Ready to take claims: each connection's server read (eviction.ts).
    await this.#eviction.settled()
    return ready.every(Boolean)
  }

  /**
   * A stored fingerprint of another form may be the payment's: a record made by a gateway of the fleet before
   * an upgrade or a key rotation lives its TTL in the shared store (docs/idempotency-reference.md, keyed fingerprints).
   */
  async claim(key: string, fingerprint: string, matches?: Matches): Promise<Claim> {
    const token = randomUUID()
    const stored = redisKey(key, this.#cluster)
    const writers = this.#writers
    const found =
      writers === undefined
        ? await this.#claimOn(this.#client, stored, fingerprint, token)
        : await writers.with(stored, (connection) => this.#claimOn(connection, stored, fingerprint, token))
    if (found === null) return { state: 'claimed', token }
    const value = JSON.parse(found[0]) as Stored
    const unknown = value.state === 'inFlight' && found[1] === 1
    if (value.state === 'inFlight' && !unknown) return IN_FLIGHT
    const same = sameFingerprint(value.fingerprint, fingerprint, matches)
    if (same !== true) return same === false ? MISMATCH : UNKNOWN_KEY
    if (value.state === 'inFlight') return { state: 'recorded', answer: this.#options.unknownAnswer }
    const { status, headers, body } = value.answer
    return { state: 'recorded', answer: { status, headers, body: Buffer.from(body, 'base64') } }
  }

  async record(key: string, token: string, answer: RecordedAnswer): Promise<void> {
    const kept = keptAnswer(answer, this.#options)
    const json = JSON.stringify({ status: kept.status, headers: kept.headers, body: kept.body.toString('base64') })
    const stored = redisKey(key, this.#cluster)
    const record = async (connection: Connection) => {
      // Safe to repeat: once recorded, the claim is no longer in flight, so a repeat changes nothing and answers 0.
      if ((await connection.paymentsGateIdemRecord(stored, token, json, this.#options.ttlMs)) === 1)
        await this.#acknowledged(connection)
    }
    const writers = this.#writers
    await this.#retried(this.#client, writers === undefined ? record : () => writers.with(stored, record), recordFailed)
  }

  /** Resolves once the release landed (or the claim expired); rejects with an `ERELEASE` error when every attempt failed or the store closed first. */
  async release(key: string, token: string): Promise<void> {
    await this.#release(this.#client, redisKey(key, this.#cluster), token)
  }

  /** Deletes only a claim in flight holding this token, which no one else has: safe to repeat. */
  #release(first: Connection, key: string, token: string): Promise<void> {
    return this.#retried(first, (connection) => connection.paymentsGateIdemRelease(key, token), releaseFailed)
  }

  async peek(key: string, fingerprint: string, matches?: Matches): Promise<Peek> {
    // Safe to repeat: it only reads.
    const found = await this.#client.paymentsGateIdemPeek(redisKey(key, this.#cluster))
    if (found === null) return 'free'
    const stored = JSON.parse(found[0]) as Stored
    // A claim past its window is an unknown outcome, replayed as recorded (docs/idempotency.md).
    if (stored.state === 'inFlight' && found[1] === 0) return 'inFlight'
    return recordedPeek(sameFingerprint(stored.fingerprint, fingerprint, matches))
  }

  /**
   * Quits the connections, once each release or record not landed yet has made one last attempt: one that fails
   * it gives up (`ERELEASE`, `ERECORD`).
   */
  async close(): Promise<void> {
    this.#closed = true
    for (const resume of this.#pauses) resume()
    await Promise.allSettled(this.#pending)
    await Promise.all([closeRedisClient(this.redis), this.#writers?.close()])
  }

  async #claimOn(
    connection: Connection,
    key: string,
    fingerprint: string,
    token: string,
  ): Promise<[string, number] | null> {
    // Not sent at all: nothing to release (while Redis is down, every payment would leave a release to try again).
    if (connection.status !== 'ready')
      throw new CodedError('ENOTCONNECTED', 'Redis is not connected: the claim was not sent')
    const { inFlightMs, ttlMs } = this.#options
    try {
      // Safe to repeat: a repeat finds its own token in flight and answers claimed again (the script above).
      const found = await connection.paymentsGateIdemClaim(key, fingerprint, token, inFlightMs, ttlMs)
      // Asked once its answer is in: a connection asks its server's policy as soon as it is ready, before any claim
      // goes out on it, so by now that answer is in too. A claim on a server that may evict keys is let go (below).
      const refusal = this.#eviction.refusalOf(connection)
      if (refusal !== undefined) throw refusal
      if (found === null) await this.#acknowledged(connection)
      return found
    } catch (error) {
      // A claim that timed out may have landed, and one the replicas did not acknowledge did: the
      // payment is not forwarded, so its claim is let go, first on the same connection, so after it. A claim a
      // cluster node redirected did not run, and is sent again to the node named with the same token
      // (redis-cluster.ts): a release would take that claim back.
      if (!notRun(error))
        this.#release(connection, key, token).catch((failed: Error) => this.#options.onError?.(failed))
      throw error
    }
  }

  /**
   * Runs `attempt`, safe to repeat, until it lands: the first attempt on `first` (after a claim on it), tried again
   * after each failure (reported), with `releaseRetry`'s backoff, on the store's client, until the attempts run out
   * (`failed`'s error), the claim has expired (nothing left to do), or the store closes: then once more, as the last
   * attempt, since a release or a record given up leaves its payment's key wrong for a window and a TTL
   * (docs/idempotency-reference.md, the in-flight window).
   */
  async #retried(
    first: Connection,
    attempt: (connection: Connection) => Promise<unknown>,
    failed: (attempts: number, cause: unknown) => Error,
  ): Promise<void> {
    const landing = this.#attempts(first, attempt, failed)
    this.#pending.add(landing)
    try {
      await landing
    } finally {
      this.#pending.delete(landing)
    }
  }

  async #attempts(
    first: Connection,
    attempt: (connection: Connection) => Promise<unknown>,
    failed: (attempts: number, cause: unknown) => Error,
  ): Promise<void> {
    const { attempts, firstDelayMs, maxDelayMs } = this.#retry
    // The claim was written before this call, so it is gone by then at the latest.
    const expires = performance.now() + this.#options.inFlightMs + this.#options.ttlMs
    let connection = first
    let delayMs = firstDelayMs
    let failure: unknown
    let tries = 0
    for (;;) {
      const last = this.#closed
      tries++
      try {
        await attempt(connection)
        return
      } catch (error) {
        failure = error
      }
      if (tries === attempts || last) break
      this.#options.onError?.(failure as Error)
      await this.#pause(delayMs)
      if (!this.#closed && performance.now() >= expires) return
      connection = this.#client
      delayMs = Math.min(2 * delayMs, maxDelayMs)
    }
    throw failed(tries, failure)
  }

  /** Waits `ms`, or until the store closes. */
  #pause(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve()
    return new Promise((resolve) => {
      const resume = () => {
        clearTimeout(timer)
        this.#pauses.delete(resume)
        resolve()
      }
      const timer = setTimeout(resume, ms)
      this.#pauses.add(resume)
    })
  }

  /** Waits for the replicas to acknowledge this connection's writes; throws an `EREPLICAS` error when too few did in time. */
  async #acknowledged(connection: Connection): Promise<void> {
    if (this.#replicas === 0) return
    // Safe to repeat: it only waits.
    const acknowledged = await connection.wait(this.#replicas, this.#waitMs)
    if (acknowledged < this.#replicas) {
      throw new CodedError(
        'EREPLICAS',
        `${acknowledged} of ${this.#replicas} replicas acknowledged the write within ${this.#waitMs} ms`,
      )
    }
  }
}
