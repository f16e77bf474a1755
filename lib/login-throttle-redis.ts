import { randomUUID } from 'node:crypto'
import { THROTTLE_DEFAULTS } from './defaults.js'
import { hashTag } from './hash-tag.js'
import type { RedisClient } from './idempotency/redis-client.js'
import {
  definedOnly,
  MemoryLoginThrottle,
  type LoginAttempt,
  type LoginThrottle,
  type LoginThrottleOptions,
} from './login-throttle.js'

/**
 * Every key this throttle writes starts so; then `failures:`, `locked:` or `reserved:` and the username, or on a
 * Redis Cluster the username as JSON in a hash tag (key.ts), so that a username's three keys share a slot.
 */
export const LOGIN_KEY_PREFIX = 'payments-gate:login:'

/** A username's keys: locked, failures, reserved. On one Redis as they always were (an upgrade never splits a fleet). */
export function loginKeys(username: string, cluster: boolean): [locked: string, failures: string, reserved: string] {
  const user = cluster ? hashTag(JSON.stringify(username)) : username
  return [
    `${LOGIN_KEY_PREFIX}locked:${user}`,
    `${LOGIN_KEY_PREFIX}failures:${user}`,
    `${LOGIN_KEY_PREFIX}reserved:${user}`,
  ]
}

export interface RedisLoginThrottleOptions extends LoginThrottleOptions {
  /** Told when Redis could not be reached and this process counted alone for that call. */
  onError?: (error: Error) => void
}

/**
 * A reservation, atomically, by Redis's clock: refused while the username is
 * locked or its failures and the reservations still held reach the limit;
 * otherwise one more member of the username's set, scored with its expiry, so
 * that one a gateway never gave back (it died, or lost Redis) is dropped after
 * the failure window. A repeat (a client that sends a command again) finds its
 * own reservation counted, so it may refuse a login that the first admitted,
 * never admit more: the gateway's clients send it once.
 */
const RESERVE = `
if redis.call('GET', KEYS[1]) then return 0 end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if tonumber(redis.call('GET', KEYS[2]) or '0') + redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1
`

/**
 * A reservation settled, atomically: given back, and, for a failure, the
 * failure counted in a window that starts with the first one, at the limit the
 * username locked for the cool-down and the count started again; for a
 * success, the confirmed failures forgotten (the other reservations stay).
 * Only while its reservation is there: a repeat, which finds it gone, changes
 * nothing, so one failure is never counted twice, whoever sends it again
 * (a Redis Cluster client after a lost connection, a client of your own).
 */
const SETTLE = `
if redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then return 0 end
if ARGV[2] == 'failed' then
  local failures = redis.call('INCR', KEYS[2])
  if failures == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
  if failures >= tonumber(ARGV[3]) then
    redis.call('SET', KEYS[1], '1', 'PX', ARGV[5])
    redis.call('DEL', KEYS[2])
  end
elseif ARGV[2] == 'succeeded' then
  redis.call('DEL', KEYS[2])
end
return 1
`

/** How a verification ended, as the settle script reads it. */
type Outcome = 'failed' | 'succeeded' | 'none'

interface Scripts {
  paymentsGateLoginReserve(
    locked: string,
    failures: string,
    reserved: string,
    max: number,
    windowMs: number,
    token: string,
  ): Promise<number>
  paymentsGateLoginSettle(
    locked: string,
    failures: string,
    reserved: string,
    token: string,
    outcome: Outcome,
    max: number,
    windowMs: number,
    coolDownMs: number,
  ): Promise<number>
}

/**
 * The failed-login throttle shared by every gateway on one Redis (or Redis
 * Cluster): ten wrong passwords are ten across the fleet, and so are ten
 * verifications at once, since each reserves its place in Redis before it
 * hashes. While Redis cannot be reached, each call falls back to this process's
 * own count (never a lockout of everybody, never a crash) and `onError` is
 * told. The client given should never send a command again on its own
 * (ioredis's `autoResendUnfulfilledCommands` off; a Cluster client's
 * `retryDelayOnFailover` 0), as `createRedisClient`'s: a reservation sent
 * twice holds two places until the failure window ends.
 */
export class RedisLoginThrottle implements LoginThrottle {
  readonly #scripts: Scripts
  readonly #redis: RedisClient
  readonly #cluster: boolean
  readonly #fallback: MemoryLoginThrottle
  readonly #onError: (error: Error) => void
  readonly #maxFailures: number
  readonly #failureWindowMs: number
  readonly #coolDownMs: number

  constructor(redis: RedisClient, options: RedisLoginThrottleOptions = {}) {
    const settings = { ...THROTTLE_DEFAULTS, ...definedOnly(options) }
    redis.defineCommand('paymentsGateLoginReserve', { numberOfKeys: 3, lua: RESERVE })
    redis.defineCommand('paymentsGateLoginSettle', { numberOfKeys: 3, lua: SETTLE })
    this.#redis = redis
    this.#cluster = redis.isCluster
    this.#scripts = redis as unknown as Scripts
    this.#fallback = new MemoryLoginThrottle(options)
    this.#onError = options.onError ?? (() => {})
    this.#maxFailures = settings.maxFailures
    this.#failureWindowMs = settings.failureWindowMs
    this.#coolDownMs = settings.coolDownMs
  }

  async admit(username: string): Promise<LoginAttempt | undefined> {
    const token = randomUUID()
    const [locked, failures, reservations] = loginKeys(username, this.#cluster)
    let reserved: number
    try {
      // Runs at most once (the script above).
      reserved = await this.#scripts.paymentsGateLoginReserve(
        locked,
        failures,
        reservations,
        this.#maxFailures,
        this.#failureWindowMs,
        token,
      )
    } catch (error) {
      this.#onError(error as Error)
      return this.#fallback.admit(username)
    }
    if (reserved === 0) return undefined
    return { settle: (succeeded) => this.#settle(username, token, succeeded) }
  }

  async clear(username: string): Promise<void> {
    this.#fallback.clear(username)
    try {
      // Safe to repeat: a second DEL finds nothing. The reservations of verifications still running stay.
      const [locked, failures] = loginKeys(username, this.#cluster)
      await this.#redis.del(locked, failures)
    } catch (error) {
      this.#onError(error as Error)
    }
  }

  async #settle(username: string, token: string, succeeded: boolean | undefined): Promise<void> {
    try {
      // Safe to repeat (the script above).
      await this.#scripts.paymentsGateLoginSettle(
        ...loginKeys(username, this.#cluster),
        token,
        succeeded === undefined ? 'none' : succeeded ? 'succeeded' : 'failed',
        this.#maxFailures,
        this.#failureWindowMs,
        this.#coolDownMs,
      )
    } catch (error) {
      // The reservation left in Redis expires with the window.
      this.#onError(error as Error)
      void this.#fallback.admit(username)?.settle(succeeded)
    }
  }
}
