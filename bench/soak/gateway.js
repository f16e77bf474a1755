// The soak's gateway child: payments-gate as `payments-gate serve` sets it up (credential store, the
// sample policy, JSON logs to /dev/null, metrics), run with --expose-gc so that it can report its
// memory after a full collection, when asked over IPC.
import pino from 'pino'
import { CredentialStore } from '../../dist/credentials.js'
import { buildChecks } from '../../dist/gate.js'
import { createLogger } from '../../dist/log.js'
import { createMetrics } from '../../dist/metrics.js'
import { staticPolicies } from '../../dist/policy/policy.js'
import { createGateway } from '../../dist/proxy/server.js'
import { loadPolicy } from '../micro/setup.js'
import { serve, target } from '../e2e/servers/child.js'

const authenticator = new CredentialStore(JSON.parse(process.env.BENCH_USERS))
const checks = buildChecks({ policies: staticPolicies([loadPolicy()]), authenticator, vendor: 'example' })
const logger = createLogger({ destination: pino.destination({ dest: '/dev/null', sync: false }) })
const gateway = createGateway({ checks, target: target(), logger, metrics: createMetrics() })

process.on('message', (message) => {
  if (message !== 'memory-after-gc') return
  // Two passes: the first can leave objects that only a second one finds unreachable (weak references, finalizers).
  globalThis.gc()
  globalThis.gc()
  const { rss, heapUsed } = process.memoryUsage()
  process.send({ afterGc: { rss, heapUsed } })
})
await serve(gateway.server)
