// (c) and (d) payments-gate, set up as `payments-gate serve` sets it up: the
// checks with a credential store and the sample policy, JSON request logs
// (to /dev/null, asynchronously, as pino writes stdout) and Prometheus metrics.
import pino from 'pino'
import { CredentialStore } from '../../../dist/credentials.js'
import { buildChecks } from '../../../dist/gate.js'
import { createLogger } from '../../../dist/log.js'
import { createMetrics } from '../../../dist/metrics.js'
import { staticPolicies } from '../../../dist/policy/policy.js'
import { createGateway } from '../../../dist/proxy/server.js'
import { loadPolicy } from '../../micro/setup.js'
import { serve, target } from './child.js'

const authenticator = new CredentialStore(JSON.parse(process.env.BENCH_USERS))
const checks = buildChecks({ policies: staticPolicies([loadPolicy()]), authenticator, vendor: 'example' })
const logger = createLogger({ destination: pino.destination({ dest: '/dev/null', sync: false }) })
const gateway = createGateway({ checks, target: target(), logger, metrics: createMetrics() })
await serve(gateway.server)
