import { availableParallelism } from 'node:os'
import { BODY_LIMIT_MIN, BOUNDS, parseBasePath, parseVendor, TIMEOUT_MAX_MS, wholeNumberIn } from '../option-values.js'
import { CodedError } from '../coded-error.js'
import { DEFAULTS, IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { MIN_MAX_BYTES } from '../idempotency/memory.js'
import { option, parseFlags, type CommandSpec, type ConfigWarning, type Values } from './flags.js'

export interface Address {
  readonly host: string | undefined
  readonly port: number
}

/** `PORT`, `HOST:PORT` or `[IPv6]:PORT`. */
export function parseAddress(value: string): Address {
  const match = /^(?:(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):)?([0-9]{1,5})$/.exec(value)
  const port = Number(match?.[3])
  if (match === null || port > 65535)
    throw new CodedError('EINVALID', 'must be PORT, HOST:PORT or [IPv6]:PORT, the port at most 65535')
  return { host: match[1] ?? match[2], port }
}

function parseTarget(value: string): URL {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new CodedError('EINVALID', 'must be an http:// or https:// URL, e.g. http://127.0.0.1:9000')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CodedError('EINVALID', 'must be an http:// or https:// URL, e.g. https://payments.internal')
  // Never sent (the client's Authorization is), and it would be logged with the URL.
  if (url.username !== '' || url.password !== '')
    throw new CodedError('EINVALID', 'must not hold a user or password (USER:PASSWORD@); the gateway sends none')
  return url
}

/** A name a certificate may carry: a DNS name or an address, never empty (an empty SNI is none, sent by one engine and not the other). */
function parseServername(value: string): string {
  if (!/^[A-Za-z0-9.:_-]+$/.test(value))
    throw new CodedError('EINVALID', 'must be a host name or address, e.g. payments.internal')
  return value
}

const processes = wholeNumberIn(BOUNDS.workers)

function parseWorkers(value: string): number {
  return value === 'auto' ? availableParallelism() : processes(value)
}

/** One of a few words, e.g. `closed` or `open`. */
export function oneOf<const T extends string>(...choices: T[]): (text: string) => T {
  return (text) => {
    if (!(choices as string[]).includes(text))
      throw new CodedError('EINVALID', `must be ${choices.slice(0, -1).join(', ')} or ${choices.at(-1)}`)
    return text as T
  }
}

/** A value taken as it is given (a path, a store spec checked later). */
export const identity = (text: string) => text

/**
 * Flags that several commands take: declared once here, so every command
 * checks them with the same code (`openapi` refuses the `--vendor` that
 * `serve` refuses).
 */
export const SHARED_FLAGS = {
  listen: option({
    value: '[HOST:]PORT',
    summary: 'where the gateway listens (`[::1]:8080` for IPv6); all interfaces when no host is given',
    default: String(DEFAULTS.port),
    parse: parseAddress,
  }),
  policies: option({
    value: 'DIR',
    summary: 'folder of per-entity policy files',
    default: DEFAULTS.policies,
    parse: identity,
    see: '[policies](policies.md)',
  }),
  vendor: option({
    value: 'NAME',
    summary: 'the `<vendor>` in `application/vnd.<vendor>.payments-v6+json` (RFC 6838 name characters)',
    default: DEFAULTS.vendor,
    parse: parseVendor,
  }),
  basePath: option({
    value: 'PATH',
    summary:
      'prefix in front of `/payments/...`: `/`-separated segments of RFC 3986 path characters, no query, no spaces, no `.` or `..` segments in any spelling (`%2e`), no escaped `/` or `\\`; a leading slash is added, a trailing one removed',
    default: DEFAULTS.basePath,
    shown: 'empty',
    parse: parseBasePath,
  }),
  bodyLimit: option({
    value: 'BYTES',
    summary: `largest request body read, at least ${BODY_LIMIT_MIN} (the smallest valid payment)`,
    default: String(DEFAULTS.bodyLimit),
    parse: wholeNumberIn(BOUNDS.bodyLimit),
  }),
  backendErrors: option({
    value: 'FILE',
    summary: "rules naming the backend's error answers on the two operations, watched for changes",
    shown: 'none: names by status',
    parse: identity,
    see: '[backend faults](backend-faults.md#rules---backend-errors)',
  }),
}

const SERVE_FLAGS = {
  target: option({
    value: 'URL',
    summary:
      "the backend, an `http://` or `https://` URL; a path in it is put in front of the request's path; an `https://` backend's certificate is always verified",
    required: true,
    parse: parseTarget,
  }),
  targetCa: option({
    value: 'FILE',
    summary:
      "PEM bundle of the CAs an `https://` target's certificate is verified against, instead of the system's roots; watched",
    shown: "the system's roots",
    parse: identity,
    see: '[TLS](deployment-reference.md#tls)',
  }),
  targetCert: option({
    value: 'FILE',
    summary: 'PEM client certificate presented to an `https://` target (mutual TLS), with `--target-key`; watched',
    parse: identity,
    see: '[TLS](deployment-reference.md#tls)',
  }),
  targetKey: option({
    value: 'FILE',
    summary: "`--target-cert`'s private key, PEM without a passphrase; watched",
    parse: identity,
  }),
  targetServername: option({
    value: 'NAME',
    summary:
      "the name an `https://` target's certificate must carry (and the SNI sent), for a target given as an address",
    shown: "the target's host",
    parse: parseServername,
  }),
  credentials: option({
    value: 'FILE',
    summary: 'BasicAuth users, JSON with scrypt hashes',
    required: true,
    parse: identity,
    see: '[credentials](credentials.md)',
  }),
  ...SHARED_FLAGS,
  tlsCert: option({
    value: 'FILE',
    summary:
      'serve HTTPS on `--listen` with this PEM certificate (its chain may follow), with `--tls-key`; watched and re-read on SIGHUP, new connections get a new one',
    shown: 'off: plain HTTP',
    parse: identity,
    see: '[TLS](deployment-reference.md#tls)',
  }),
  tlsKey: option({
    value: 'FILE',
    summary: "`--tls-cert`'s private key, PEM without a passphrase; watched",
    parse: identity,
  }),
  timeout: option({
    value: 'MS',
    summary: `how long the backend may stay silent, from 1 to ${TIMEOUT_MAX_MS} (an hour, so that every timer made of it fits node's)`,
    default: String(DEFAULTS.timeout),
    parse: wholeNumberIn(BOUNDS.timeout),
    see: '[backend faults](backend-faults.md)',
  }),
  admin: option({
    value: '[HOST:]PORT',
    summary:
      "health and metrics listener (`[::1]:9901` for IPv6); all interfaces when no host is given; a port of its own (`--listen`'s port on the same host, or on all interfaces, is refused at start)",
    shown: 'off',
    parse: parseAddress,
    see: '[deployment](deployment-reference.md#health-readiness-and-metrics)',
  }),
  workers: option({
    value: 'N|auto',
    summary:
      'processes sharing the port; `auto`: one per core; more than one needs `--idempotency` `off` or a Redis URL',
    default: '1',
    parse: parseWorkers,
    see: '[deployment](deployment-reference.md#workers)',
  }),
  idempotency: option({
    value: 'memory|off|URL',
    summary:
      "retry protection's store: `memory`, `off`, a `redis://HOST:PORT[/DB]`, `redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER` or `redis-cluster://HOST:PORT[,HOST:PORT...]` URL (`rediss://`, `rediss-sentinel://`, `rediss-cluster://`: over TLS); Redis is shared by every replica and also shares the failed-login throttle",
    default: IDEMPOTENCY_DEFAULTS.store,
    parse: identity,
    see: '[retry protection](idempotency.md)',
  }),
  idempotencyPasswordFile: option({
    value: 'FILE',
    summary:
      'the Redis password, read from this file at start (a mounted Secret; trailing newlines dropped), for every URL form; the URL then carries none (its user, if any: `redis://USER@HOST...`)',
    shown: "none, or the URL's",
    parse: identity,
    see: '[retry protection](idempotency-reference.md#who-can-reach-the-store)',
  }),
  idempotencyCa: option({
    value: 'FILE',
    summary:
      "a PEM bundle of CA certificates the TLS Redis's certificate is verified against (`rediss://`, `rediss-sentinel://` only), read at start, for a store with a CA of its own",
    shown: "the system's roots",
    parse: identity,
    see: '[TLS to the store](idempotency-reference.md#tls-to-the-store)',
  }),
  idempotencyFingerprintKey: option({
    value: 'FILE',
    summary:
      "the fingerprints' HMAC key, shared by every gateway on a Redis store (required with one): a line of at least 32 bytes, and during a rotation the older key on a second line",
    shown: 'a random key per process (memory store)',
    parse: identity,
    see: '[keyed fingerprints](idempotency-reference.md#keyed-fingerprints)',
  }),
  idempotencyTtl: option({
    value: 'SECONDS',
    summary: 'how long a recorded answer is replayed, at least 1',
    default: String(IDEMPOTENCY_DEFAULTS.ttlSeconds),
    parse: wholeNumberIn(BOUNDS.idempotencyTtl),
  }),
  idempotencyFailure: option({
    value: 'closed|open',
    summary: 'when the store cannot be reached: refuse with 503, or forward unprotected',
    default: IDEMPOTENCY_DEFAULTS.failure,
    parse: oneOf('closed', 'open'),
  }),
  idempotencyReplicas: option({
    value: 'N',
    summary:
      'Redis replicas that must acknowledge a claim (`WAIT`) before the payment is forwarded; above 0, a Redis store only',
    default: String(IDEMPOTENCY_DEFAULTS.replicas),
    parse: wholeNumberIn(BOUNDS.idempotencyReplicas),
    see: '[replicas](idempotency-reference.md#replicas-and-failover)',
  }),
  idempotencyMaxEntries: option({
    value: 'N',
    summary: "the memory store's most keys, at least 1; high enough by default that the bytes bind first",
    default: String(IDEMPOTENCY_DEFAULTS.maxEntries),
    parse: wholeNumberIn(BOUNDS.idempotencyMaxEntries),
    see: '[memory store](idempotency-reference.md#memory-default)',
  }),
  idempotencyMaxBytes: option({
    value: 'BYTES',
    summary: `the memory store's most bytes, what its entries really take in memory, at least ${MIN_MAX_BYTES} (room for the largest reference body and answers)`,
    default: String(IDEMPOTENCY_DEFAULTS.maxBytes),
    parse: wholeNumberIn({ unit: 'bytes', min: MIN_MAX_BYTES, max: Number.MAX_SAFE_INTEGER }),
    see: '[memory store](idempotency-reference.md#memory-default)',
  }),
  mode: option({
    value: 'enforce|report',
    summary:
      "`report` passes every payment whose entity the user may act for on as it came and reports what `enforce` would have done; a policy's `mode` overrides it for its entity",
    default: DEFAULTS.mode,
    parse: oneOf('enforce', 'report'),
    see: '[rollout](rollout.md)',
  }),
  trustProxy: option({
    value: 'N',
    summary:
      "proxies in front of the gateway (a load balancer, an ingress): the log line's `remoteAddress` is the address the farthest of them added to `X-Forwarded-For`, the Nth counted from the right; 0: the connection's own address",
    default: String(DEFAULTS.trustProxy),
    parse: wholeNumberIn(BOUNDS.trustProxy),
    see: '[logs and metrics](logs-and-metrics.md#the-clients-address)',
  }),
  backendMaxInFlight: option({
    value: 'K',
    summary:
      'most payments this process forwards at once, at least 1: one more is answered 503 with `Retry-After: 1`, unless retry protection knows it (its 409 or replay); per process with `--workers`',
    shown: 'off',
    parse: wholeNumberIn(BOUNDS.backendMaxInFlight),
    see: '[backend protection](deployment-reference.md#backend-protection)',
  }),
  shutdownDelay: option({
    value: 'SECONDS',
    summary:
      'after `SIGTERM`, how long the gateway keeps accepting and serving (answering with `Connection: close`) while `/readyz` says 503, before it drains',
    default: String(DEFAULTS.shutdownDelaySeconds),
    parse: wholeNumberIn(BOUNDS.shutdownDelay),
    see: '[deployment](deployment-reference.md#stopping)',
  }),
  drainTimeout: option({
    value: 'SECONDS',
    summary: 'after the delay, how long requests in flight may take to finish before their connections are cut',
    shown: '3 × `--timeout` + 5 s: the in-flight window',
    parse: wholeNumberIn(BOUNDS.drainTimeout),
    see: '[deployment](deployment-reference.md#stopping)',
  }),
}

/** `payments-gate serve`: every flag also from its `PAYMENTS_GATE_*` variable (docs/cli.md). Adding a flag is one entry. */
export const SERVE: CommandSpec<typeof SERVE_FLAGS> = {
  name: 'serve',
  usage: '--target URL --credentials FILE [flags]',
  description:
    'Runs the gateway in front of a backend. Every flag can also be given as its PAYMENTS_GATE_* variable; a flag wins over its variable.',
  env: true,
  positionals: 0,
  flags: SERVE_FLAGS,
}

/** `payments-gate serve` as configured by flags and variables: the gate's options and the proxy's, and where each came from. */
export interface ServeOptions extends Values<typeof SERVE_FLAGS> {
  /** Where a flag's value came from, for start-up errors. */
  readonly where: (key: string) => string
  /** Variables set but not read, which start-up logs (docs/cli.md). */
  readonly warnings: readonly ConfigWarning[]
}

export function parseServeOptions(args: string[], env: Readonly<Record<string, string | undefined>>): ServeOptions {
  const { values, where, warnings } = parseFlags(SERVE, args, env)
  return { ...values, where, warnings }
}
