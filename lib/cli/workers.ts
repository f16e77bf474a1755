import cluster, { type Worker } from 'node:cluster'
import { AggregatorRegistry } from 'prom-client'
import { createAdmin, type Admin } from '../admin.js'
import { createGate } from '../gate.js'
import { checkIdempotencySpec } from '../idempotency/create-store.js'
import { createLogger } from '../log.js'
import { EXIT_OK, EXIT_USAGE, UsageError, logDestination, type Io } from './io.js'
import type { ServeOptions } from './options.js'

/** What a worker tells the primary once it listens. */
export const WORKER_READY = 'payments-gate:ready'

/**
 * `--workers N`: N processes share the gateway's port (node's cluster hands
 * out connections), so one pod uses every core. The primary serves no
 * payments: it checks the files once (a bad one is exit 2 here, not N
 * crashing workers), starts the workers, replaces one that dies, hosts the
 * admin listener with every worker's metrics summed, passes SIGHUP on to every
 * worker, and on SIGTERM drains them all before exiting.
 */
export async function runPrimary(options: ServeOptions, io: Io, stop: Promise<unknown>, onReload: (reload: () => void) => void): Promise<number> {
  checkIdempotencySpec(options.idempotency)
  await (await createGate(options)).close()
  const logger = createLogger({ destination: logDestination(io, true) })
  const ready = new Set<number>()
  const workers = new Set<Worker>()
  let stopping = false
  let failed!: (code: number) => void
  const failure = new Promise<number>((resolve) => {
    failed = resolve
  })

  function fork(): void {
    const worker = cluster.fork()
    workers.add(worker)
    worker.on('message', (message: unknown) => {
      if (message === WORKER_READY) ready.add(worker.id)
    })
    worker.on('exit', (code, signal) => {
      workers.delete(worker)
      const wasReady = ready.delete(worker.id)
      if (stopping) return
      logger.error({ worker: worker.id, code, signal }, 'worker exited')
      // A worker that could not start (its port refused) would fail again: stop instead of looping.
      if (!wasReady && code === EXIT_USAGE) failed(EXIT_USAGE)
      else fork()
    })
  }

  let admin: Admin | undefined
  if (options.admin !== undefined) {
    const aggregator = new AggregatorRegistry()
    admin = createAdmin({
      ready: () => !stopping && ready.size === options.workers,
      metrics: () => aggregator.clusterMetrics(),
      contentType: aggregator.contentType,
    })
    await bindAdmin(admin, options.admin.port, options.admin.host)
  }
  for (let i = 0; i < options.workers; i++) fork()
  logger.info({ workers: options.workers }, 'workers started')
  // A worker still starting reads the files itself, and has no SIGHUP listener yet to keep it alive.
  onReload(() => {
    for (const worker of workers) if (ready.has(worker.id)) worker.process.kill('SIGHUP')
  })
  const code = await Promise.race([stop.then(() => EXIT_OK), failure])
  stopping = true
  await Promise.all(
    [...workers].map(
      (worker) =>
        new Promise((resolve) => {
          worker.once('exit', resolve)
          worker.process.kill('SIGTERM')
        }),
    ),
  )
  await admin?.close()
  logger.info('stopped')
  return code
}

async function bindAdmin(admin: Admin, port: number, host: string | undefined): Promise<void> {
  try {
    await admin.listen(port, host)
  } catch (error) {
    throw new UsageError(`--admin: cannot listen (${(error as NodeJS.ErrnoException).code})`)
  }
}
