import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { keptAnswer } from './answer-size.js'
import { closeRedisClient, whenReady } from './redis-client.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import type { Claim, IdempotencyStore, IdempotencyStoreOptions, Peek, RecordedAnswer } from './store.js'

/** Every key this store writes starts so, to share a Redis with other uses. */
export const REDIS_KEY_PREFIX = 'payments-gate:idem:'

/** A key's value in Redis: a claim in flight, or an answer recorded (body in base64). */
type Stored =
  | { readonly state: 'inFlight'; readonly fingerprint: string; readonly token: string }
  | {
      readonly state: 'recorded'
      readonly fingerprint: string
      readonly token: string
      readonly answer: { readonly status: number; readonly headers: readonly string[]; readonly body: string }
    }

/**
 * Each script runs atomically in Redis, so no other gateway acts between its
 * read and its write: the claim is a `SET NX PX` that returns what was there
 * instead; record and release act only for the claim's owner. Record keeps
 * the claim's fingerprint and nests the answer, JSON built by the caller,
 * as it is (cjson would turn an empty list of headers into an object).
 */
const CLAIM = `
local found = redis.call('GET', KEYS[1])
if found then return found end
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
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
  paymentsGateIdemClaim(key: string, value: string, inFlightMs: number): Promise<string | null>
  paymentsGateIdemRecord(key: string, token: string, answer: string, ttlMs: number): Promise<number>
  paymentsGateIdemRelease(key: string, token: string): Promise<number>
}

const IN_FLIGHT: Claim = Object.freeze({ state: 'inFlight' })
const MISMATCH: Claim = Object.freeze({ state: 'mismatch' })

/**
 * The store shared by every gateway on one Redis, so a retry that lands on
 * another replica is still replayed. It owns its client: `close()` quits it.
 * A command fails within the client's command timeout while Redis is down,
 * and the same instance works again once Redis is back.
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  /** The client, to share with the login throttle (lib/login-throttle-redis.ts). */
  readonly redis: Redis
  readonly #scripts: Scripts
  readonly #options: IdempotencyStoreOptions

  constructor(redis: Redis, options: IdempotencyStoreOptions) {
    redis.defineCommand('paymentsGateIdemClaim', { numberOfKeys: 1, lua: CLAIM })
    redis.defineCommand('paymentsGateIdemRecord', { numberOfKeys: 1, lua: RECORD })
    redis.defineCommand('paymentsGateIdemRelease', { numberOfKeys: 1, lua: RELEASE })
    this.redis = redis
    this.#scripts = redis as unknown as Scripts
    this.#options = options
  }

  /** Resolves true once connected (commands sent before then reject), false after `timeoutMs`; never rejects. */
  ready(timeoutMs: number = IDEMPOTENCY_DEFAULTS.commandTimeoutMs): Promise<boolean> {
    return whenReady(this.redis, timeoutMs)
  }

  async claim(key: string, fingerprint: string): Promise<Claim> {
    const token = randomUUID()
    const claim: Stored = { state: 'inFlight', fingerprint, token }
    const found = await this.#scripts.paymentsGateIdemClaim(REDIS_KEY_PREFIX + key, JSON.stringify(claim), this.#options.inFlightMs)
    if (found === null) return { state: 'claimed', token }
    const stored = JSON.parse(found) as Stored
    if (stored.state === 'inFlight') return IN_FLIGHT
    if (stored.fingerprint !== fingerprint) return MISMATCH
    const { status, headers, body } = stored.answer
    return { state: 'recorded', answer: { status, headers, body: Buffer.from(body, 'base64') } }
  }

  async record(key: string, token: string, answer: RecordedAnswer): Promise<void> {
    const kept = keptAnswer(answer, this.#options)
    const json = JSON.stringify({ status: kept.status, headers: kept.headers, body: kept.body.toString('base64') })
    await this.#scripts.paymentsGateIdemRecord(REDIS_KEY_PREFIX + key, token, json, this.#options.ttlMs)
  }

  async release(key: string, token: string): Promise<void> {
    await this.#scripts.paymentsGateIdemRelease(REDIS_KEY_PREFIX + key, token)
  }

  async peek(key: string, fingerprint: string): Promise<Peek> {
    const found = await this.redis.get(REDIS_KEY_PREFIX + key)
    if (found === null) return 'free'
    const stored = JSON.parse(found) as Stored
    if (stored.state === 'inFlight') return 'inFlight'
    return stored.fingerprint === fingerprint ? 'recorded' : 'mismatch'
  }

  async close(): Promise<void> {
    await closeRedisClient(this.redis)
  }
}
