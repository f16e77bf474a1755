import cluster, { type Worker } from 'node:cluster'
import type { AddressInfo } from 'node:net'
import { AggregatorRegistry } from 'prom-client'
import { createAdmin, metricsOf, type Admin } from '../admin.js'
import type { Authenticator } from '../checks/auth.js'
import { CodedError, isCoded } from '../coded-error.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { createGate, type Gate } from '../gate.js'
import { readFingerprintKeys } from '../idempotency/fingerprint.js'
import type { MemoryStoreReport } from '../idempotency/memory.js'
import { RedisIdempotencyStore } from '../idempotency/redis.js'
import { acceptErrorLog, createLogger, errorFacts, type Logger } from '../log.js'
import { createMetrics, type Metrics } from '../metrics.js'
import { createRetryStore, inFlightWindowMs } from '../proxy/retry-protection.js'
import { NO_HANDLER_PROTECTION } from '../surfaces/retry-protection.js'
import { createGateway, type Gateway } from '../proxy/server.js'
import { hideUserinfo } from '../shown-url.js'
import { loadCertificates, type Certificates } from './certificates.js'
import { flagName, SERVE_WORKER_VARIABLE, type ConfigWarning } from './flags.js'
import { EXIT_OK, EXIT_USAGE, logDestination, type Command, type Io } from './io.js'
import { parseServeOptions, type ServeOptions } from './options.js'
export { SERVE as spec } from './options.js'
import { reloadSignal, shutdownDelay, startOrStop, stopSignals, type StopSignals } from './signals.js'
import { bind, checkApart, storeCa, storePassword, unreadable } from './startup.js'
import { startTracing } from './tracing.js'
import { runPrimary, WORKER_FAILED, WORKER_READY } from './workers.js'

type RetryProtectionFlags =
  | 'idempotency'
  | 'idempotencyTtl'
  | 'idempotencyFailure'
  | 'idempotencyReplicas'
  | 'idempotencyMaxEntries'
  | 'idempotencyMaxBytes'
  | 'idempotencyPasswordFile'
  | 'idempotencyFingerprintKey'
  | 'idempotencyCa'
type TlsFlags = 'tlsCert' | 'tlsKey' | 'targetCa' | 'targetCert' | 'targetKey' | 'targetServername'
type DefaultedFlags =
  | RetryProtectionFlags
  | TlsFlags
  | 'shutdownDelay'
  | 'drainTimeout'
  | 'trustProxy'
  | 'mode'
  | 'backendErrors'
  | 'backendMaxInFlight'

/**
 * What `serve` needs, with the credentials as a file or as a store already built (the demo's); retry protection,
 * `trustProxy` and the mode as their defaults unless given; no shutdown delay and a drain of the backend timeout
 * plus a second unless given.
 */
export interface ServeSetup
  extends
    Omit<ServeOptions, 'credentials' | 'workers' | 'where' | 'warnings' | DefaultedFlags>,
    Partial<Pick<ServeOptions, DefaultedFlags>> {
  readonly credentials: string | Authenticator
  /** Where a flag's value came from (`--listen` or `PAYMENTS_GATE_LISTEN`), for start-up errors; the flag unless given. */
  where?(key: string): string
  /** Variables set but not read, logged first (docs/cli.md); none unless given. */
  readonly warnings?: readonly ConfigWarning[]
}

export interface Serving {
  readonly gateway: Gateway
  readonly address: AddressInfo
  readonly admin: AddressInfo | undefined
  readonly gate: Gate
  readonly logger: Logger
  readonly metrics: Metrics
  /** The watched certificate files of the listener and the backend. */
  readonly certificates: Certificates
  /**
   * Withdraws the gateway (`/readyz` 503, `Connection: close`) and keeps serving for the shutdown delay, or until
   * `hurry` resolves; then drains it and closes the gate and the admin listener.
   */
  stop(hurry?: Promise<void>): Promise<void>
}

/**
 * Starts one gateway: admin listener first (so `/readyz` answers "not yet"
 * while policies load), then the gate (policies, credentials, checks), then the port. A bad file or a
 * port in use throws before anything listens on the gateway's port.
 */
export async function startServing(setup: ServeSetup, io: Io, withAdmin = true): Promise<Serving> {
  const where = (key: string) => setup.where?.(key) ?? flagName(key)
  const metrics = createMetrics()
  // Counted where it cannot be logged: the log's own writes that failed, the lines it dropped (docs/logs-and-metrics.md).
  const logger = createLogger({
    destination: logDestination(io, cluster.isWorker, (trouble) => metrics.logTrouble(trouble)),
  })
  // A worker's are the primary's, logged there once (workers.ts).
  if (!cluster.isWorker) for (const { variable, message } of setup.warnings ?? []) logger.warn({ variable }, message)
  // Before the gateway, which asks for a tracer once (docs/tracing.md).
  const tracing = await startTracing(io.env)
  let gateway: Gateway | undefined
  let admin: Admin | undefined
  let adminAddress: AddressInfo | undefined
  if (withAdmin && setup.admin !== undefined) {
    checkApart(setup.admin, setup.listen, where)
    const { port, host } = setup.admin
    const listener = createAdmin({
      ready: () => gateway?.ready === true,
      ...metricsOf(metrics.registry),
      onAcceptError: acceptErrorLog(logger),
    })
    adminAddress = await bind(where('admin'), setup.admin, () => listener.listen(port, host))
    admin = listener
  }
  let certificates: Certificates | undefined
  try {
    certificates = await loadCertificates(setup, where, {
      logger,
      onReload: (side, outcome) => metrics.tlsReload(side, outcome),
    })
    const onStoreError = storeErrorReporter(logger, metrics)
    const { store, gate, fingerprintKey } = await Promise.resolve()
      .then(async () => {
        const keyFile = setup.idempotencyFingerprintKey
        const fingerprintKey = keyFile === undefined ? undefined : await readFingerprintKeys(keyFile)
        // Built once, here, from `--idempotency` read once. A Redis store's client also carries the failed-login
        // throttle (docs/idempotency.md): the store owns it and the gateway's drain closes it; the gate borrows it.
        const idempotencyPassword = await storePassword(
          setup.idempotencyPasswordFile,
          setup.idempotency ?? IDEMPOTENCY_DEFAULTS.store,
          where,
        )
        const idempotencyCaBundle = await storeCa(
          setup.idempotencyCa,
          setup.idempotency ?? IDEMPOTENCY_DEFAULTS.store,
          where,
        )
        const store = createRetryStore({
          ...setup,
          idempotencyPassword,
          idempotencyCaBundle,
          idempotencyFingerprintKey: fingerprintKey,
          onStoreError,
          idempotencyReport: evictionReporter(logger, metrics),
          idempotencyClusterMetrics: metrics,
        })
        try {
          // At most once needs a store that keeps every claim: one that may evict keys is refused here, at start.
          const evicting = store instanceof RedisIdempotencyStore ? await store.evicting() : undefined
          if (evicting !== undefined)
            throw new CodedError('EIDEMPOTENCY', (name) => `${name('idempotency')}: ${evicting.message}`)
          const gate = await createGate({
            ...setup,
            // Retry protection is the gateway's, the store above: the gate's, around a handler, serves nothing here.
            ...NO_HANDLER_PROTECTION,
            logger,
            onPolicyReload: (outcome) => metrics.policyReload(outcome),
            onCredentialsReload: (outcome) => metrics.credentialsReload(outcome),
            onBackendErrorsReload: (outcome) => metrics.backendErrorsReload(outcome),
            throttleRedis: store instanceof RedisIdempotencyStore ? store.redis : undefined,
            onStoreError,
          })
          return { store, gate, fingerprintKey }
        } catch (error) {
          await store?.close()
          throw error
        }
      })
      .catch((error: unknown) => {
        throw unreadable(error, where)
      })
    try {
      const tls = { tls: certificates.listener, targetTls: certificates.target }
      // The rules file is the gate's, watched there; the gateway applies the rules in force.
      const { checks, backendErrors } = gate
      const idempotency = store ?? 'off'
      const started = createGateway({
        ...setup,
        ...tls,
        checks,
        backendErrors,
        idempotency,
        idempotencyFingerprintKey: fingerprintKey,
        logger,
        metrics,
        onStoreError,
      })
      const address = await bind(where('listen'), setup.listen, () =>
        started.listen(setup.listen.port, setup.listen.host),
      ).catch(async (error: unknown) => {
        // The gateway owns retry protection's store: a Redis client left open would keep the process alive.
        await started.drain(0)
        throw error
      })
      gateway = started
      // What an operator checks first: where it listens and forwards, which store holds retry protection, where
      // the probes are (docs/logs-and-metrics.md); whatever could be a password in a URL hidden.
      const idempotencyStore = hideUserinfo(setup.idempotency ?? IDEMPOTENCY_DEFAULTS.store)
      logger.info(
        {
          listen: address,
          target: hideUserinfo(setup.target.href),
          tls: tls.tls !== undefined,
          idempotency: idempotencyStore,
          admin: adminAddress,
        },
        'gateway listening',
      )
      // Written now, not at the log's next periodic flush (LOG_DEFAULTS.flushIntervalMs): the line a supervisor waits for.
      logger.flush()
      const watched = certificates
      return {
        gateway: started,
        address,
        admin: adminAddress,
        gate,
        logger,
        metrics,
        certificates: watched,
        async stop(hurry) {
          const delay = setup.shutdownDelay ?? 0
          started.withdraw()
          logger.info({ shutdownDelay: delay }, 'shutting down')
          await shutdownDelay(delay, hurry ?? new Promise(() => undefined))
          // No payment still in its in-flight window is cut (docs/deployment-reference.md, stopping).
          const drainTimeout = setup.drainTimeout ?? Math.ceil(inFlightWindowMs(setup.timeout) / 1000)
          logger.info({ drainTimeout }, 'draining')
          await started.drain(drainTimeout * 1000)
          // A collector that is down or slow costs the stop at most this and never skips the rest (docs/tracing.md).
          await tracing?.shutdown().catch((error: unknown) => {
            logger.warn({ err: error }, 'spans not sent to the collector, dropped')
          })
          watched.close()
          await gate.close()
          await admin?.close()
          logger.info('stopped')
          // Every request's line is out before the process exits (docs/logs-and-metrics.md).
          await new Promise<void>((resolve) => logger.flush(() => resolve()))
        },
      }
    } catch (error) {
      await gate.close()
      throw error
    }
  } catch (error) {
    certificates?.close()
    await admin?.close()
    throw error
  }
}

/** What SIGHUP does to a gateway: its policies, credentials, rules and certificates read again at once. */
function reloader({ gate, logger, certificates }: Serving): () => void {
  return () => {
    logger.info('SIGHUP: reloading policies and credentials')
    void Promise.all([gate.reload(), certificates.reload()])
  }
}

/** How often at most a failing store is logged: a down Redis fails every request and every reconnection attempt. */
const STORE_ERROR_LOG_INTERVAL_MS = 1000

/** Every failure of the retry-protection store is counted, a release given up also on its own; one line a second at most says what it was. */
export function storeErrorReporter(
  logger: Logger,
  metrics: Metrics,
  now = () => performance.now(),
): (error: unknown) => void {
  let logged = Number.NEGATIVE_INFINITY
  return (error) => {
    metrics.storeError()
    if (isCoded(error, 'ERELEASE')) metrics.releaseFailure()
    if (isCoded(error, 'ERECORD')) metrics.recordFailure()
    const time = now()
    if (time - logged < STORE_ERROR_LOG_INTERVAL_MS) return
    logged = time
    // Code and message only: a Redis client's error carries the command and its arguments (docs/logs-and-metrics.md).
    logger.warn({ err: errorFacts(error) }, 'retry-protection store failed')
  }
}

/** How often at most the memory store's evictions are logged while they happen. */
const EVICTION_LOG_INTERVAL_MS = 60_000

/** Every eviction of the memory store is counted; one line a minute at most says how far back it still remembers (docs/idempotency.md). */
export function evictionReporter(logger: Logger, metrics: Metrics, now = () => performance.now()): MemoryStoreReport {
  let logged = Number.NEGATIVE_INFINITY
  // The store hands it over when it is built, before it can evict anything.
  let window: () => number
  return {
    window(read) {
      window = read
      metrics.retryProtectionWindow(read)
    },
    evicted() {
      metrics.retryProtectionEviction()
      const time = now()
      if (time - logged < EVICTION_LOG_INTERVAL_MS) return
      logged = time
      logger.warn(
        { windowSeconds: Math.floor(window()) },
        'retry-protection memory store full: payments are evicted before their TTL, and a retry of an evicted payment is forwarded again',
      )
    },
    // Logged as the store failure it is (storeErrorReporter); counted apart too.
    full: () => metrics.retryProtectionStoreFull(),
  }
}

export const run: Command = async (args, io) => {
  const options = parseServeOptions(args, io.env)
  const signals = stopSignals()
  const onReload = reloadSignal()
  if (options.workers > 1 && cluster.isPrimary) return runPrimary(options, io, signals, onReload)
  if (cluster.isWorker) return exitAfterStop(await runWorker(options, io, signals, onReload))
  const serving = await startOrStop(startServing(options, io), signals.stop)
  onReload(reloader(serving))
  await signals.stop
  await serving.stop(signals.hurry)
  return exitAfterStop(EXIT_OK)
}

/**
 * How long a stopped gateway lets what a dependency still holds open finish before it exits all the same: the trace
 * exporter's request to a collector that never answers would hold the process until the exporter's own timeout,
 * past the stop's bound (docs/tracing.md).
 */
const LEFT_OPEN_MS = 1000

/** The exit code, with the process ended `LEFT_OPEN_MS` from now if it is still alive; unref'd, the timer never holds it. */
function exitAfterStop(code: number): number {
  setTimeout(() => process.exit(code), LEFT_OPEN_MS).unref()
  return code
}

/** One of the `--workers` processes: a gateway without admin, reporting to the primary. */
async function runWorker(
  options: ServeOptions,
  io: Io,
  signals: StopSignals,
  onReload: (reload: () => void) => void,
): Promise<number> {
  try {
    const serving = await startOrStop(startServing(options, io, false), signals.stop)
    onReload(reloader(serving))
    // The primary's /metrics asks every worker over IPC: constructing an AggregatorRegistry is what
    // makes prom-client answer those requests here, from this worker's own registry.
    new AggregatorRegistry()
    AggregatorRegistry.setRegistries([serving.metrics.registry])
    // A cluster worker always has its IPC channel.
    ;(process.send as (message: string) => boolean)(WORKER_READY)
    await signals.stop
    await serving.stop(signals.hurry)
  } catch (error) {
    /* c8 ignore next: only a bug throws anything else, and it goes on with its stack */
    if (!isCoded(error, 'EUSAGE')) throw error
    // Under another primary (PM2's cluster mode) nobody would print it: said as a single process says it, the channel closed.
    if (process.env[SERVE_WORKER_VARIABLE] !== '1') {
      leavePrimary(EXIT_USAGE)
      throw error
    }
    // The primary prints the reason once for all its workers: one line (docs/cli.md).
    await new Promise((resolve) =>
      (process.send as NonNullable<typeof process.send>)({ [WORKER_FAILED]: error.message }, undefined, {}, resolve),
    )
    return leavePrimary(EXIT_USAGE)
  }
  return leavePrimary(EXIT_OK)
}

/**
 * The channel to the primary would keep a worker alive after its work is done. Closing it through
 * the worker (not process.disconnect, which exits 0 at once) keeps the exit code.
 */
function leavePrimary(code: number): number {
  ;(cluster.worker as Worker).disconnect()
  return code
}
