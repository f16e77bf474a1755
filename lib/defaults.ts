/**
 * Every default of payments-gate, in one place: the library (`createGate`,
 * `createGateway`), the `serve` and `demo` commands and the documentation's
 * tables (docs/cli.md) all read them from here.
 */
export const DEFAULTS = Object.freeze({
  /** The `<vendor>` in `application/vnd.<vendor>.payments-v6+json`. */
  vendor: 'example',
  /** Prefix in front of `/payments/...`. */
  basePath: '',
  /** Largest request body read, in bytes. */
  bodyLimit: 65536,
  /** Folder of per-entity policy files. */
  policies: './policies',
  /** Where `serve` listens. */
  port: 8080,
  /** Where the demo listens: loopback, since it prints a working password. */
  demoHost: '127.0.0.1',
  /** How long the backend may stay silent, in ms. */
  timeout: 30000,
  /** Time allowed to receive a request's headers, in ms (docs/checks.md, refusals below HTTP). */
  headersTimeout: 10000,
  /** Time allowed to receive a whole request, in ms. */
  requestTimeout: 30000,
  /** How often those two timeouts are checked, in ms (node's own 30 s is too coarse for a 10 s limit). */
  timeoutCheckInterval: 1000,
  /** Largest request head, in bytes. */
  maxHeaderSize: 16384,
  /** How long an idle client connection is kept open, in ms. */
  keepAliveTimeout: 5000,
  /** Most connections open to the backend at once. */
  maxSockets: 256,
  /**
   * How long an idle connection to the backend is kept, in ms: under node's
   * 5 s server default, so that a payment is never written to a socket the
   * backend is closing at that moment (docs/backend-faults.md).
   */
  backendIdleTimeout: 4000,
  /** How long before the limit a backend announces (`Keep-Alive: timeout=N`) its idle connections are let go, in ms. */
  backendKeepAliveMargin: 1000,
  /** Largest backend 5xx body read to see whether it is in the error format. */
  errorBodyLimit: 65536,
  /** Proxies in front of the gateway whose `X-Forwarded-For` entries are believed (docs/logs-and-metrics.md). */
  trustProxy: 0,
  /** Refuse what the checks refuse (`enforce`), or pass it on and report it (`report`; docs/rollout.md). */
  mode: 'enforce' as 'enforce' | 'report',
  /** After `SIGTERM`, how long `serve` keeps serving before it drains, in seconds (docs/deployment-reference.md, stopping). */
  shutdownDelaySeconds: 5,
  /**
   * How long `serve`'s stop waits for the spans still queued to reach the collector, in ms (docs/tracing.md); the
   * exporter's own `OTEL_EXPORTER_OTLP_TIMEOUT` defaults to the same.
   */
  traceFlushMs: 10000,
})

/**
 * The most bytes read of each kind of file (docs/cli.md, files read): far above
 * any real one, low enough that a wrong path cannot fill memory.
 */
export const FILE_LIMITS = Object.freeze({
  /** `--credentials`: some hundred thousand users. */
  credentials: 16 * 1048576,
  /** One policy file. */
  policy: 1048576,
  /** `--backend-errors`. */
  backendErrors: 1048576,
  /** One TLS file: a certificate chain, a key, a CA bundle. */
  tls: 1048576,
  /** A file that holds one secret: a password, a key. */
  secret: 65536,
})

/**
 * The `--admin` listener (docs/deployment-reference.md, health): a probe or a scrape is
 * one small GET, so a request that is slow to arrive is cut soon, and the
 * connections it may hold are capped, so that slow or many clients of the admin
 * port cannot take the file descriptors payments need.
 */
export const ADMIN_DEFAULTS = Object.freeze({
  /** Time allowed to receive a request's headers, in ms. */
  headersTimeout: 2000,
  /** Time allowed to receive a whole request, in ms. */
  requestTimeout: 5000,
  /** How long an idle connection is kept open, in ms. */
  keepAliveTimeout: 5000,
  /** How often those timeouts are checked, in ms: well under the headers timeout. */
  timeoutCheckInterval: 500,
  /** Most connections open at once; one past it is closed as it arrives. */
  maxConnections: 64,
})

/** The cost of new password hashes (`payments-gate hash-password`): scrypt's N, r and p. */
export const SCRYPT_DEFAULTS = Object.freeze({ N: 16384, r: 8, p: 1 })

/** The failed-login throttle of BasicAuth (docs/credentials.md). */
export const THROTTLE_DEFAULTS = Object.freeze({
  /** Failed attempts of one username, within the window, that lock it out. */
  maxFailures: 10,
  /** Window over which failures are counted, in ms. */
  failureWindowMs: 60_000,
  /** How long a locked-out username is refused without verifying anything, in ms. */
  coolDownMs: 60_000,
  /** Most usernames whose failures are tracked in memory. */
  trackedUsersMax: 10_000,
})

/** The credentials check: remembered successes (docs/credentials.md), and the throttle. */
export const CREDENTIAL_DEFAULTS = Object.freeze({
  /** Most successful checks remembered. */
  cacheMax: 1000,
  /** How long a successful check is remembered since it was last used, in ms. */
  cacheTtlMs: 300_000,
  /** Most password hashes running at once: libuv's thread pool has four threads unless told otherwise. */
  hashConcurrency: 4,
  /**
   * Most bytes the hashes running at once may take, scrypt's 128 * N * r each (docs/credentials.md): half of the
   * gateway container's memory limit in deploy/payments.yaml, twice what the default cost takes.
   */
  hashMemoryMax: 128 * 1024 * 1024,
  /** Most checks waiting for a hash to start; beyond, 503 at once. */
  hashQueueMax: 32,
  /** Most of those one client address may hold, where its address is known. */
  clientQueueMax: 8,
  /** Failed attempts from one client address, within the window, that lock the address out. */
  addressMaxFailures: 100,
  ...THROTTLE_DEFAULTS,
})

/** The policy folder watch (docs/policies.md). */
export const POLICY_WATCH_DEFAULTS = Object.freeze({
  /** How long to wait for a burst of file events to settle before reloading, in ms. */
  debounceMs: 75,
  /** Full re-read at this interval, in case a file event was missed, in ms. */
  rescanMs: 1000,
  /** How long the folder must stay as it is before a vanished policy file removes its entity, in ms. */
  settleMs: 2000,
  /**
   * Reads of TLS files that a refusal must survive unchanged before it is reported: a
   * read that falls across a Secret's `..data` swap gets a certificate of one
   * version and a key of the next, and the read after it gets one whole version.
   */
  tlsRefusalReads: 3,
})

/** Retry protection on `transactionReference` (docs/idempotency.md). */
export const IDEMPOTENCY_DEFAULTS = Object.freeze({
  /** The store: `memory`, `off`, or a `redis://`, `redis-sentinel://` or `redis-cluster://` URL. */
  store: 'memory',
  /** How long a recorded answer is replayed, in seconds (`--idempotency-ttl`). */
  ttlSeconds: 86_400,
  /** What to do when the store cannot be reached: refuse with 503 (`closed`) or forward unprotected (`open`). */
  failure: 'closed',
  /** Added to three times the backend timeout for how long a claim holds its key without an answer, in ms. */
  inFlightMarginMs: 5000,
  /** Largest answer kept for replay (body plus header bytes). */
  maxAnswerBytes: 65_536,
  /** Memory store: most keys held; high enough that the byte bound is the one that binds. */
  maxEntries: 1_000_000,
  /** Memory store: most bytes held (answers, fingerprints and keys). */
  maxBytes: 64 * 1024 * 1024,
  /** Redis store: longest wait for one command before it rejects, and for the replicas' acknowledgement, in ms. */
  commandTimeoutMs: 1000,
  /** Redis store: how long after each answer a connection's server is asked its `maxmemory-policy` again, in ms. */
  policyRecheckMs: 10_000,
  /** Redis store: replicas that must acknowledge a claim or a record (`--idempotency-replicas`). */
  replicas: 0,
  /** `Retry-After` of a 409 `paymentIsInProgress`, in seconds. */
  retryAfterSeconds: 1,
  /** The middleware's store (`createGate`'s `idempotency`): off, so that no handler's behaviour changes unasked. */
  middlewareStore: 'off',
  /** How long a claim of the middleware holds its key while the handler runs, in seconds: the proxy's window at its default `--timeout`. */
  middlewareInFlightSeconds: 95,
} as const)

/** `serve --workers N`'s primary process (docs/deployment-reference.md, workers). */
export const WORKERS_DEFAULTS = Object.freeze({
  /**
   * How long the primary waits before it forks again in place of a worker it could not start (the system out of
   * file descriptors or processes): long enough not to spin while the shortage lasts, short enough to heal soon after.
   */
  respawnDelayMs: 1000,
})

/**
 * The JSON log lines of `serve` (docs/logs-and-metrics.md): lines are gathered
 * until `bufferBytes` wait, then written with one system call of whole lines,
 * at most `writeBytes`.
 */
export const LOG_DEFAULTS = Object.freeze({
  /**
   * One process writing alone: large batches, so that a busy gateway hands
   * libuv's thread pool one write per hundred-odd lines, not one per few.
   */
  alone: Object.freeze({ bufferBytes: 32768, writeBytes: 65536 }),
  /**
   * Processes sharing one pipe (the workers of `--workers` share stdout):
   * every write at most PIPE_BUF (4096 on Linux), which POSIX keeps whole,
   * never mixed with another process's writes.
   */
  shared: Object.freeze({ bufferBytes: 3072, writeBytes: 4096 }),
  /** What waits is written at least this often, in ms, so that a quiet gateway's lines are not held back. */
  flushIntervalMs: 200,
  /**
   * Most bytes of lines kept waiting while the destination refuses them (a full disk, a reader that stopped): past
   * it, new lines are dropped, so that a log nobody takes never grows the gateway's memory without bound.
   */
  heldBytes: 16 * 1024 * 1024,
})

/** The media types of the v6 API for a vendor. */
export interface MediaTypes {
  /** `application/vnd.<vendor>.payments-v6+json` */
  readonly request: string
  /** `application/vnd.<vendor>.payments-v6.hal+json` */
  readonly response: string
}

export function mediaTypes(vendor: string): MediaTypes {
  return {
    request: `application/vnd.${vendor}.payments-v6+json`,
    response: `application/vnd.${vendor}.payments-v6.hal+json`,
  }
}
