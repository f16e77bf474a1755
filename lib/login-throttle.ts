import { LRUCache } from 'lru-cache'
import { THROTTLE_DEFAULTS } from './defaults.js'

/**
 * The failed-login throttle of BasicAuth (docs/credentials.md): failures are
 * counted per username, known or not, and a username that failed too often is
 * refused for a while without hashing anything, so the slow hash cannot be
 * used to burn CPU nor to guess passwords quickly.
 */
export interface LoginThrottle {
  /**
   * Whether a verification of this username may start: an attempt to settle
   * once verified, or undefined when the username is refused. An attempt is
   * a reservation: until settled it counts against the limit as a failure
   * would, so a burst cannot start more verifications than the failures left,
   * but it never locks the username by itself. Synchronous when the throttle
   * can answer without I/O.
   */
  admit(username: string): LoginAttempt | undefined | Promise<LoginAttempt | undefined>
  /**
   * Forgets the username's failures and lifts its lock: a reload added or
   * changed the user (docs/credentials.md). The attempts still running keep
   * their reservations. Never rejects.
   */
  clear(username: string): void | Promise<void>
}

/** One admitted verification, counted as running until settled. */
export interface LoginAttempt {
  /**
   * Called once, with whether the password matched, or undefined when nothing
   * was verified (the reservation is given back, nothing counted). A success
   * forgets the confirmed failures, not the other attempts' reservations.
   * Never rejects.
   */
  settle(succeeded: boolean | undefined): void | Promise<void>
}

export interface LoginThrottleOptions {
  /** Failed attempts of one username, within `failureWindowMs`, that lock it out. Default 10. */
  maxFailures?: number
  /** Window over which failures are counted, in ms. Default 60000. */
  failureWindowMs?: number
  /** How long a locked-out username is refused without verifying anything, in ms. Default 60000. */
  coolDownMs?: number
  /** Most usernames whose failures are tracked. Default 10000. */
  trackedUsersMax?: number
  /** The clock, in ms; for tests. Default `performance.now`. */
  now?: () => number
}

/** Failures of one username in its current window; `pending` counts verifications still running. */
interface FailureState {
  windowStart: number
  failures: number
  lockedUntil: number
  pending: number
}

/**
 * The throttle of one process: answers synchronously. A reservation lives as
 * long as its verification, which this process always settles.
 */
export class MemoryLoginThrottle implements LoginThrottle {
  /**
   * Made at the first verification: lru-cache fills an array slot for each entry it may hold, which a gate that never
   * verifies a password (or, without `--trust-proxy`, the throttle of addresses) would pay for nothing.
   */
  #failures: LRUCache<string, FailureState> | undefined
  readonly #trackedUsersMax: number
  readonly #now: () => number
  readonly #maxFailures: number
  readonly #failureWindowMs: number
  readonly #coolDownMs: number

  constructor(options: LoginThrottleOptions = {}) {
    const settings = { ...THROTTLE_DEFAULTS, ...definedOnly(options) }
    this.#now = options.now ?? (() => performance.now())
    this.#trackedUsersMax = settings.trackedUsersMax
    this.#maxFailures = settings.maxFailures
    this.#failureWindowMs = settings.failureWindowMs
    this.#coolDownMs = settings.coolDownMs
  }

  admit(username: string): LoginAttempt | undefined {
    const state = this.#failureState(username)
    // Verifications still running count against the limit, so a burst cannot start more hashes.
    if (state.lockedUntil > this.#now() || state.failures + state.pending >= this.#maxFailures) return undefined
    state.pending++
    return {
      settle: (succeeded) => {
        state.pending--
        if (succeeded === true) this.#forget(state)
        else if (succeeded === false) this.#recordFailure(username, state)
      },
    }
  }

  clear(username: string): void {
    const state = this.#failures?.get(username)
    if (state !== undefined) this.#forget(state)
  }

  /** Failures and lock forgotten; the attempts still running stay counted. */
  #forget(state: FailureState): void {
    state.windowStart = this.#now()
    state.failures = 0
    state.lockedUntil = 0
  }

  /** The username's failures in the current window; a new window once the last one is over. */
  #failureState(username: string): FailureState {
    const now = this.#now()
    const table = this.#table()
    const state = table.get(username)
    if (state === undefined) {
      const fresh: FailureState = { windowStart: now, failures: 0, lockedUntil: 0, pending: 0 }
      table.set(username, fresh)
      return fresh
    }
    if (state.lockedUntil <= now && now - state.windowStart >= this.#failureWindowMs) {
      state.windowStart = now
      state.failures = 0
    }
    return state
  }

  #recordFailure(username: string, state: FailureState): void {
    state.failures++
    if (state.failures >= this.#maxFailures) {
      state.lockedUntil = this.#now() + this.#coolDownMs
      state.failures = 0
      state.windowStart = state.lockedUntil
    }
    this.#table().set(username, state)
  }

  #table(): LRUCache<string, FailureState> {
    return (this.#failures ??= new LRUCache({ max: this.#trackedUsersMax }))
  }
}

export function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>
}
