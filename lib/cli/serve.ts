import cluster, { type Worker } from 'node:cluster'
import type { AddressInfo } from 'node:net'
import { AggregatorRegistry } from 'prom-client'
import { createAdmin, metricsOf, type Admin } from '../admin.js'
import type { Authenticator } from '../checks/auth.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { createGate, type Gate } from '../gate.js'
import { checkIdempotencySpec } from '../idempotency/create-store.js'
import type { MemoryStoreReport } from '../idempotency/memory.js'
import { createLogger, type Logger } from '../log.js'
import { createMetrics, type Metrics } from '../metrics.js'
import { createGateway, type Gateway } from '../surfaces/proxy/server.js'
import { EXIT_OK, UsageError, logDestination, type Command, type Io } from './io.js'
import { parseServeOptions, type ServeOptions } from './options.js'
import { reloadSignal, stopSignal } from './signals.js'
import { startTracing } from './tracing.js'
import { runPrimary, WORKER_READY } from './workers.js'

type RetryProtectionFlags = 'idempotency' | 'idempotencyTtl' | 'idempotencyFailure' | 'idempotencyReplicas' | 'idempotencyMaxEntries' | 'idempotencyMaxBytes'
type DefaultedFlags = RetryProtectionFlags | 'trustProxy' | 'mode'

/** What `serve` needs, with the credentials as a file or as a store already built (the demo's); retry protection, `trustProxy` and the mode as their defaults unless given. */
export interface ServeSetup extends Omit<ServeOptions, 'credentials' | 'workers' | DefaultedFlags>, Partial<Pick<ServeOptions, DefaultedFlags>> {
  readonly credentials: string | Authenticator
  /** How long a drain waits for requests in flight, in ms. Default 10000. */
  readonly graceMs?: number
}

export interface Serving {
  readonly gateway: Gateway
  readonly address: AddressInfo
  readonly admin: AddressInfo | undefined
  readonly gate: Gate
  readonly logger: Logger
  readonly metrics: Metrics
  /** Drains the gateway, then closes the gate and the admin listener. */
  stop(): Promise<void>
}

/**
 * Starts one gateway: admin listener first (so `/readyz` answers "not yet"
 * while policies load), then the gate (policies, credentials, checks), then the port. A bad file or a
 * port in use throws before anything listens on the gateway's port.
 */
export async function startServing(setup: ServeSetup, io: Io, withAdmin = true): Promise<Serving> {
  const logger = createLogger({ destination: logDestination(io, cluster.isWorker) })
  const metrics = createMetrics()
  // Before the gateway, which asks for a tracer once (docs/tracing.md).
  const tracing = await startTracing(io.env)
  let gateway: Gateway | undefined
  let admin: Admin | undefined
  let adminAddress: AddressInfo | undefined
  if (withAdmin && setup.admin !== undefined) {
    const { port, host } = setup.admin
    const listener = createAdmin({ ready: () => gateway?.ready === true, ...metricsOf(metrics.registry) })
    adminAddress = await bind('--admin', () => listener.listen(port, host))
    admin = listener
  }
  try {
    const idempotency = setup.idempotency ?? IDEMPOTENCY_DEFAULTS.store
    checkIdempotencySpec(idempotency)
    const onStoreError = storeErrorReporter(logger, metrics)
    const gate = await createGate({
      ...setup,
      logger,
      onPolicyReload: (outcome) => metrics.policyReload(outcome),
      onCredentialsReload: (outcome) => metrics.credentialsReload(outcome),
      // The Redis of retry protection also shares the failed-login throttle (docs/idempotency.md).
      throttleRedis: idempotency.startsWith('redis') ? idempotency : undefined,
      onStoreError,
    })
    try {
      // The rules file is the gate's, watched there; the gateway applies the gate's rules.
      const { backendErrors: _file, ...gatewaySetup } = setup
      const started = createGateway({ ...gatewaySetup, gate, logger, metrics, onStoreError, idempotencyReport: evictionReporter(logger, metrics) })
      const address = await bind('--listen', () => started.listen(setup.listen.port, setup.listen.host)).catch(async (error: unknown) => {
        // The gateway owns retry protection's store: a Redis client left open would keep the process alive.
        await started.drain(0)
        throw error
      })
      gateway = started
      logger.info({ listen: address, target: setup.target.href }, 'gateway listening')
      return {
        gateway: started,
        address,
        admin: adminAddress,
        gate,
        logger,
        metrics,
        async stop() {
          logger.info('draining')
          await started.drain(setup.graceMs)
          await tracing?.shutdown()
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
    await admin?.close()
    throw error
  }
}

/** What SIGHUP does to a gateway: its policies and credentials read again at once. */
function reloader({ gate, logger }: Serving): () => void {
  return () => {
    logger.info('SIGHUP: reloading policies and credentials')
    void gate.reload()
  }
}

/** How often at most a failing store is logged: a down Redis fails every request and every reconnection attempt. */
const STORE_ERROR_LOG_INTERVAL_MS = 1000

/** Every failure of the retry-protection store is counted; one line a second at most says what it was. */
export function storeErrorReporter(logger: Logger, metrics: Metrics, now = () => performance.now()): (error: unknown) => void {
  let logged = Number.NEGATIVE_INFINITY
  return (error) => {
    metrics.storeError()
    const time = now()
    if (time - logged < STORE_ERROR_LOG_INTERVAL_MS) return
    logged = time
    logger.warn({ err: error }, 'retry-protection store failed')
  }
}

/** How often at most the memory store's evictions are logged while they happen. */
const EVICTION_LOG_INTERVAL_MS = 60_000

/** Every eviction of the memory store is counted; one line a minute at most says how far back it still remembers (docs/idempotency.md). */
export function evictionReporter(logger: Logger, metrics: Metrics, now = () => performance.now()): MemoryStoreReport {
  let logged = Number.NEGATIVE_INFINITY
  let window = () => 0
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
  }
}

/** A port that cannot be bound is a start-up failure: one line, exit 2. */
async function bind(flag: string, listen: () => Promise<AddressInfo>): Promise<AddressInfo> {
  try {
    return await listen()
  } catch (error) {
    throw new UsageError(`${flag}: cannot listen (${(error as NodeJS.ErrnoException).code})`)
  }
}

export const run: Command = async (args, io) => {
  const options = parseServeOptions(args, io.env)
  const stop = stopSignal()
  const onReload = reloadSignal()
  if (options.workers > 1 && cluster.isPrimary) return runPrimary(options, io, stop, onReload)
  if (cluster.isWorker) return runWorker(options, io, stop, onReload)
  const serving = await startServing(options, io)
  onReload(reloader(serving))
  await stop
  await serving.stop()
  return EXIT_OK
}

/** One of the `--workers` processes: a gateway without admin, reporting to the primary. */
async function runWorker(options: ServeOptions, io: Io, stop: Promise<unknown>, onReload: (reload: () => void) => void): Promise<number> {
  try {
    const serving = await startServing(options, io, false)
    onReload(reloader(serving))
    // The primary's /metrics asks every worker over IPC: constructing an AggregatorRegistry is what
    // makes prom-client answer those requests here, from this worker's own registry.
    new AggregatorRegistry()
    AggregatorRegistry.setRegistries([serving.metrics.registry])
    // A cluster worker always has its IPC channel.
    ;(process.send as (message: string) => boolean)(WORKER_READY)
    await stop
    await serving.stop()
    return EXIT_OK
  } finally {
    // The channel to the primary would keep this process alive after its work is done. Closing it
    // through the worker (not process.disconnect, which exits 0 at once) keeps the exit code.
    ;(cluster.worker as Worker).disconnect()
  }
}
