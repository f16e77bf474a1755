import cluster, { type Worker } from 'node:cluster'
import { AggregatorRegistry } from 'prom-client'
import { createAdmin, type Admin } from '../admin.js'
import { CodedError, isCoded } from '../coded-error.js'
import { createGate } from '../gate.js'
import { NO_HANDLER_PROTECTION } from '../surfaces/retry-protection.js'
import { checkIdempotencySpec } from '../idempotency/create-store.js'
import { WORKERS_DEFAULTS } from '../defaults.js'
import { acceptErrorLog, createLogger } from '../log.js'
import { loadCertificates } from './certificates.js'
import { SERVE_WORKER_VARIABLE } from './flags.js'
import { EXIT_OK, logDestination, type Io } from './io.js'
import type { ServeOptions } from './options.js'
import { bind, unreadable } from './startup.js'
import { startOrStop, type StopSignals } from './signals.js'

/** What a worker tells the primary once it listens. */
export const WORKER_READY = 'payments-gate:ready'

/** The key of what a worker that cannot start tells the primary: its one-line reason, which the primary prints once for all. */
export const WORKER_FAILED = 'payments-gate:failed'

function failureOf(message: unknown): string | undefined {
  return typeof message === 'object' && message !== null
    ? (message as Record<string, string | undefined>)[WORKER_FAILED]
    : undefined
}

/**
 * Each process would keep its own memory store, so a retry that another
 * process takes would be forwarded again (docs/idempotency.md, one store per fleet).
 */
function refuseSeparateStores(options: ServeOptions): void {
  if (options.idempotency !== 'memory') return
  throw new CodedError(
    'EUSAGE',
    `${options.where('workers')} ${options.workers} with ${options.where('idempotency')} memory: each process would keep its own store and forward a retry again; give ${options.where('idempotency')} a Redis URL that every process shares (or off)`,
  )
}

/**
 * `--workers N`: N processes share the gateway's port (node's cluster hands
 * out connections), so one pod uses every core. The primary serves no
 * payments: it checks the files once (a bad one is exit 2 here, not N
 * crashing workers), starts the workers, replaces one that dies, hosts the
 * admin listener with every worker's metrics summed, passes SIGHUP on to every
 * worker, and passes SIGTERM and SIGINT on to every worker, so that each keeps
 * serving for the shutdown delay and drains, before exiting once they all have.
 */
export async function runPrimary(
  options: ServeOptions,
  io: Io,
  signals: StopSignals,
  onReload: (reload: () => void) => void,
): Promise<number> {
  refuseSeparateStores(options)
  const logger = createLogger({ destination: logDestination(io, true) })
  const ready = new Set<number>()
  const workers = new Set<Worker>()
  let stopping = false
  let failed!: (error: CodedError<'EUSAGE'>) => void
  const failure = new Promise<CodedError<'EUSAGE'>>((resolve) => {
    failed = resolve
  })

  /** The forks waited for in place of workers the system refused: cleared when the primary stops. */
  const respawns = new Set<NodeJS.Timeout>()
  function fork(): void {
    const worker = cluster.fork({ [SERVE_WORKER_VARIABLE]: '1' })
    workers.add(worker)
    // node's cluster tells a fork the system refused (no file descriptor or process left) by an `error`, and never by
    // an `exit`; with no listener the error would end the primary, and every worker and payment in flight with it.
    worker.on('error', (error: Error) => {
      logger.error({ worker: worker.id, err: error }, 'worker failed')
      /* c8 ignore next: a worker that started is replaced at its exit */
      if (worker.process.pid !== undefined) return
      workers.delete(worker)
      // Dropped from node's list of workers, as an exit would have dropped it.
      delete (cluster.workers as NonNullable<typeof cluster.workers>)[worker.id]
      const respawn = setTimeout(() => {
        respawns.delete(respawn)
        fork()
      }, WORKERS_DEFAULTS.respawnDelayMs)
      respawns.add(respawn)
    })
    worker.on('message', (message: unknown) => {
      if (message === WORKER_READY) ready.add(worker.id)
      const reason = failureOf(message)
      if (reason !== undefined) failed(new CodedError('EUSAGE', reason))
    })
    worker.on('exit', (code, signal) => {
      workers.delete(worker)
      ready.delete(worker.id)
      if (stopping) return
      logger.error({ worker: worker.id, code, signal }, 'worker exited')
      // No restart loop: a worker that could not start (its port refused) said why before it exited, which stops them all.
      fork()
    })
  }

  /** The files checked once, the variables warned about once for the fleet, the admin listener bound. */
  async function startUp(): Promise<Admin | undefined> {
    const checked = await Promise.resolve()
      .then(() => {
        checkIdempotencySpec(options.idempotency)
        return createGate({ ...options, ...NO_HANDLER_PROTECTION })
      })
      .catch((error: unknown) => {
        throw unreadable(error, options.where)
      })
    await checked.close()
    ;(await loadCertificates(options, options.where)).close()
    // The workers read the same variables and leave the warnings to the primary.
    for (const { variable, message } of options.warnings) logger.warn({ variable }, message)
    if (options.admin === undefined) return undefined
    const aggregator = new AggregatorRegistry()
    const listener = createAdmin({
      ready: () => !stopping && ready.size === options.workers,
      metrics: () => aggregator.clusterMetrics(),
      contentType: aggregator.contentType,
      onAcceptError: acceptErrorLog(logger),
    })
    const { port, host } = options.admin
    await bind(options.where('admin'), options.admin, () => listener.listen(port, host))
    return listener
  }

  // Until the workers are forked, a stop signal ends the primary at once, as it ends a gateway still starting.
  const admin = await startOrStop(startUp(), signals.stop)
  for (let i = 0; i < options.workers; i++) fork()
  logger.info({ workers: options.workers }, 'workers started')
  // Written now, as each worker's listening line is (serve.ts), not at the log's next periodic flush.
  logger.flush()
  // A worker still starting reads the files itself, and has no SIGHUP listener yet to keep it alive.
  onReload(() => {
    for (const worker of workers) if (ready.has(worker.id)) worker.process.kill('SIGHUP')
  })
  const outcome = await Promise.race([signals.stop, failure])
  stopping = true
  respawns.forEach(clearTimeout)
  const exited = Promise.all([...workers].map((worker) => new Promise((resolve) => worker.once('exit', resolve))))
  const pass = (signal: NodeJS.Signals) => {
    for (const worker of workers) worker.process.kill(signal)
  }
  // A failed start-up has nothing to wait for: SIGINT skips the workers' delay.
  pass(isCoded(outcome, 'EUSAGE') ? 'SIGINT' : outcome)
  void signals.hurry.then(() => pass('SIGINT'))
  await exited
  await admin?.close()
  logger.info('stopped')
  if (isCoded(outcome, 'EUSAGE')) throw outcome
  return EXIT_OK
}
