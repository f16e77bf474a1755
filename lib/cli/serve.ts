import cluster from 'node:cluster'
import type { AddressInfo } from 'node:net'
import { AggregatorRegistry } from 'prom-client'
import { createAdmin, metricsOf, type Admin } from '../admin.js'
import type { Authenticator } from '../checks/auth.js'
import { loadCredentials } from '../credentials.js'
import { buildChecks } from '../gate.js'
import { createLogger, type Logger } from '../log.js'
import { createMetrics, type Metrics } from '../metrics.js'
import { watchPolicies, type PolicyStore } from '../policy/store.js'
import { createGateway, type Gateway } from '../proxy/server.js'
import { EXIT_OK, UsageError, type Command, type Io } from './io.js'
import { parseServeOptions, type ServeOptions } from './options.js'
import { stopSignal } from './signals.js'
import { runPrimary, WORKER_READY } from './workers.js'

/** What `serve` needs, with the credentials as a file or as a store already built (the demo's). */
export interface ServeSetup extends Omit<ServeOptions, 'credentials' | 'workers'> {
  readonly credentials: string | Authenticator
  /** How long a drain waits for requests in flight, in ms. Default 10000. */
  readonly graceMs?: number
}

export interface Serving {
  readonly gateway: Gateway
  readonly address: AddressInfo
  readonly admin: AddressInfo | undefined
  readonly policies: PolicyStore
  readonly logger: Logger
  readonly metrics: Metrics
  /** Drains the gateway, then closes the admin listener and the policy watch. */
  stop(): Promise<void>
}

/**
 * Starts one gateway: admin listener first (so `/readyz` answers "not yet"
 * while policies load), policies, credentials, then the port. A bad file or a
 * port in use throws before anything listens on the gateway's port.
 */
export async function startServing(setup: ServeSetup, io: Io, withAdmin = true): Promise<Serving> {
  const logger = createLogger({ destination: io.stdout })
  const metrics = createMetrics()
  let gateway: Gateway | undefined
  let admin: Admin | undefined
  let adminAddress: AddressInfo | undefined
  if (withAdmin && setup.admin !== undefined) {
    admin = createAdmin({ ready: () => gateway?.ready === true, ...metricsOf(metrics.registry) })
    adminAddress = await bind('--admin', () => (admin as Admin).listen(setup.admin?.port as number, setup.admin?.host))
  }
  try {
    const policies = await watchPolicies(setup.policies, { logger, onReload: (outcome) => metrics.policyReload(outcome.ok) })
    try {
      const authenticator = typeof setup.credentials === 'string' ? await loadCredentials(setup.credentials) : setup.credentials
      const checks = buildChecks({ policies, authenticator, vendor: setup.vendor, basePath: setup.basePath, bodyLimit: setup.bodyLimit })
      const started = createGateway({ checks, target: setup.target, timeout: setup.timeout, logger, metrics })
      const address = await bind('--listen', () => started.listen(setup.listen.port, setup.listen.host))
      gateway = started
      logger.info({ listen: address, target: setup.target.href, entities: policies.entities }, 'gateway listening')
      return {
        gateway: started,
        address,
        admin: adminAddress,
        policies,
        logger,
        metrics,
        async stop() {
          logger.info('draining')
          await started.drain(setup.graceMs)
          policies.close()
          await admin?.close()
          logger.info('stopped')
        },
      }
    } catch (error) {
      policies.close()
      throw error
    }
  } catch (error) {
    await admin?.close()
    throw error
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
  if (options.workers > 1 && cluster.isPrimary) return runPrimary(options, io, stop)
  const serving = await startServing(options, io, cluster.isPrimary)
  if (cluster.isWorker) {
    // The primary aggregates every worker's metrics for its own /metrics.
    AggregatorRegistry.setRegistries([serving.metrics.registry])
    process.send?.(WORKER_READY)
  }
  await stop
  await serving.stop()
  return EXIT_OK
}
