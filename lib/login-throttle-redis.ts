import type { Redis } from 'ioredis'
import { THROTTLE_DEFAULTS } from './defaults.js'
import {
  definedOnly,
  MemoryLoginThrottle,
  type LoginAttempt,
  type LoginThrottle,
  type LoginThrottleOptions,
} from './login-throttle.js'

/** Every key this throttle writes starts so; then `failures:` or `locked:` and the username. */
export const LOGIN_KEY_PREFIX = 'payments-gate:login:'

export interface RedisLoginThrottleOptions extends LoginThrottleOptions {
  /** Told when Redis could not be reached and this process counted alone for that call. */
  onError?: (error: Error) => void
}

/**
 * One failure, atomically: count it in a window that starts with the first
 * failure, and at the limit lock the username for the cool-down and start
 * the count again. Not safe to repeat (a repeat counts one failure twice), so
 * it runs at most once: the client must never send a command again on its own.
 */
const FAILURE = `
local failures = redis.call('INCR', KEYS[2])
if failures == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
if failures >= tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[3])
  redis.call('DEL', KEYS[2])
end
return failures
`

interface Scripts {
  paymentsGateLoginFailure(
    locked: string,
    failures: string,
    max: number,
    windowMs: number,
    coolDownMs: number,
  ): Promise<number>
}

/**
 * The failed-login throttle shared by every gateway on one Redis: ten wrong
 * passwords are ten across the fleet. Verifications still running are counted
 * by each process for itself, as the memory throttle does. While Redis cannot
 * be reached, each call falls back to this process's own count (never a
 * lockout of everybody, never a crash) and `onError` is told. The client
 * given must have ioredis's `autoResendUnfulfilledCommands` off, as
 * `createRedisClient`'s has: a failure whose reply a lost connection cut off
 * may have been counted, and is not sent again.
 */
export class RedisLoginThrottle implements LoginThrottle {
  readonly #redis: Redis
  readonly #scripts: Scripts
  readonly #fallback: MemoryLoginThrottle
  readonly #onError: (error: Error) => void
  readonly #maxFailures: number
  readonly #failureWindowMs: number
  readonly #coolDownMs: number
  readonly #pending = new Map<string, number>()

  constructor(redis: Redis, options: RedisLoginThrottleOptions = {}) {
    const settings = { ...THROTTLE_DEFAULTS, ...definedOnly(options) }
    redis.defineCommand('paymentsGateLoginFailure', { numberOfKeys: 2, lua: FAILURE })
    this.#redis = redis
    this.#scripts = redis as unknown as Scripts
    this.#fallback = new MemoryLoginThrottle(options)
    this.#onError = options.onError ?? (() => {})
    this.#maxFailures = settings.maxFailures
    this.#failureWindowMs = settings.failureWindowMs
    this.#coolDownMs = settings.coolDownMs
  }

  async admit(username: string): Promise<LoginAttempt | undefined> {
    let found: (string | null)[]
    try {
      // Safe to repeat: it only reads.
      found = await this.#redis.mget(LOGIN_KEY_PREFIX + 'locked:' + username, LOGIN_KEY_PREFIX + 'failures:' + username)
    } catch (error) {
      this.#onError(error as Error)
      return this.#fallback.admit(username)
    }
    const [locked, failures] = found
    const pending = this.#pending.get(username) ?? 0
    if (locked !== null || Number(failures ?? 0) + pending >= this.#maxFailures) return undefined
    this.#pending.set(username, pending + 1)
    return { settle: (succeeded) => this.#settle(username, succeeded) }
  }

  async clear(username: string): Promise<void> {
    this.#fallback.clear(username)
    try {
      // Safe to repeat: a second DEL finds nothing.
      await this.#redis.del(LOGIN_KEY_PREFIX + 'locked:' + username, LOGIN_KEY_PREFIX + 'failures:' + username)
    } catch (error) {
      this.#onError(error as Error)
    }
  }

  async #settle(username: string, succeeded: boolean | undefined): Promise<void> {
    const pending = (this.#pending.get(username) as number) - 1
    if (pending === 0) this.#pending.delete(username)
    else this.#pending.set(username, pending)
    if (succeeded === undefined) return
    const failures = LOGIN_KEY_PREFIX + 'failures:' + username
    try {
      // Safe to repeat: a second DEL finds nothing.
      if (succeeded) await this.#redis.del(failures)
      else {
        const locked = LOGIN_KEY_PREFIX + 'locked:' + username
        // Runs at most once (the script above).
        await this.#scripts.paymentsGateLoginFailure(
          locked,
          failures,
          this.#maxFailures,
          this.#failureWindowMs,
          this.#coolDownMs,
        )
      }
    } catch (error) {
      this.#onError(error as Error)
      void this.#fallback.admit(username)?.settle(succeeded)
    }
  }
}
