import { hash as digest, randomBytes, scrypt, timingSafeEqual, type BinaryLike, type ScryptOptions } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { promisify } from 'node:util'
import { LRUCache } from 'lru-cache'
import type { Logger } from 'pino'
import { ACCESS_DENIED, type Authenticator, type Principal } from './checks/auth.js'
import type { Rejection } from './errors.js'
import { CREDENTIAL_DEFAULTS, SCRYPT_DEFAULTS } from './defaults.js'
import { readFailure } from './file-error.js'
import { definedOnly, MemoryLoginThrottle, type LoginAttempt, type LoginThrottle } from './login-throttle.js'
import { compileSchema } from './schema/compile.js'
import { Type, type Static } from './schema/typebox.js'
import { watchFolder, type ReloadOutcome, type WatchOptions } from './watch.js'

/**
 * Password hashes are `scrypt$N$r$p$<salt base64>$<hash base64>`: the cost
 * parameters travel with each hash, so they can be raised for new hashes
 * while the old ones still verify.
 */
const SCHEME = 'scrypt'
const SALT_BYTES = 16
const KEY_BYTES = 32
/** Bounds on what a credentials file may ask of us, so a typo cannot make one verification take minutes. */
const MAX_N = 2 ** 20
const MAX_R = 32
const MAX_P = 16
const MIN_BYTES = 16

interface ScryptParams {
  readonly N: number
  readonly r: number
  readonly p: number
}

interface ParsedHash extends ScryptParams {
  readonly salt: Buffer
  readonly hash: Buffer
}

/** Async: the hash runs on libuv's thread pool, never blocking the event loop. (promisify types the first overload.) */
const scryptAsync = promisify(scrypt) as (
  password: BinaryLike,
  salt: BinaryLike,
  keylen: number,
  options: ScryptOptions,
) => Promise<Buffer>

function derive(password: string, salt: Buffer, keylen: number, { N, r, p }: ScryptParams): Promise<Buffer> {
  // Node refuses parameters whose memory (about 128 * N * r bytes) exceeds maxmem: give raised ones room.
  const options = { N, r, p, maxmem: 256 * N * r + 1024 * 1024 }
  return scryptAsync(password.normalize('NFC'), salt, keylen, options)
}

function formatHash({ N, r, p, salt, hash }: ParsedHash): string {
  return [SCHEME, N, r, p, salt.toString('base64'), hash.toString('base64')].join('$')
}

/** Strict base64: what does not encode back to itself is refused, so a hash string has one spelling. */
function decodeBase64(text: string): Buffer | undefined {
  const bytes = Buffer.from(text, 'base64')
  return bytes.length > 0 && bytes.toString('base64') === text ? bytes : undefined
}

function parseCost(text: string | undefined, max: number): number | undefined {
  if (text === undefined || !/^[1-9][0-9]{0,7}$/.test(text)) return undefined
  const value = Number(text)
  return value <= max ? value : undefined
}

/** The parts of a hash string, or undefined when it is not one that `hashPassword` could have made. */
export function parseHash(text: string): ParsedHash | undefined {
  const parts = text.split('$')
  if (parts.length !== 6 || parts[0] !== SCHEME) return undefined
  const N = parseCost(parts[1], MAX_N)
  const r = parseCost(parts[2], MAX_R)
  const p = parseCost(parts[3], MAX_P)
  const salt = decodeBase64(parts[4] as string)
  const hash = decodeBase64(parts[5] as string)
  if (N === undefined || r === undefined || p === undefined || salt === undefined || hash === undefined) return undefined
  // scrypt's N must be a power of two above 1.
  if (N < 2 || (N & (N - 1)) !== 0 || salt.length < MIN_BYTES || hash.length < MIN_BYTES) return undefined
  return { N, r, p, salt, hash }
}

/** A salted scrypt hash of the password (NFC-normalized, as RFC 7613's OpaqueString profile asks). */
export async function hashPassword(password: string, params: ScryptParams = SCRYPT_DEFAULTS): Promise<string> {
  const salt = randomBytes(SALT_BYTES)
  const hash = await derive(password, salt, KEY_BYTES, params)
  return formatHash({ ...params, salt, hash })
}

/** Whether the password matches the hash, compared in constant time. A malformed hash matches nothing. */
export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  const parsed = parseHash(hash)
  if (parsed === undefined) return false
  return matches(password, parsed)
}

async function matches(password: string, parsed: ParsedHash): Promise<boolean> {
  const derived = await derive(password, parsed.salt, parsed.hash.length, parsed)
  return timingSafeEqual(derived, parsed.hash)
}

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
  /** How long a successful check is remembered, in ms. Default 300000 (5 minutes). */
  cacheTtlMs?: number
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

/** The error a bad credentials file or user list is reported with: start-up stops with exit 2. */
export function credentialsError(message: string): Error & { code: 'ECREDENTIALS' } {
  return Object.assign(new Error(message), { code: 'ECREDENTIALS' as const })
}

const BASIC = /^basic +([A-Za-z0-9+/]+={0,2}) *$/i
// RFC 7617, section 2: neither the user-id nor the password may hold control characters.
const CONTROL = /[\u0000-\u001f\u007f]/
const utf8 = new TextDecoder('utf-8', { fatal: true })

/** The user-id and password of a `Basic` header (RFC 7617), or undefined when it is not well formed. */
export function parseBasic(authorization: string): { username: string; password: string } | undefined {
  const token = BASIC.exec(authorization)?.[1]
  if (token === undefined) return undefined
  const bytes = decodeBase64(token)
  if (bytes === undefined) return undefined
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return undefined
  }
  const colon = text.indexOf(':')
  if (colon < 1 || CONTROL.test(text)) return undefined
  return { username: text.slice(0, colon), password: text.slice(colon + 1) }
}

/**
 * Check 1: BasicAuth against the users of a credentials file. A successful
 * check is remembered under a SHA-256 digest of the whole header (never the
 * clear password) and answered synchronously after that, so the slow hash is
 * off the path of repeated valid requests. Failures are counted per username,
 * known or not, and a username that failed too often is refused for a while
 * without hashing anything, so the slow hash cannot be used to burn CPU.
 * `replace` swaps the users for a reloaded file's (docs/credentials.md).
 */
export class CredentialStore implements Authenticator {
  #users = new Map<string, User>()
  readonly #cache: LRUCache<string, Principal>
  readonly #throttle: LoginThrottle
  /** Concurrent checks of the same header share one verification. */
  readonly #inFlight = new Map<string, Promise<Principal | Rejection>>()
  #dummy!: ParsedHash

  constructor(users: Iterable<UserCredentials>, options: CredentialStoreOptions = {}) {
    const settings = { ...CREDENTIAL_DEFAULTS, ...definedOnly(options) }
    this.#install(users)
    const now = options.now ?? (() => performance.now())
    const perf = { now }
    // ttlResolution 0: read the clock on each look-up rather than arm a timer to memoize it.
    this.#cache = new LRUCache({ max: settings.cacheMax, ttl: settings.cacheTtlMs, ttlResolution: 0, perf })
    this.#throttle = options.throttle ?? new MemoryLoginThrottle({ ...settings, now })
  }

  /** How many users the store knows. */
  get size(): number {
    return this.#users.size
  }

  /**
   * The users of a reloaded file take the place of these, all at once, or none
   * of them when one is refused (an `ECREDENTIALS` error). A user removed, or
   * whose password or entities changed, is refused from now on even where its
   * check was cached; an unchanged user keeps its cached checks. The failed-login
   * throttle keeps its counts.
   */
  replace(users: Iterable<UserCredentials>): void {
    this.#install(users)
    const stale: string[] = []
    this.#cache.forEach((principal, key) => {
      if (this.#users.get(principal.username)?.principal !== principal) stale.push(key)
    })
    for (const key of stale) this.#cache.delete(key)
  }

  #install(users: Iterable<UserCredentials>): void {
    const next = new Map<string, User>()
    for (const user of users) {
      if (next.has(user.username)) throw credentialsError(`user "${user.username}" is listed twice`)
      const kept = this.#users.get(user.username)
      if (kept !== undefined && kept.password === user.password && sameEntities(kept.principal.entities, user.entities)) {
        next.set(user.username, kept)
        continue
      }
      const hash = parseHash(user.password)
      if (hash === undefined) {
        throw credentialsError(`user "${user.username}": password is not a hash from payments-gate hash-password`)
      }
      const principal = Object.freeze({ username: user.username, entities: new Set(user.entities) })
      next.set(user.username, { principal, hash, password: user.password })
    }
    // An unknown username is verified against a hash that costs what a real one costs, so the
    // answer's timing does not tell which usernames exist. Nothing can match it: the user is unknown.
    const [first] = next.values()
    const cost = first?.hash ?? SCRYPT_DEFAULTS
    this.#dummy = { N: cost.N, r: cost.r, p: cost.p, salt: Buffer.alloc(SALT_BYTES), hash: Buffer.alloc(KEY_BYTES) }
    this.#users = next
  }

  authenticate(authorization: string | undefined): Principal | Rejection | Promise<Principal | Rejection> {
    if (authorization === undefined) return ACCESS_DENIED
    const key = digest('sha256', authorization, 'base64')
    const cached = this.#cache.get(key)
    if (cached !== undefined) return cached
    const running = this.#inFlight.get(key)
    if (running !== undefined) return running
    const credentials = parseBasic(authorization)
    if (credentials === undefined) return ACCESS_DENIED
    // A throttle that answers synchronously refuses a locked-out username without a promise.
    const admitted = this.#throttle.admit(credentials.username)
    if (admitted === undefined) return ACCESS_DENIED
    const verification = this.#verify(key, credentials.username, credentials.password, admitted)
    this.#inFlight.set(key, verification)
    return verification
  }

  async #verify(
    key: string,
    username: string,
    password: string,
    admitted: LoginAttempt | Promise<LoginAttempt | undefined>,
  ): Promise<Principal | Rejection> {
    try {
      const attempt = await admitted
      if (attempt === undefined) return ACCESS_DENIED
      let user = this.#users.get(username)
      let principal: Principal | undefined
      try {
        for (;;) {
          const ok = await matches(password, user?.hash ?? this.#dummy)
          const current = this.#users.get(username)
          if (current === user) {
            if (ok && user !== undefined) principal = user.principal
            break
          }
          // The file was reloaded during the hash: the answer is the one of the users now in force.
          user = current
        }
        if (principal !== undefined) this.#cache.set(key, principal)
      } finally {
        await attempt.settle(principal !== undefined)
      }
      return principal ?? ACCESS_DENIED
    } finally {
      this.#inFlight.delete(key)
    }
  }
}

function sameEntities(entities: ReadonlySet<string>, listed: readonly string[]): boolean {
  return entities.size === new Set(listed).size && listed.every((entity) => entities.has(entity))
}

const CredentialsFile = Type.Object(
  {
    users: Type.Array(
      Type.Object(
        {
          username: Type.String({
            minLength: 1,
            pattern: '^[^:\\u0000-\\u001f\\u007f]+$',
            'x-format': 'no colon and no control characters (RFC 7617)',
          }),
          password: Type.String({ minLength: 1 }),
          entities: Type.Array(Type.String({ minLength: 1 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)
type CredentialsFile = Static<typeof CredentialsFile>

const credentialsFileSchema = compileSchema<CredentialsFile>(CredentialsFile)

/** The users of a credentials file's text; anything wrong throws an `ECREDENTIALS` error with the reason. */
function parseCredentials(text: string): readonly UserCredentials[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw credentialsError(`not JSON: ${(error as Error).message}`)
  }
  if (!credentialsFileSchema.check(parsed)) {
    const reasons = credentialsFileSchema.errors(parsed).map((item) => `${item.jsonPath}: ${item.message}`)
    throw credentialsError(reasons.join('; '))
  }
  return parsed.users
}

/** The store of a credentials file and the text it was built from; anything wrong throws an `ECREDENTIALS` error naming the file. */
async function openCredentials(file: string, options: CredentialStoreOptions): Promise<{ store: CredentialStore; text: string }> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw credentialsError(`${file}: ${readFailure(error)}`)
  }
  try {
    return { store: new CredentialStore(parseCredentials(text), options), text }
  } catch (error) {
    throw credentialsError(`${file}: ${(error as Error).message}`)
  }
}

/**
 * Reads and validates a credentials file (`{"users": [{"username", "password", "entities"}]}`).
 * Anything wrong with it throws an `ECREDENTIALS` error naming the file and the reason.
 */
export async function loadCredentials(file: string, options: CredentialStoreOptions = {}): Promise<CredentialStore> {
  return (await openCredentials(file, options)).store
}

export interface WatchCredentialsOptions extends CredentialStoreOptions, WatchOptions {
  /** Where reloads and a refused file are reported. */
  logger?: Pick<Logger, 'info' | 'warn'>
  /** Told what a reload did, when it applied the file, refused a new version of it, or the file stopped being refused. */
  onReload?: (outcome: ReloadOutcome) => void
}

/** The users of a watched credentials file. */
export interface WatchedCredentials extends Authenticator {
  /** How many users are in force. */
  readonly size: number
  /** Re-reads the file now, as SIGHUP asks; resolves once the users read are in force. */
  reload(): Promise<void>
  /** Stops watching. */
  close(): void
}

/**
 * Loads a credentials file as `loadCredentials` does, then keeps it current
 * as the policy folder is kept (watch.ts): a valid new version replaces the
 * users at once (`CredentialStore.replace`); a refused one leaves the last good
 * users in force and is logged and reported once.
 */
export async function watchCredentials(file: string, options: WatchCredentialsOptions = {}): Promise<WatchedCredentials> {
  const { logger, onReload } = options
  const opened = await openCredentials(file, options)
  const { store } = opened
  let inForce = opened.text
  /** The refused version already reported, while the file is refused. */
  let refused: string | undefined

  async function reload(forced: boolean): Promise<void> {
    let text: string | undefined
    try {
      text = await readFile(file, 'utf8')
      if (text !== inForce) store.replace(parseCredentials(text))
    } catch (error) {
      // A file that cannot be read is said in words, one that does not parse by its own message (docs/cli.md).
      const reason = text === undefined ? readFailure(error) : (error as Error).message
      const version = `${reason}\n${text ?? ''}`
      if (!forced && version === refused) return
      refused = version
      logger?.warn({ file, reason }, 'credentials file refused, its last good users stay in force')
      onReload?.({ applied: false, refused: [{ file, reason }], refusedNow: 1 })
      return
    }
    const applied = forced || text !== inForce
    const wasRefused = refused !== undefined
    inForce = text
    refused = undefined
    if (applied) logger?.info({ file, users: store.size }, 'credentials reloaded')
    if (applied || wasRefused) onReload?.({ applied, refused: [], refusedNow: 0 })
  }

  const watch = watchFolder(dirname(file), reload, options)
  return {
    authenticate: (authorization) => store.authenticate(authorization),
    get size() {
      return store.size
    },
    reload: watch.reload,
    close: watch.close,
  }
}
