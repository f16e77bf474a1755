import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { CodedError } from '../coded-error.js'
import { keptAnswer } from './answer-size.js'
import { closeRedisClient, reportErrors, whenReady } from './redis-client.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import type { Claim, IdempotencyStore, IdempotencyStoreOptions, Peek, RecordedAnswer } from './store.js'

/** Every key this store writes starts so, to share a Redis with other uses. */
export const REDIS_KEY_PREFIX = 'payments-gate:idem:'

export interface RedisIdempotencyStoreOptions extends IdempotencyStoreOptions {
  /** Replicas that must acknowledge a claim or a record (Redis `WAIT`) before it counts. Default 0. */
  replicas?: number
  /** Longest wait for one command, and for the replicas' acknowledgement, in ms. Default 1000. */
  commandTimeoutMs?: number
  /** Told of the errors of the connections this store opens for acknowledged writes. */
  onError?: (error: Error) => void
}

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
 * a TTL). Record and release act only for the claim's owner, while no answer
 * is recorded, also past the window: a late answer replaces the unknown one.
 * Record keeps the claim's fingerprint and nests the answer, JSON built by
 * the caller, as it is (cjson would turn an empty list of headers into an object).
 */
const LOOK = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local found = redis.call('GET', KEYS[1])
if found then
  local value = cjson.decode(found)
  if value.state == 'inFlight' and now >= value.deadline then return {found, 1} end
  return {found, 0}
end
`
const PEEK = `${LOOK}
return false
`
const CLAIM = `${LOOK}
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
  paymentsGateIdemClaim(key: string, fingerprint: string, token: string, inFlightMs: number, ttlMs: number): Promise<[string, number] | null>
  paymentsGateIdemRecord(key: string, token: string, answer: string, ttlMs: number): Promise<number>
  paymentsGateIdemRelease(key: string, token: string): Promise<number>
  paymentsGateIdemPeek(key: string): Promise<[string, number] | null>
}

type Connection = Redis & Scripts

function withScripts(redis: Redis): Connection {
  redis.defineCommand('paymentsGateIdemClaim', { numberOfKeys: 1, lua: CLAIM })
  redis.defineCommand('paymentsGateIdemRecord', { numberOfKeys: 1, lua: RECORD })
  redis.defineCommand('paymentsGateIdemRelease', { numberOfKeys: 1, lua: RELEASE })
  redis.defineCommand('paymentsGateIdemPeek', { numberOfKeys: 1, lua: PEEK })
  return redis as Connection
}

/**
 * Connections for writes that wait for replicas. `WAIT` blocks its
 * connection until the replicas answer, and acknowledges that connection's
 * writes, so each write takes a connection of its own for itself and its
 * `WAIT`: a slow replica holds these, never the client the login throttle and
 * the releases share, and a write that finds none free within the command
 * timeout fails instead of queuing behind another's `WAIT`.
 */
class Writers {
  readonly #all: Connection[]
  readonly #idle: Connection[]
  readonly #waiting: ((connection: Connection) => void)[] = []
  readonly #timeoutMs: number

  constructor(redis: Redis, size: number, timeoutMs: number, onError: ((error: Error) => void) | undefined) {
    // A WAIT answers within its own timeout: the connection's allows for that and the write before it.
    this.#all = Array.from({ length: size }, () => {
      const connection = redis.duplicate({ commandTimeout: 2 * timeoutMs })
      reportErrors(connection, onError)
      return withScripts(connection)
    })
    this.#idle = [...this.#all]
    this.#timeoutMs = timeoutMs
  }

  async with<T>(run: (connection: Connection) => Promise<T>): Promise<T> {
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

  #free(): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const take = (connection: Connection) => {
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

/** How many connections carry acknowledged writes: each holds one write and its WAIT at a time. */
const WRITE_CONNECTIONS = 8

const IN_FLIGHT: Claim = Object.freeze({ state: 'inFlight' })
const MISMATCH: Claim = Object.freeze({ state: 'mismatch' })
const ignore = () => {}

/**
 * The store shared by every gateway on one Redis, so a retry that lands on
 * another replica is still replayed. It owns its client: `close()` quits it.
 * A command fails within the client's command timeout while Redis is down,
 * and the same instance works again once Redis is back. With `replicas`,
 * claims and records also wait for that many replicas (docs/idempotency.md).
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  /** The client of claims (without replicas) and releases. */
  readonly redis: Redis
  readonly #client: Connection
  readonly #options: RedisIdempotencyStoreOptions
  readonly #replicas: number
  readonly #waitMs: number
  readonly #writers: Writers | undefined

  constructor(redis: Redis, options: RedisIdempotencyStoreOptions) {
    this.redis = redis
    this.#client = withScripts(redis)
    this.#options = options
    this.#replicas = options.replicas ?? 0
    this.#waitMs = options.commandTimeoutMs ?? IDEMPOTENCY_DEFAULTS.commandTimeoutMs
    this.#writers = this.#replicas > 0 ? new Writers(redis, WRITE_CONNECTIONS, this.#waitMs, options.onError) : undefined
  }

  /** Resolves true once connected (commands sent before then reject), false after `timeoutMs`; never rejects. */
  async ready(timeoutMs: number = IDEMPOTENCY_DEFAULTS.commandTimeoutMs): Promise<boolean> {
    const ready = await Promise.all([whenReady(this.redis, timeoutMs), ...((await this.#writers?.ready(timeoutMs)) ?? [])])
    return ready.every(Boolean)
  }

  async claim(key: string, fingerprint: string): Promise<Claim> {
    const token = randomUUID()
    const writers = this.#writers
    const found =
      writers === undefined
        ? await this.#claimOn(this.#client, key, fingerprint, token)
        : await writers.with((connection) => this.#claimOn(connection, key, fingerprint, token))
    if (found === null) return { state: 'claimed', token }
    const stored = JSON.parse(found[0]) as Stored
    const unknown = stored.state === 'inFlight' && found[1] === 1
    if (stored.state === 'inFlight' && !unknown) return IN_FLIGHT
    if (stored.fingerprint !== fingerprint) return MISMATCH
    if (stored.state === 'inFlight') return { state: 'recorded', answer: this.#options.unknownAnswer }
    const { status, headers, body } = stored.answer
    return { state: 'recorded', answer: { status, headers, body: Buffer.from(body, 'base64') } }
  }

  async record(key: string, token: string, answer: RecordedAnswer): Promise<void> {
    const kept = keptAnswer(answer, this.#options)
    const json = JSON.stringify({ status: kept.status, headers: kept.headers, body: kept.body.toString('base64') })
    const record = async (connection: Connection) => {
      if ((await connection.paymentsGateIdemRecord(REDIS_KEY_PREFIX + key, token, json, this.#options.ttlMs)) === 1) await this.#acknowledged(connection)
    }
    await (this.#writers === undefined ? record(this.#client) : this.#writers.with(record))
  }

  async release(key: string, token: string): Promise<void> {
    await this.#client.paymentsGateIdemRelease(REDIS_KEY_PREFIX + key, token)
  }

  async peek(key: string, fingerprint: string): Promise<Peek> {
    const found = await this.#client.paymentsGateIdemPeek(REDIS_KEY_PREFIX + key)
    if (found === null) return 'free'
    const stored = JSON.parse(found[0]) as Stored
    // A claim past its window is an unknown outcome, replayed as recorded (docs/idempotency.md).
    if (stored.state === 'inFlight' && found[1] === 0) return 'inFlight'
    return stored.fingerprint === fingerprint ? 'recorded' : 'mismatch'
  }

  async close(): Promise<void> {
    await Promise.all([closeRedisClient(this.redis), this.#writers?.close()])
  }

  async #claimOn(connection: Connection, key: string, fingerprint: string, token: string): Promise<[string, number] | null> {
    const { inFlightMs, ttlMs } = this.#options
    try {
      const found = await connection.paymentsGateIdemClaim(REDIS_KEY_PREFIX + key, fingerprint, token, inFlightMs, ttlMs)
      if (found === null) await this.#acknowledged(connection)
      return found
    } catch (error) {
      // A claim that timed out may have landed, and one the replicas did not acknowledge did: the
      // payment is not forwarded, so its claim is let go, on the same connection, so after it.
      connection.paymentsGateIdemRelease(REDIS_KEY_PREFIX + key, token).catch(ignore)
      throw error
    }
  }

  /** Waits for the replicas to acknowledge this connection's writes; throws an `EREPLICAS` error when too few did in time. */
  async #acknowledged(connection: Connection): Promise<void> {
    if (this.#replicas === 0) return
    const acknowledged = await connection.wait(this.#replicas, this.#waitMs)
    if (acknowledged < this.#replicas) {
      throw new CodedError('EREPLICAS', `${acknowledged} of ${this.#replicas} replicas acknowledged the write within ${this.#waitMs} ms`)
    }
  }
}
