import { hash as digest } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { LRUCache } from 'lru-cache'
import { ACCESS_DENIED, type Authenticator, type Principal } from '../checks/auth.js'
import { CodedError } from '../coded-error.js'
import { CREDENTIAL_DEFAULTS } from '../defaults.js'
import { reject, type Rejection } from '../errors.js'
import { definedOnly, MemoryLoginThrottle, type LoginAttempt, type LoginThrottle } from '../login-throttle.js'
import { basicToken, parseToken } from './basic.js'
import { HashQueue } from './hash-queue.js'
import { KEY_BYTES, matches, parseHash, SALT_BYTES, scryptMemory, type ParsedHash } from './hash.js'
import { FailurePad } from './pad.js'

/** One user of the credentials file. */
export interface UserCredentials {
  readonly username: string
  /** The hash printed by `payments-gate hash-password`, never the clear password. */
  readonly password: string
  readonly entities: readonly string[]
}

export interface CredentialStoreOptions {
  /** Most successful checks remembered. Default 1000. */
  cacheMax?: number
  /** How long a successful check is remembered since it was last used, in ms. Default 300000 (5 minutes). */
  cacheTtlMs?: number
  /** Most password hashes running at once. Default 4. */
  hashConcurrency?: number
  /**
   * Most bytes of memory the hashes running at once may take, scrypt's
   * 128 * N * r bytes each: a user whose cost would take more, `hashConcurrency`
   * times over, is refused (`ECREDENTIALS`). Default 134217728 (128 MiB).
   */
  hashMemoryMax?: number
  /** Most checks waiting for a hash to start; beyond, 503 `serviceUnavailable` at once. Default 32. */
  hashQueueMax?: number
  /** Most of those waiting places one client address may hold, where the caller knows the address. Default 8. */
  clientQueueMax?: number
  /**
   * Failed attempts from one client address, within `failureWindowMs`, that
   * lock the address out for `coolDownMs`; counted only where the caller knows
   * the address (docs/credentials.md). Default 100.
   */
  addressMaxFailures?: number
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
  /** Resolves after that many ms of the clock; for tests. Default a timer. */
  wait?: (ms: number) => Promise<unknown>
  /**
   * Where failures are counted. Default: this process's memory, with the four
   * options above; a `RedisLoginThrottle` shares the count across gateways.
   */
  throttle?: LoginThrottle
}

interface User {
  readonly principal: Principal
  readonly hash: ParsedHash
  /** The hash as the file spells it, to tell a changed password at a reload. */
  readonly password: string
}

/**
 * The answer to a check that found every hash slot taken and the queue full
 * (docs/checks.md): retryable at once, rather than a wait that grows with
 * the flood.
 */
export const HASHING_IS_BUSY: Rejection = Object.freeze(
  reject('serviceUnavailable', {
    message: 'Too many logins are being verified. Retry after the time given in Retry-After.',
    headers: Object.freeze({ 'Retry-After': '1' }),
  }),
)

/**
 * Check 1: BasicAuth against the users of a credentials file. A successful
 * check is remembered under a SHA-256 digest of the header's credentials
 * (never the clear password), whatever the scheme's case and spaces, and
 * answered synchronously after that, so the slow hash is off the path of
 * repeated valid requests. Failures are counted per username, known or not,
 * and per client address where the caller knows it; a username or address
 * that failed too often is refused for a while without hashing anything. The
 * hashes that do run are bounded (`HashQueue`), so the slow hash cannot be
 * used to burn CPU nor to make real logins wait. `replace` swaps the users
 * for a reloaded file's (docs/credentials.md).
 */
export class CredentialStore implements Authenticator {
  #users = new Map<string, User>()
  readonly #cache: LRUCache<string, Principal>
  readonly #throttle: LoginThrottle
  /** Failures per client address: in this process only, as the address is what this process was told. */
  readonly #addresses: MemoryLoginThrottle
  readonly #hashes: HashQueue
  /** Concurrent checks of the same header share one verification. */
  readonly #inFlight = new Map<string, Promise<Principal | Rejection>>()
  readonly #pad = new FailurePad()
  readonly #now: () => number
  readonly #wait: (ms: number) => Promise<unknown>
  readonly #concurrency: number
  readonly #memoryMax: number
  /** The bytes one hash may take: the memory bound shared by the hashes that may run at once. */
  readonly #hashMemory: number
  #dummy!: ParsedHash

  constructor(users: Iterable<UserCredentials>, options: CredentialStoreOptions = {}) {
    const settings = { ...CREDENTIAL_DEFAULTS, ...definedOnly(options) }
    this.#concurrency = settings.hashConcurrency
    this.#memoryMax = settings.hashMemoryMax
    this.#hashMemory = Math.floor(settings.hashMemoryMax / settings.hashConcurrency)
    this.#install(users)
    const now = options.now ?? (() => performance.now())
    this.#now = now
    this.#wait = options.wait ?? sleep
    const perf = { now }
    // ttlResolution 0: read the clock on each look-up rather than arm a timer to memoize it. A check in use
    // stays remembered (updateAgeOnGet), so a client that keeps sending its header never meets the throttle.
    this.#cache = new LRUCache({
      max: settings.cacheMax,
      ttl: settings.cacheTtlMs,
      ttlResolution: 0,
      updateAgeOnGet: true,
      perf,
    })
    this.#throttle = options.throttle ?? new MemoryLoginThrottle({ ...settings, now })
    this.#addresses = new MemoryLoginThrottle({ ...settings, maxFailures: settings.addressMaxFailures, now })
    this.#hashes = new HashQueue(settings.hashConcurrency, settings.hashQueueMax, settings.clientQueueMax)
  }

  /** How many users the store knows. */
  get size(): number {
    return this.#users.size
  }

  /** Checks hashing (or, failed, waiting out the time a failure takes), and checks waiting for a turn. */
  get hashing(): { running: number; waiting: number } {
    return { running: this.#hashes.running, waiting: this.#hashes.waiting }
  }

  /**
   * The users of a reloaded file take the place of these, all at once, or none
   * of them when one is refused (an `ECREDENTIALS` error). A user removed, or
   * whose password or entities changed, is refused from now on even where its
   * check was cached; an unchanged user keeps its cached checks. The failed-login
   * throttle keeps its counts, but a user added or changed starts with none.
   * Resolves once the throttle has forgotten them.
   */
  replace(users: Iterable<UserCredentials>): Promise<void> {
    const renewed = this.#install(users)
    const stale: string[] = []
    this.#cache.forEach((principal, key) => {
      if (this.#users.get(principal.username)?.principal !== principal) stale.push(key)
    })
    for (const key of stale) this.#cache.delete(key)
    return Promise.all(renewed.map((username) => this.#throttle.clear(username))).then(() => undefined)
  }

  /** Puts the users in force; returns the usernames added or changed. */
  #install(users: Iterable<UserCredentials>): string[] {
    const next = new Map<string, User>()
    const renewed: string[] = []
    for (const user of users) {
      if (next.has(user.username)) throw new CodedError('ECREDENTIALS', `user "${user.username}" is listed twice`)
      const kept = this.#users.get(user.username)
      if (
        kept !== undefined &&
        kept.password === user.password &&
        sameEntities(kept.principal.entities, user.entities)
      ) {
        next.set(user.username, kept)
        continue
      }
      const hash = parseHash(user.password)
      if (hash === undefined) {
        throw new CodedError(
          'ECREDENTIALS',
          `user "${user.username}": password is not a hash from payments-gate hash-password`,
        )
      }
      // Node allocates scrypt's memory per hash, outside the JavaScript heap: the hashes that may run at once must
      // fit in the container, or the kernel kills the gateway mid-flood (docs/credentials.md, the memory a hash takes).
      if (scryptMemory(hash) > this.#hashMemory) {
        throw new CodedError(
          'ECREDENTIALS',
          `user "${user.username}": scrypt N=${hash.N}, r=${hash.r} takes ${mebibytes(scryptMemory(hash))} a hash, ` +
            `${mebibytes(scryptMemory(hash) * this.#concurrency)} for the ${this.#concurrency} that may run at once, ` +
            `above hashMemoryMax (${mebibytes(this.#memoryMax)}): hash its password again with ` +
            `payments-gate hash-password, or see docs/credentials.md for the bound`,
        )
      }
      const principal = Object.freeze({ username: user.username, entities: new Set(user.entities) })
      next.set(user.username, { principal, hash, password: user.password })
      renewed.push(user.username)
    }
    // An unknown username is verified against a hash at the dearest cost in force, so its answer takes what the
    // dearest user's takes (the pad evens out the cheaper ones). Nothing can match it: the user is unknown.
    this.#pad.install(Array.from(next.values(), (kept) => kept.hash))
    const { N, r, p } = this.#pad.dearest
    this.#dummy = { N, r, p, salt: Buffer.alloc(SALT_BYTES), hash: Buffer.alloc(KEY_BYTES) }
    this.#users = next
    return renewed
  }

  /**
   * `client` is the client's address where the caller can trust it (the
   * gateway with `--trust-proxy`): its failures are counted, and its checks
   * queue apart from other clients'. Without it, every check queues as one client.
   */
  authenticate(
    authorization: string | undefined,
    client?: string,
  ): Principal | Rejection | Promise<Principal | Rejection> {
    if (authorization === undefined) return ACCESS_DENIED
    const token = basicToken(authorization)
    if (token === undefined) return ACCESS_DENIED
    const key = digest('sha256', token, 'base64')
    const cached = this.#cache.get(key)
    if (cached !== undefined) return cached
    const running = this.#inFlight.get(key)
    if (running !== undefined) return running
    const credentials = parseToken(token)
    if (credentials === undefined) return ACCESS_DENIED
    // Decided before anything is counted; from here to entering the queue nothing waits, so the room stays.
    if (this.#hashes.full(client ?? '')) return HASHING_IS_BUSY
    const fromAddress = client === undefined ? NOT_COUNTED : this.#addresses.admit(client)
    if (fromAddress === undefined) return ACCESS_DENIED
    // A throttle that answers synchronously refuses a locked-out username without a promise.
    const admitted = this.#throttle.admit(credentials.username)
    if (admitted === undefined) {
      void fromAddress.settle(undefined)
      return ACCESS_DENIED
    }
    const turn = this.#hashes.enter(client ?? '')
    const verification = this.#verify(key, credentials.username, credentials.password, admitted, fromAddress, turn)
    this.#inFlight.set(key, verification)
    return verification
  }

  async #verify(
    key: string,
    username: string,
    password: string,
    admitted: LoginAttempt | Promise<LoginAttempt | undefined>,
    fromAddress: LoginAttempt,
    turn: Promise<() => void>,
  ): Promise<Principal | Rejection> {
    const end = await turn
    let principal: Principal | undefined
    /** Whether a hash ran and did not match: only then does the address count a failure. */
    let failed = false
    try {
      const attempt = await admitted
      if (attempt === undefined) return ACCESS_DENIED
      let user = this.#users.get(username)
      try {
        let due: number
        for (;;) {
          const hash = user?.hash ?? this.#dummy
          const start = this.#now()
          const ok = await matches(password, hash, this.#hashMemory)
          due = start + this.#pad.measured(hash, this.#now() - start)
          const current = this.#users.get(username)
          if (current === user) {
            if (ok && user !== undefined) principal = user.principal
            break
          }
          // The file was reloaded during the hash: the answer is the one of the users now in force.
          user = current
        }
        if (principal !== undefined) this.#cache.set(key, principal)
        else {
          // A failure lasts what the dearest cost's hash takes, whatever the username, and holds its turn and its
          // throttle reservation that long: nothing another request sees tells a cheaper user from an unknown one.
          const left = due - this.#now()
          if (left > 0) await this.#wait(left)
          failed = true
        }
      } finally {
        await attempt.settle(principal !== undefined)
      }
      return principal ?? ACCESS_DENIED
    } finally {
      end()
      // A success from an address does not forgive its other failures: only a failure is counted.
      void fromAddress.settle(failed ? false : undefined)
      this.#inFlight.delete(key)
    }
  }
}

function mebibytes(bytes: number): string {
  return `${Number((bytes / 1048576).toFixed(2))} MiB`
}

/** The attempt of a check whose client address is not known: nothing is counted per address. */
const NOT_COUNTED: LoginAttempt = Object.freeze({ settle: () => {} })

function sameEntities(entities: ReadonlySet<string>, listed: readonly string[]): boolean {
  return entities.size === new Set(listed).size && listed.every((entity) => entities.has(entity))
}
