import { createRequire } from 'node:module'
import { isIP } from 'node:net'
import type { Redis, RedisOptions } from 'ioredis'
import { CodedError, type Wording } from '../coded-error.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'

export interface RedisClientOptions {
  /** Longest wait for one command before it rejects, in ms. Default 1000. */
  commandTimeoutMs?: number
  /** Told of every client error (a refused connection, a lost one), so it can be logged and counted; never thrown. */
  onError?: (error: Error) => void
  /** The password (a file's, `--idempotency-password-file`), for a URL that carries none: one with its own is refused. */
  password?: string
  /**
   * A PEM bundle of CA certificates the store's certificate is verified against in place of the system's roots
   * (`--idempotency-ca`), for a TLS URL only: a URL without TLS with one is refused.
   */
  ca?: Buffer
}

/** Longest pause between two reconnection attempts, in ms: a Redis back from a restart is used again within it. */
const RECONNECT_MAX_MS = 1000

/** The port of a Sentinel named without one (Redis's own default for Sentinel). */
const SENTINEL_PORT = 26379

/**
 * ioredis, loaded by the first client made rather than imported: a gateway on the memory store never
 * uses it, and loading it is a large part of `serve`'s start (docs/performance.md, Start-up).
 */
function ioredis(): { Redis: typeof Redis } {
  return createRequire(import.meta.url)('ioredis') as { Redis: typeof Redis }
}

const REDIS_URL = /^rediss?:\/\/(?:[^@/]*@)?[^:@/]+(?::[1-9][0-9]{0,4})?(?:\/(?:0|[1-9][0-9]?))?$/
const SENTINEL_URL =
  /^rediss?-sentinel:\/\/(?:([^@/]*)@)?([^:@/,#]+(?::[1-9][0-9]{0,4})?(?:,[^:@/,#]+(?::[1-9][0-9]{0,4})?)*)(?:\/(0|[1-9][0-9]?))?#([^\s#/]+)$/

/** The URL forms the Redis store and the shared throttle take (docs/idempotency.md). */
export const REDIS_URL_FORMS =
  'redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB], redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER'

/** The forms that connect over TLS. */
const TLS_URL_FORMS = 'rediss://HOST:PORT[/DB], rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER'

/** Whether a URL `redisTarget` reads connects over TLS: `rediss://` and `rediss-sentinel://`. */
export function redisTls(url: string): boolean {
  return /^rediss(?:-sentinel)?:\/\//.test(url) && redisTarget(url) !== undefined
}

/**
 * Where a URL says to connect: `redis://` and `rediss://` as ioredis reads
 * them; `redis-sentinel://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...][/DB]#MASTER`
 * (the form of Lettuce and other clients) as ioredis's Sentinel options, the
 * password being the primary's, as in `redis://`; `rediss-sentinel://` alike,
 * with TLS to the Sentinels and to the primary. Undefined for anything else.
 */
export function redisTarget(url: string): string | RedisOptions | undefined {
  if (REDIS_URL.test(url)) return url
  const sentinel = SENTINEL_URL.exec(url)
  if (sentinel === null) return undefined
  const [, userinfo, hosts, db, name] = sentinel as unknown as [
    string,
    string | undefined,
    string,
    string | undefined,
    string,
  ]
  const colon = userinfo?.indexOf(':') ?? -1
  const user = colon < 0 ? userinfo : userinfo?.slice(0, colon)
  const sentinels = hosts.split(',').map((address) => {
    const [host, port] = address.split(':') as [string, string | undefined]
    return { host, port: port === undefined ? SENTINEL_PORT : Number(port) }
  })
  // A `%` not followed by two hex digits makes the URL none of the forms (one line), not a URIError with a stack.
  let decoded: { name: string; username: string | undefined; password: string | undefined }
  try {
    decoded = {
      name: decodeURIComponent(name),
      username: user ? decodeURIComponent(user) : undefined,
      password: colon >= 0 ? decodeURIComponent((userinfo as string).slice(colon + 1)) : undefined,
    }
  } catch {
    return undefined
  }
  return {
    sentinels,
    name: decoded.name,
    db: Number(db ?? 0),
    // `USER@`, with the password from a file (`--idempotency-password-file`), or `USER:PASSWORD@`.
    username: decoded.username,
    password: decoded.password,
    // Reconnect as soon as Sentinel announces a new primary, not only when the old one's connection drops.
    failoverDetector: true,
    // ioredis's switch for TLS to the primary it is told of; `connectRedis` gives the Sentinels and the primary `tls`.
    enableTLSForSentinelMode: url.startsWith('rediss-'),
  }
}

/** The URL as it may be shown: a password in it is hidden. */
export function shownUrl(url: string): string {
  // Up to the last `@`: a password may hold a `/` or an `@` of its own.
  const start = url.indexOf('//')
  const at = url.lastIndexOf('@')
  return JSON.stringify(start !== -1 && at > start ? `${url.slice(0, start + 2)}***${url.slice(at)}` : url)
}

/**
 * An ioredis client that fails fast while Redis is down and recovers without
 * a restart: no offline queue (a command sent while disconnected rejects at
 * once instead of waiting), a timeout on every command, no command sent twice
 * (one in flight when the connection drops fails, by its timeout at the latest), and reconnection
 * attempts forever, at most `RECONNECT_MAX_MS` apart; through Sentinel, it
 * asks the Sentinels for the primary on each attempt, so it follows a
 * failover. Creating it never throws, whether Redis is up or not; a URL
 * `redisTarget` does not read throws a one-line Error (code `EIDEMPOTENCY`).
 */
export function createRedisClient(url: string, options: RedisClientOptions = {}): Redis {
  const target = redisTarget(url)
  if (target === undefined) {
    // The code makes it a start-up failure of the CLI: one line, exit 2.
    throw new CodedError(
      'EIDEMPOTENCY',
      (name) => `${name('idempotency')} ${shownUrl(url)} is none of ${REDIS_URL_FORMS}`,
    )
  }
  return connectRedis(target, options)
}

/** The client `createRedisClient` makes, of a target `redisTarget` has already read. */
export function connectRedis(target: string | RedisOptions, options: RedisClientOptions = {}): Redis {
  const commandTimeout = options.commandTimeoutMs ?? IDEMPOTENCY_DEFAULTS.commandTimeoutMs
  const settings: RedisOptions = {
    enableOfflineQueue: false,
    commandTimeout,
    connectTimeout: Math.max(commandTimeout, RECONNECT_MAX_MS),
    sentinelCommandTimeout: commandTimeout,
    maxRetriesPerRequest: 1,
    // A command whose reply a lost connection cut off may have run: never sent again on reconnection (docs/idempotency.md).
    autoResendUnfulfilledCommands: false,
    retryStrategy: (attempt) => Math.min(attempt * 50, RECONNECT_MAX_MS),
    sentinelRetryStrategy: (attempt) => Math.min(attempt * 50, RECONNECT_MAX_MS),
  }
  const { Redis } = ioredis()
  const client =
    typeof target === 'string'
      ? new Redis(withPassword(target, options.password), { ...settings, ...tlsOf(target, options.ca) })
      : new Redis({
          ...settings,
          ...target,
          ...sentinelPassword(target, options.password),
          ...tlsOf(target, options.ca),
        })
  reportErrors(client, options.onError)
  return client
}

/**
 * The TLS options of a target: none without TLS (and no CA bundle), else the CA bundle given or the system's roots.
 * node verifies every certificate, against the host the client connects to (its name, or an IP address the
 * certificate must list), and nothing here turns that off (docs/idempotency.md, TLS to the store).
 */
function tlsOf(target: string | RedisOptions, ca: Buffer | undefined): RedisOptions {
  const tls = typeof target === 'string' ? target.startsWith('rediss:') : target.enableTLSForSentinelMode === true
  if (!tls) {
    if (ca === undefined) return {}
    throw new CodedError(
      'EIDEMPOTENCY',
      (name) =>
        `${name('idempotency')} is not a TLS URL, and a CA bundle (${name('idempotencyCaBundle')}) is only for one of ${TLS_URL_FORMS}`,
    )
  }
  const options = ca === undefined ? {} : { ca }
  if (typeof target !== 'string') return { tls: options, sentinelTLS: options }
  // The host named, sent as SNI too, which managed offerings that route by name expect; an IP address is never sent so (RFC 6066, 3).
  const host = new URL(target).hostname
  return { tls: isIP(host) === 0 ? { ...options, servername: host } : options }
}

const BOTH_PASSWORDS: Wording = (name) =>
  `${name('idempotency')}: a password in the URL and another in ${name('idempotencyPassword')}; give one`

/** A `redis://` URL with the password of a file put in (ioredis takes a URL's password over its options'). */
function withPassword(url: string, password: string | undefined): string {
  if (password === undefined) return url
  const parsed = new URL(url)
  if (parsed.password !== '') throw new CodedError('EIDEMPOTENCY', BOTH_PASSWORDS)
  // The setter leaves `%` as it is, and ioredis decodes what it reads.
  parsed.password = encodeURIComponent(password)
  return parsed.href
}

/** The primary's password of a file, for a Sentinel URL that names none. */
function sentinelPassword(target: RedisOptions, password: string | undefined): RedisOptions {
  if (password === undefined) return {}
  if (target.password !== undefined) throw new CodedError('EIDEMPOTENCY', BOTH_PASSWORDS)
  return { password }
}

/** Without a listener, ioredis prints each error on the console; with one, the caller decides. */
export function reportErrors(client: Redis, onError: ((error: Error) => void) | undefined): void {
  client.on('error', (error: Error) => onError?.(error))
}

/** Resolves true once the client is connected, false after `timeoutMs`; never rejects. */
export function whenReady(client: Redis, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer)
      client.off('ready', onReady)
      resolve(ready)
    }
    const onReady = () => done(true)
    const timer = setTimeout(() => done(false), timeoutMs)
    client.on('ready', onReady)
  })
}

/** Quits cleanly when connected, then stops any reconnection attempt. */
export async function closeRedisClient(client: Redis): Promise<void> {
  try {
    if (client.status === 'ready') await client.quit()
  } finally {
    client.disconnect()
  }
}
